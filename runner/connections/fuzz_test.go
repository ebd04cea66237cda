package connections

import (
	"net/url"
	"strings"
	"testing"
)

// FuzzParsePath: whatever the model writes, an accepted path stays under the base URL's host,
// and neither the path sent nor any decoding of it up to maxDecodeLevels has a dot segment
// or a backslash.
func FuzzParsePath(f *testing.F) {
	for _, s := range []string{
		"/incidents/42", "/a/%2e%2e/b", "/a/..%2f..%2fetc", "//evil/x", "http://x/", "/a?b=c#d", "/%252e%252e",
		"/a/..;/b", `/a\b`, "/a/%5c", "/{{context.t}}/x", "/files/a%2Fb", "/ü/ß", "/a/%zz", "/%2F%2Fhost",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		rp, err := parsePath(p, map[string]string{"t": "v"})
		if err != nil {
			return
		}
		if !strings.HasPrefix(rp.escaped, "/") || strings.HasPrefix(rp.escaped, "//") {
			t.Fatalf("%q: escaped %q does not start with exactly one slash", p, rp.escaped)
		}
		u, err := url.Parse("http://base.example" + rp.escaped)
		if err != nil || u.Host != "base.example" {
			t.Fatalf("%q: escaped %q changes the host (%v)", p, rp.escaped, err)
		}
		cur := rp.escaped
		for level := 0; level <= maxDecodeLevels; level++ {
			if strings.Contains(cur, `\`) {
				t.Fatalf("%q: level %d of %q has a backslash", p, level, rp.escaped)
			}
			for _, piece := range strings.Split(strings.Trim(cur, "/"), "/") {
				name, _, _ := strings.Cut(piece, ";")
				if name == "." || name == ".." {
					t.Fatalf("%q: level %d of %q has a dot segment", p, level, rp.escaped)
				}
			}
			dec, err := url.PathUnescape(cur)
			if err != nil {
				break
			}
			cur = dec
		}
		if n := len(splitPath(rp.escaped)); n != len(rp.segs) {
			t.Fatalf("%q: %d segments sent, %d matched", p, n, len(rp.segs))
		}
	})
}
