package errcode_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"svc/errcode"
)

// TestCatalog: every code has a status and a message of its own, and All lists each once.
func TestCatalog(t *testing.T) {
	seen := map[errcode.Code]bool{}
	for _, c := range errcode.All() {
		if seen[c] {
			t.Errorf("%s listed twice", c)
		}
		seen[c] = true
		if c != errcode.Internal && (c.Status() == 500 || c.Message() == errcode.Internal.Message()) {
			t.Errorf("%s has no catalog entry", c)
		}
	}
	if got := errcode.Code("NOPE").Status(); got != 500 {
		t.Errorf("unknown code status = %d, want 500", got)
	}
}

func TestWrite(t *testing.T) {
	rec := httptest.NewRecorder()
	errcode.Write(rec, errcode.RuntimeStopped, "")
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 503 || rec.Header().Get("Content-Type") != "application/json" || body.Error.Code != "RUNTIME_STOPPED" || body.Error.Message != errcode.RuntimeStopped.Message() {
		t.Errorf("Write = %d %v %+v", rec.Code, rec.Header(), body)
	}
}
