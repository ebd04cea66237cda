package connections

import (
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"svc/runner/tools"
)

func TestParsePathRefuses(t *testing.T) {
	cases := []struct {
		path, rule string
	}{
		{"http://169.254.169.254/latest/meta-data", "rule: relative paths only"},
		{"HTTPS://example.com/x", "rule: relative paths only"},
		{"file:///etc/passwd", "rule: relative paths only"},
		{"javascript:alert(1)", "rule: relative paths only"},
		{"//evil.example/x", "rule: no host change"},
		{`\\evil.example\x`, "rule: no backslashes"},
		{`/a\..\b`, "rule: no backslashes"},
		{"/a/%5c/b", "rule: no backslashes"},
		{"/a/%5C..", "rule: no backslashes"},
		{"/../admin", "rule: no dot segments"},
		{"/a/..", "rule: no dot segments"},
		{"/a/./b", "rule: no dot segments"},
		{"/a/%2e%2e/b", "rule: no dot segments"},
		{"/a/%2E%2e/b", "rule: no dot segments"},
		{"/a/.%2E/b", "rule: no dot segments"},
		{"/a/%2e/b", "rule: no dot segments"},
		{"/a/..%2fetc", "rule: no dot segments"},
		{"/a/..%2Fetc", "rule: no dot segments"},
		{"/a/%252e%252e/b", "rule: no dot segments"},     // decoded twice
		{"/a/%25252e%25252e/b", "rule: no dot segments"}, // decoded three times
		{"/a/..;/b", "rule: no dot segments"},            // Tomcat reads "..;" as ".."
		{"/a/%2e%2e;x=1/b", "rule: no dot segments"},
		{"/a//b", "rule: no empty segments"},
		{"/%2F%2Fevil.example/x", "rule: no empty segments"}, // encoded "//"
		{"/a/%2f", "rule: no empty segments"},
		{"/a#frag", "fragment"},
		{"/a/%0d%0aHost:%20evil", "rule: printable paths only"},
		{"/a/\nb", "rule: printable paths only"},
		{"/a/%zz", "bad percent-encoding"},
		{"", "required"},
		{"/a?%zz", "bad query"},
		{"/" + strings.Repeat("a", 4096), "is over the limit of 4096"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			_, err := parsePath(c.path, nil)
			if !errors.Is(err, tools.ErrBadArguments) || !strings.Contains(err.Error(), c.rule) {
				t.Fatalf("parsePath(%q) = %v, want a bad-arguments error with %q", c.path, err, c.rule)
			}
			if !strings.Contains(err.Error(), "path") {
				t.Errorf("error %q does not name the field", err)
			}
		})
	}
}

func TestParsePath(t *testing.T) {
	ctx := map[string]string{"tenant": "acme corp", "slash": "a/b"}
	cases := []struct {
		path    string
		escaped string
		segs    []string
		query   url.Values
	}{
		{"/incidents", "/incidents", []string{"incidents"}, nil},
		{"incidents/42", "/incidents/42", []string{"incidents", "42"}, nil},
		{"/incidents/", "/incidents/", []string{"incidents"}, nil},
		{"/", "/", nil, nil},
		{"/%69ncidents", "/incidents", []string{"incidents"}, nil},
		{"/files/a%2Fb", "/files/a%2Fb", []string{"files", "a/b"}, nil},
		{"/search/hello world", "/search/hello%20world", []string{"search", "hello world"}, nil},
		{"/a..b/.hidden/...", "/a..b/.hidden/...", []string{"a..b", ".hidden", "..."}, nil},
		{"/incidents?status=open&page=2", "/incidents", []string{"incidents"}, url.Values{"status": {"open"}, "page": {"2"}}},
		{"/t/{{context.tenant}}/x", "/t/acme%20corp/x", []string{"t", "acme corp", "x"}, nil},
		{"/t/{{context.slash}}", "/t/a%2Fb", []string{"t", "a/b"}, nil},
		{"/t/{{other}}", "/t/%7B%7Bother%7D%7D", []string{"t", "{{other}}"}, nil},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) {
			rp, err := parsePath(c.path, ctx)
			if err != nil {
				t.Fatal(err)
			}
			if rp.escaped != c.escaped {
				t.Errorf("escaped = %q, want %q", rp.escaped, c.escaped)
			}
			if d := cmp.Diff(c.segs, rp.segs); d != "" {
				t.Errorf("segs (-want +got):\n%s", d)
			}
			if d := cmp.Diff(c.query, rp.query); d != "" {
				t.Errorf("query (-want +got):\n%s", d)
			}
		})
	}
}

// TestParsePathContextTraversal: a context value is escaped as one segment, and a value that
// would be a dot segment once a server decodes %2F is refused like one written in the path.
func TestParsePathContextTraversal(t *testing.T) {
	for _, v := range []string{"../admin", "..", ".", "a/../../b"} {
		_, err := parsePath("/t/{{ context.evil }}", map[string]string{"evil": v})
		if err == nil || !strings.Contains(err.Error(), "rule: no dot segments") {
			t.Errorf("context %q: err = %v, want the dot segment rule", v, err)
		}
	}
}

func TestParsePathMissingContext(t *testing.T) {
	_, err := parsePath("/t/{{context.tenant}}", map[string]string{})
	var miss *MissingContextError
	if !errors.As(err, &miss) || miss.Key != "tenant" || !errors.Is(err, tools.ErrBadArguments) {
		t.Fatalf("err = %v, want a MissingContextError for tenant", err)
	}
	if !strings.Contains(err.Error(), `no key "tenant"`) {
		t.Errorf("error %q does not name the key", err)
	}
}

func TestFill(t *testing.T) {
	got, err := fill("query.q", "{{context.a}}-{{ context.b }}-{{x}}-{{context.}}-{{", map[string]string{"a": "1", "b": "2"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := "1-2-{{x}}-{{context.}}-{{"; got != want {
		t.Errorf("fill = %q, want %q", got, want)
	}
}
