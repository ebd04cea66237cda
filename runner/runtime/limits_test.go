package runtime_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"svc/runner/runtime"
)

func metadataOf(keys, keyLen, valLen int) map[string]string {
	m := map[string]string{}
	for i := range keys {
		k := fmt.Sprintf("k%03d", i)
		if i == 0 && keyLen > 0 {
			k = strings.Repeat("é", keyLen) // characters, not bytes
		}
		v := "v"
		if i == 0 && valLen > 0 {
			v = strings.Repeat("ü", valLen)
		}
		m[k] = v
	}
	return m
}

var png = base64.StdEncoding.EncodeToString([]byte("\x89PNG fake image bytes"))

func images(n int) []map[string]string {
	out := make([]map[string]string, n)
	for i := range out {
		out[i] = map[string]string{"mimeType": "image/png", "data": png}
	}
	return out
}

func TestRequestLimits(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "support-desk")})
	cases := []struct {
		name   string
		body   map[string]any
		status int
		field  string
	}{
		{"message required", map[string]any{"scope_id": "x"}, 400, "message"},
		{"empty message", map[string]any{"message": ""}, 400, "message"},
		{"empty message with an image", map[string]any{"message": "", "images": images(1)}, 200, ""},
		{"no message with an attachment", map[string]any{"attachments": []map[string]string{{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("notes"))}}}, 200, ""},
		{"message wrong type", map[string]any{"message": 5}, 400, "message"},
		{"50 metadata keys", map[string]any{"message": "m", "metadata": metadataOf(50, 0, 0)}, 200, ""},
		{"51 metadata keys", map[string]any{"message": "m", "metadata": metadataOf(51, 0, 0)}, 400, "metadata"},
		{"key of 64 characters", map[string]any{"message": "m", "metadata": metadataOf(1, 64, 0)}, 200, ""},
		{"key of 65 characters", map[string]any{"message": "m", "metadata": metadataOf(1, 65, 0)}, 400, "metadata"},
		{"value of 1024 characters", map[string]any{"message": "m", "metadata": metadataOf(1, 0, 1024)}, 200, ""},
		{"value of 1025 characters", map[string]any{"message": "m", "metadata": metadataOf(1, 0, 1025)}, 400, "metadata"},
		{"metadata not strings", map[string]any{"message": "m", "metadata": map[string]any{"a": 1}}, 400, "metadata"},
		{"5 images", map[string]any{"message": "m", "images": images(5)}, 200, ""},
		{"6 images", map[string]any{"message": "m", "images": images(6)}, 400, "images"},
		{"image as data URL", map[string]any{"message": "m", "images": []string{"data:image/png;base64," + png}}, 200, ""},
		{"image not an image", map[string]any{"message": "m", "images": []map[string]string{{"mimeType": "text/plain", "data": png}}}, 400, "images[0].mimeType"},
		{"image bad base64", map[string]any{"message": "m", "images": []map[string]string{{"mimeType": "image/png", "data": "!!!"}}}, 400, "images[0].data"},
		{"attachment unsupported", map[string]any{"message": "m", "attachments": []map[string]string{{"mimeType": "application/x-msdownload", "data": png}}}, 400, "attachments[0].mimeType"},
		{"attachment bad delivery", map[string]any{"message": "m", "attachments": []map[string]string{{"mimeType": "application/pdf", "data": png, "delivery": "later"}}}, 400, "attachments[0].delivery"},
		{"attachment with data URL prefix", map[string]any{"message": "m", "attachments": []map[string]string{{"mimeType": "application/pdf", "data": "data:application/pdf;base64," + png}}}, 400, "attachments[0].data"},
		{"max_session_tokens 0", map[string]any{"message": "m", "max_session_tokens": 0}, 400, "max_session_tokens"},
		{"max_session_tokens -1", map[string]any{"message": "m", "max_session_tokens": -1}, 400, "max_session_tokens"},
		{"max_session_tokens fraction", map[string]any{"message": "m", "max_session_tokens": 1.5}, 400, "max_session_tokens"},
		{"max_session_tokens 1", map[string]any{"message": "m", "max_session_tokens": 1}, 200, ""},
		{"model without provider", map[string]any{"message": "m", "model": map[string]any{"model": "x"}}, 400, "model.provider"},
		{"model unknown provider", map[string]any{"message": "m", "model": map[string]any{"provider": "acme", "model": "x"}}, 400, "model.provider"},
		{"model bad effort", map[string]any{"message": "m", "model": map[string]any{"provider": "echo", "effort": "max"}}, 400, "model.effort"},
		{"unknown agent", map[string]any{"message": "m", "agent": "nobody"}, 400, "agent"},
		{"named agent", map[string]any{"message": "m", "agent": "billing"}, 200, ""},
		{"unknown skill", map[string]any{"message": "m", "skill": "nope"}, 400, "skill"},
		{"skill of another agent", map[string]any{"message": "m", "agent": "billing", "skill": "refunds"}, 200, ""},
		{"session id of 128", map[string]any{"message": "m", "session_id": strings.Repeat("a", 128)}, 200, ""},
		{"session id of 129", map[string]any{"message": "m", "session_id": strings.Repeat("a", 129)}, 400, "session_id"},
		{"session id with a slash", map[string]any{"message": "m", "session_id": "a/b"}, 400, "session_id"},
		{"scope of 257", map[string]any{"message": "m", "scope_id": strings.Repeat("s", 257)}, 400, "scope_id"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("POST", "/chat/stream", "", c.body)
			if r.Status != c.status {
				t.Fatalf("status %d, want %d: %s", r.Status, c.status, r.Body)
			}
			if c.status == 400 {
				if r.JSON["error"] != "invalid_request" || r.JSON["field"] != c.field || !strings.Contains(fmt.Sprint(r.JSON["message"]), c.field) {
					t.Errorf("body = %s, want invalid_request naming %q", r.Body, c.field)
				}
			}
			if c.status == 200 {
				done(t, r.Frames)
			}
		})
	}
	// billing lists no skills, so any skill of the tree is allowed; default lists refunds only.
	if r := e.do("POST", "/chat/stream", "", map[string]any{"message": "m", "agent": "default", "skill": "refunds"}); r.Status != 200 {
		t.Errorf("skill of the agent: %d %s", r.Status, r.Body)
	}
}

func TestBodyLimit(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	// The exact edge (50 MB accepted) is TestReadJSONLimit; here the refusal over HTTP, both
	// from Content-Length and from a body whose length is not announced.
	over := append([]byte(`{"message":"big"}`), bytes.Repeat([]byte(" "), runtime.MaxBodyBytes)...)
	r := e.do("POST", "/chat/sync", "", over)
	if r.Status != http.StatusRequestEntityTooLarge || r.JSON["error"] != "request_too_large" {
		t.Errorf("body over 50 MB: status %d: %.200s", r.Status, r.Body)
	}
	req := e.request("POST", "/chat/sync", "", nil)
	req.Body = io.NopCloser(bytes.NewReader(over)) // no Content-Length: chunked
	resp, err := e.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked body over 50 MB: status %d", resp.StatusCode)
	}
	if r := e.do("POST", "/chat/sync", "", "{not json"); r.Status != 400 || r.JSON["field"] != "body" {
		t.Errorf("bad JSON: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", "", ""); r.Status != 400 || r.JSON["field"] != "body" {
		t.Errorf("empty body: %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", "", `{"message":"a"} {"message":"b"}`); r.Status != 400 || r.JSON["field"] != "body" {
		t.Errorf("two objects: %d %s", r.Status, r.Body)
	}
}

func TestMetadataIsStoredNotSent(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	fs := e.chat("", map[string]any{"message": "m", "metadata": map[string]string{"userId": "u1", "screen": "home"}})
	id := sessionOf(t, fs)
	e.chat("", map[string]any{"message": "m2", "session_id": id, "metadata": map[string]string{"screen": "billing"}})
	h := e.do("GET", "/sessions/history/"+id, "", nil)
	if m := h.JSON["metadata"].(map[string]any); m["userId"] != "u1" || m["screen"] != "billing" {
		t.Errorf("metadata = %v, want the latest value per key", m)
	}
	// More than 50 keys across requests is refused too.
	r := e.do("POST", "/chat/stream", "", map[string]any{"message": "m3", "session_id": id, "metadata": metadataOf(50, 0, 0)})
	if r.Status != 400 || r.JSON["field"] != "metadata" {
		t.Errorf("52 keys on the session: %d %s", r.Status, r.Body)
	}
}
