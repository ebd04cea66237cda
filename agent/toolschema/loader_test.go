package toolschema

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestLoaderIsLocked compiles past the check of Compile that refuses $refs outside the schema:
// the compiler itself must load neither a file that exists nor a URL that answers.
func TestLoaderIsLocked(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "s.json")
	if err := os.WriteFile(file, []byte(`{"type":"string"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	for _, ref := range []string{"file://" + file, srv.URL + "/s.json", "s.json"} {
		doc, err := decode([]byte(`{"type":"object","properties":{"a":{"$ref":"` + ref + `"}}}`))
		if err != nil {
			t.Fatal(err)
		}
		_, err = compile(doc)
		if !errors.Is(err, ErrExternalRef) {
			t.Errorf("compile with $ref %s = %v, want an error wrapping ErrExternalRef", ref, err)
		}
		if err != nil && !strings.Contains(err.Error(), "outside the schema") {
			t.Errorf("compile with $ref %s = %q, want it to say the reference is outside the schema", ref, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the HTTP server was asked %d times, want 0", n)
	}
}
