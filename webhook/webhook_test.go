package webhook_test

import (
	"bytes"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"svc/webhook"
)

// fixtures holds real-shaped payloads, one directory per host, named after
// the event they carry.
//
//go:embed testdata/github/*.json testdata/gitea/*.json testdata/gitlab/*.json
var fixtures embed.FS

// fixture returns testdata/<host>/<name>.json.
func fixture(tb testing.TB, host webhook.Host, name string) []byte {
	tb.Helper()
	data, err := fixtures.ReadFile("testdata/" + string(host) + "/" + name + ".json")
	if err != nil {
		tb.Fatalf("read fixture: %v", err)
	}
	return data
}

// headers builds a header from name/value pairs.
func headers(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// diff lists the fields in which two values differ, as "(-want +got)" lines.
func diff(want, got any) string {
	var b strings.Builder
	diffValue(&b, "", reflect.ValueOf(want), reflect.ValueOf(got))
	return b.String()
}

func diffValue(b *strings.Builder, path string, want, got reflect.Value) {
	if want.Kind() == reflect.Pointer && got.Kind() == reflect.Pointer && !want.IsNil() && !got.IsNil() {
		diffValue(b, path, want.Elem(), got.Elem())
		return
	}
	if want.Kind() == reflect.Struct && got.Kind() == reflect.Struct && want.Type() == got.Type() {
		for i := 0; i < want.NumField(); i++ {
			diffValue(b, path+"."+want.Type().Field(i).Name, want.Field(i), got.Field(i))
		}
		return
	}
	if !reflect.DeepEqual(want.Interface(), got.Interface()) {
		fmt.Fprintf(b, "%s:\n\t-%#v\n\t+%#v\n", path, want.Interface(), got.Interface())
	}
}

// parseCase is one row of the per-host Parse tables.
type parseCase struct {
	name    string
	fixture string
	body    []byte // used instead of the fixture when set
	header  http.Header
	want    webhook.Event
}

// runParseCases runs a table of fixture deliveries through Parse.
func runParseCases(t *testing.T, host webhook.Host, cases []parseCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := tc.body
			if body == nil {
				body = fixture(t, host, tc.fixture)
			}
			got, err := webhook.Parse(host, tc.header, body)
			if err != nil {
				t.Fatalf("Parse(%s, %s) error: %v", host, tc.fixture, err)
			}
			if d := diff(tc.want, got); d != "" {
				t.Errorf("Parse(%s, %s) mismatch (-want +got):\n%s", host, tc.fixture, d)
			}
			if got.Kind == webhook.KindPush {
				checkPushInvariants(t, got.Push)
			}
		})
	}
}

// checkPushInvariants holds for every push Parse returns; the fuzz test
// checks the same.
func checkPushInvariants(t *testing.T, p *webhook.Push) {
	t.Helper()
	if p == nil {
		t.Fatal("KindPush event without Push")
	}
	if (p.Branch == "") == (p.Tag == "") {
		t.Errorf("push has Branch %q and Tag %q, want exactly one", p.Branch, p.Tag)
	}
	if p.Ref != "refs/heads/"+p.Branch && p.Ref != "refs/tags/"+p.Tag {
		t.Errorf("Ref %q does not match Branch %q / Tag %q", p.Ref, p.Branch, p.Tag)
	}
	if len(p.After) != 40 && len(p.After) != 64 {
		t.Errorf("After %q is not a SHA", p.After)
	}
	if p.Deleted != (p.After == webhook.ZeroSHA) {
		t.Errorf("Deleted %v with After %q", p.Deleted, p.After)
	}
	if p.Repository.CloneURL == "" && !p.Deleted {
		t.Errorf("push without clone URL")
	}
}

// errCase is one row of the per-host error tables.
type errCase struct {
	name    string
	header  http.Header
	body    string
	wantErr error  // matched with errors.Is
	wantMsg string // the exact error text, if set
}

// runErrCases checks that every row fails with the expected error.
func runErrCases(t *testing.T, host webhook.Host, cases []errCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := webhook.Parse(host, tc.header, []byte(tc.body))
			if err == nil {
				t.Fatalf("Parse() = %+v, want error %v", got, tc.wantErr)
			}
			if !errors.Is(err, tc.wantErr) {
				t.Errorf("Parse() error = %v, want errors.Is %v", err, tc.wantErr)
			}
			if tc.wantMsg != "" && err.Error() != tc.wantMsg {
				t.Errorf("Parse() error = %q, want %q", err.Error(), tc.wantMsg)
			}
		})
	}
}

// mutate returns a fixture with the dotted paths in set changed, as
// mutateJSON does.
func mutate(t *testing.T, host webhook.Host, name string, set map[string]any) string {
	t.Helper()
	return mutateJSON(t, fixture(t, host, name), set)
}

func TestHostFromPath(t *testing.T) {
	tests := []struct {
		name   string
		want   webhook.Host
		wantOK bool
	}{
		{"github", webhook.GitHub, true},
		{"gitea", webhook.Gitea, true},
		{"forgejo", webhook.Gitea, true},
		{"gitlab", webhook.GitLab, true},
		{"GitHub", webhook.GitHub, true},
		{"bitbucket", "", false},
		{"", "", false},
		{"github/", "", false},
	}
	for _, tc := range tests {
		got, ok := webhook.HostFromPath(tc.name)
		if got != tc.want || ok != tc.wantOK {
			t.Errorf("HostFromPath(%q) = %q, %v, want %q, %v", tc.name, got, ok, tc.want, tc.wantOK)
		}
	}
}

func TestParseUnsupportedHost(t *testing.T) {
	_, err := webhook.Parse("bitbucket", headers("X-Event-Key", "repo:push"), []byte(`{}`))
	if !errors.Is(err, webhook.ErrUnsupportedHost) {
		t.Fatalf("Parse(bitbucket) error = %v, want ErrUnsupportedHost", err)
	}
	if want := `webhook: unsupported host "bitbucket"`; err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}
}

// TestParseSizeLimit checks MaxPayloadBytes at its edge: a body of exactly
// the limit is parsed, one byte more is refused before any decoding.
func TestParseSizeLimit(t *testing.T) {
	push := fixture(t, webhook.GitHub, "push")
	atLimit := make([]byte, webhook.MaxPayloadBytes)
	copy(atLimit, push)
	for i := len(push); i < len(atLimit); i++ {
		atLimit[i] = ' ' // trailing JSON whitespace
	}
	h := headers("X-GitHub-Event", "push")
	ev, err := webhook.Parse(webhook.GitHub, h, atLimit)
	if err != nil || ev.Kind != webhook.KindPush {
		t.Fatalf("Parse(body of MaxPayloadBytes) = %+v, %v, want a push", ev, err)
	}
	_, err = webhook.Parse(webhook.GitHub, h, append(atLimit, ' '))
	if !errors.Is(err, webhook.ErrPayloadTooLarge) {
		t.Fatalf("Parse(body of MaxPayloadBytes+1) error = %v, want ErrPayloadTooLarge", err)
	}
}

// TestParseDoesNotRetainBody checks that the Push holds no reference into
// the caller's buffer (strings are copied by decoding).
func TestParseDoesNotRetainBody(t *testing.T) {
	body := bytes.Clone(fixture(t, webhook.GitHub, "push"))
	ev, err := webhook.Parse(webhook.GitHub, headers("X-GitHub-Event", "push"), body)
	if err != nil {
		t.Fatal(err)
	}
	before := *ev.Push
	for i := range body {
		body[i] = 'x'
	}
	if d := diff(before, *ev.Push); d != "" {
		t.Errorf("push changed with the body (-before +after):\n%s", d)
	}
}

func TestPayloadError(t *testing.T) {
	tests := []struct {
		err  *webhook.PayloadError
		want string
	}{
		{&webhook.PayloadError{Host: webhook.GitHub, Event: "push", Field: "after", Problem: "missing"}, `webhook: github push: missing "after"`},
		{&webhook.PayloadError{Host: webhook.GitLab, Event: "tag push", Field: "ref", Problem: `"x" does not start with refs/`}, `webhook: gitlab tag push: invalid "ref": "x" does not start with refs/`},
		{&webhook.PayloadError{Host: webhook.Gitea, Event: "push", Problem: "invalid JSON: unexpected end of JSON input"}, `webhook: gitea push: invalid JSON: unexpected end of JSON input`},
	}
	for _, tc := range tests {
		if got := tc.err.Error(); got != tc.want {
			t.Errorf("Error() = %q, want %q", got, tc.want)
		}
		if !errors.Is(tc.err, webhook.ErrInvalidPayload) {
			t.Errorf("errors.Is(%v, ErrInvalidPayload) = false", tc.err)
		}
		var pe *webhook.PayloadError
		if !errors.As(fmt.Errorf("wrapped: %w", tc.err), &pe) || pe != tc.err {
			t.Errorf("errors.As did not find the *PayloadError")
		}
	}
}

// formEncode wraps a JSON body the way GitHub and Gitea send it with the
// application/x-www-form-urlencoded content type.
func formEncode(body []byte) []byte {
	return []byte(url.Values{"payload": {string(body)}}.Encode())
}

// remove is a mutateJSON value that deletes the key.
const remove = "\x00remove"

// mutateJSON decodes a JSON object, sets each dotted path in set to its
// value (remove deletes the key, nil writes null) and re-encodes it.
func mutateJSON(t *testing.T, data []byte, set map[string]any) string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode fixture: %v", err)
	}
	for path, value := range set {
		keys := strings.Split(path, ".")
		obj := doc
		for _, k := range keys[:len(keys)-1] {
			next, ok := obj[k].(map[string]any)
			if !ok {
				t.Fatalf("mutate %q: %q is not an object", path, k)
			}
			obj = next
		}
		last := keys[len(keys)-1]
		if value == remove {
			delete(obj, last)
		} else {
			obj[last] = value
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatalf("encode fixture: %v", err)
	}
	return string(out)
}
