package api_test

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"svc/api"
	"svc/migrations/dbtest"
)

// spaces is an endless reader of ASCII spaces (JSON whitespace), so a test can stream a body of
// any size without allocating it.
type spaces struct{}

var spaceBlock = []byte(strings.Repeat(" ", 64<<10))

func (spaces) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		n += copy(p[n:], spaceBlock)
	}
	return n, nil
}

// paddedJSON streams doc followed by spaces up to exactly size bytes.
func paddedJSON(doc string, size int64) io.Reader {
	return io.MultiReader(strings.NewReader(doc), io.LimitReader(spaces{}, size-int64(len(doc))))
}

// countingReader counts what is read from it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

func TestBodyLimit(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	doc := `{"name":"edge"}`

	// Exactly at the limit, streamed with no declared length: accepted.
	rec := h.do(request{method: "POST", path: "/api/agents", token: h.admin, body: paddedJSON(doc, api.MaxBodyBytes), contentType: "application/json"})
	if rec.Code != http.StatusCreated {
		t.Fatalf("body of exactly %d bytes = %d %s, want 201", api.MaxBodyBytes, rec.Code, rec.Body.String())
	}
	// One byte more, streamed: 413 once the reader passes the limit.
	rec = h.do(request{method: "POST", path: "/api/agents", token: h.admin, body: paddedJSON(doc, api.MaxBodyBytes+1), contentType: "application/json"})
	if rec.Code != http.StatusRequestEntityTooLarge || errorOf(t, rec).Error.Code != "PAYLOAD_TOO_LARGE" {
		t.Fatalf("streamed body of %d bytes = %d %s, want 413 PAYLOAD_TOO_LARGE", api.MaxBodyBytes+1, rec.Code, rec.Body.String())
	}
	// One byte more, declared in Content-Length: 413 before anything is read, even unauthenticated.
	body := &countingReader{r: paddedJSON(doc, api.MaxBodyBytes+1)}
	req := httptest.NewRequest("POST", "/api/agents", body)
	req.ContentLength = api.MaxBodyBytes + 1
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.handler.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || body.n != 0 {
		t.Fatalf("declared %d bytes = %d %s after reading %d bytes, want 413 before reading", api.MaxBodyBytes+1, w.Code, w.Body.String(), body.n)
	}
	// The tar.gz route is bounded the same way. gzip reads concatenated members; members that
	// hold nothing but a 64 KiB header Extra field are body bytes without any tree bytes, so the
	// reader passes the limit before it sees a tar header.
	var big bytes.Buffer
	zw := gzip.NewWriter(&big)
	extra := bytes.Repeat([]byte{'x'}, 1<<16-1)
	for big.Len() <= api.MaxBodyBytes {
		zw.Reset(&big)
		zw.Extra = extra
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rec = h.do(request{method: "POST", path: "/api/agents/" + h.createAgent("tgz") + "/source-versions", token: h.admin,
		body: io.Reader(&big), contentType: "application/gzip"})
	if rec.Code != http.StatusRequestEntityTooLarge || errorOf(t, rec).Error.Code != "PAYLOAD_TOO_LARGE" {
		t.Errorf("tar.gz over the limit = %d %s, want 413 PAYLOAD_TOO_LARGE", rec.Code, rec.Body.String())
	}
}

func TestStrictJSON(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	agent := h.createAgent("strict")
	tests := []struct {
		name, path, body, ct string
		status               int
		code, field, inMsg   string
	}{
		{"unknown field", "/api/agents", `{"name":"x","colour":"red"}`, "", 400, "INVALID_REQUEST", "colour", "colour"},
		{"wrong type", "/api/agents", `{"name":5}`, "", 400, "INVALID_REQUEST", "name", "must be a string, not number"},
		{"wrong nested type", "/api/agents/" + agent + "/source-versions", `{"files":{"svc.json":5}}`, "", 400, "INVALID_REQUEST", "files", "must be a string"},
		{"bool as string", "/api/agents/" + agent + "/deploy-settings", `{"autoDeploy":"yes"}`, "", 400, "INVALID_REQUEST", "autoDeploy", "must be a boolean, not string"},
		{"ttl as float", "/api/agents/" + agent + "/tokens", `{"ttl":60.5}`, "", 400, "INVALID_REQUEST", "ttl", "must be an integer, not number"},
		{"not an object", "/api/agents", `["x"]`, "", 400, "INVALID_REQUEST", "", "must be a JSON object"},
		{"two values", "/api/agents", `{"name":"x"} {"name":"y"}`, "", 400, "INVALID_REQUEST", "", "exactly one JSON object"},
		{"syntax", "/api/agents", `{"name":`, "", 400, "INVALID_REQUEST", "", "ends before"},
		{"garbage", "/api/agents", `{"name" "x"}`, "", 400, "INVALID_REQUEST", "", "not valid JSON"},
		{"empty", "/api/agents", ``, "", 400, "INVALID_REQUEST", "", "empty"},
		{"missing name", "/api/agents", `{}`, "", 400, "INVALID_REQUEST", "name", "name: is required"},
		{"bad slug", "/api/agents", `{"name":"x","slug":"Not A Slug"}`, "", 400, "INVALID_REQUEST", "slug", "slug:"},
		{"form body", "/api/agents", `name=x`, "application/x-www-form-urlencoded", 415, "UNSUPPORTED_MEDIA_TYPE", "", "application/json"},
		{"bad kind", "/api/tokens", `{"name":"x","kind":"root"}`, "", 400, "INVALID_REQUEST", "kind", "kind:"},
		{"bad secret name", "/api/agents/" + agent + "/secrets/lower", `{"value":"x"}`, "", 400, "INVALID_REQUEST", "name", "[A-Z_][A-Z0-9_]*"},
		{"secret without value", "/api/agents/" + agent + "/secrets/OK", `{}`, "", 400, "INVALID_REQUEST", "value", "value: is required"},
		{"source without type", "/api/agents/" + agent + "/source", `{"url":"https://x.test/a"}`, "", 400, "INVALID_REQUEST", "type", "type:"},
		{"ttl too small", "/api/agents/" + agent + "/tokens", `{"ttl":59}`, "", 400, "INVALID_REQUEST", "ttl", "between 60 and 86400"},
		{"ttl too large", "/api/agents/" + agent + "/tokens", `{"ttl":86401}`, "", 400, "INVALID_REQUEST", "ttl", "between 60 and 86400"},
		{"bad commit", "/api/agents/" + agent + "/commit-statuses", `{"commit":"abc","state":"success"}`, "", 400, "INVALID_REQUEST", "commit", "full commit SHA"},
		{"bad state", "/api/agents/" + agent + "/commit-statuses", `{"commit":"` + strings.Repeat("a", 40) + `","state":"green"}`, "", 400, "INVALID_REQUEST", "state", "state:"},
	}
	for _, tt := range tests {
		method := "POST"
		if strings.Contains(tt.path, "/secrets/") || strings.HasSuffix(tt.path, "/source") || strings.HasSuffix(tt.path, "settings") {
			method = "PUT"
		}
		ct := tt.ct
		if ct == "" {
			ct = "application/json"
		}
		rec := h.do(request{method: method, path: tt.path, token: h.admin, body: []byte(tt.body), contentType: ct})
		if rec.Code != tt.status {
			t.Errorf("%s: status %d %s, want %d", tt.name, rec.Code, rec.Body.String(), tt.status)
			continue
		}
		e := errorOf(t, rec)
		if e.Error.Code != tt.code || e.Error.Field != tt.field || !strings.Contains(e.Error.Message, tt.inMsg) {
			t.Errorf("%s: error %+v, want code %s, field %q, message containing %q", tt.name, e.Error, tt.code, tt.field, tt.inMsg)
		}
	}
}

func TestWrongTypeNeverEchoesTheValue(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	agent := h.createAgent("echo")
	for _, body := range []string{`{"value":918273645}`, `{"value":[918273645]}`, `{"value":{"918273645":1}}`} {
		rec := h.do(request{method: "PUT", path: "/api/agents/" + agent + "/secrets/X", token: h.admin, body: []byte(body), contentType: "application/json"})
		if rec.Code != http.StatusBadRequest || strings.Contains(rec.Body.String(), "918273645") {
			t.Errorf("PUT secret %s = %d %s; want 400 without the value", body, rec.Code, rec.Body.String())
		}
	}
}

func TestRequestID(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	rec := h.do(request{method: "GET", path: "/health"})
	generated := rec.Header().Get(api.RequestIDHeader)
	if generated == "" {
		t.Fatal("no X-Request-Id on a response")
	}
	for _, good := range []string{"trace-42.a:b_c", strings.Repeat("x", 64)} {
		rec = h.do(request{method: "GET", path: "/health", header: map[string]string{api.RequestIDHeader: good}})
		if got := rec.Header().Get(api.RequestIDHeader); got != good {
			t.Errorf("valid incoming id %q: response id %q, want it kept", good, got)
		}
	}
	for _, bad := range []string{"has space", "semi;colon", strings.Repeat("x", 65), "new\nline", "pk_abcdefabcdef", "ak_abcdefabcdef"} {
		rec = h.do(request{method: "GET", path: "/health", header: map[string]string{api.RequestIDHeader: bad}})
		if got := rec.Header().Get(api.RequestIDHeader); got == bad || got == "" {
			t.Errorf("invalid incoming id %q: response id %q, want a fresh one", bad, got)
		}
	}
	// Errors, unknown routes and unauthenticated calls carry one too, and the log names it.
	for _, r := range []request{{method: "GET", path: "/nope"}, {method: "GET", path: "/api/agents"}, {method: "PATCH", path: "/api/agents"}} {
		rec = h.do(r)
		id := rec.Header().Get(api.RequestIDHeader)
		if id == "" || !strings.Contains(h.logs.String(), `"request_id":"`+id+`"`) {
			t.Errorf("%s %s: request id %q missing from the response or the log", r.method, r.path, id)
		}
	}
	if rec := h.do(request{method: "GET", path: "/nope"}); rec.Code != 404 || errorOf(t, rec).Error.Code != "NOT_FOUND" {
		t.Errorf("unknown route = %d %s, want 404 NOT_FOUND", rec.Code, rec.Body.String())
	}
	if rec := h.do(request{method: "PATCH", path: "/api/agents"}); rec.Code != 405 || errorOf(t, rec).Error.Code != "METHOD_NOT_ALLOWED" {
		t.Errorf("wrong method = %d %s, want 405 METHOD_NOT_ALLOWED", rec.Code, rec.Body.String())
	}
}

// errReader fails every read.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestUnreadableBodyIsNotInternal(t *testing.T) {
	h := newHarness(t, dbtest.SQLite(t))
	rec := h.do(request{method: "POST", path: "/api/agents", token: h.admin, body: errReader{}, contentType: "application/json"})
	if rec.Code != http.StatusBadRequest {
		t.Errorf("unreadable body = %d %s, want 400", rec.Code, rec.Body.String())
	}
}
