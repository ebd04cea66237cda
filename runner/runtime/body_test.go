package runtime_test

import (
	"fmt"
	"strings"
	"testing"

	"svc/runner/runtime"
)

// goTypeLeaks are pieces of Go type names that no error message may show a client.
var goTypeLeaks = []string{"runtime.", "map[", "struct", "Go value", "Go struct", "json:", "[]"}

func checkNoGoTypes(t *testing.T, what string, r *response) {
	t.Helper()
	msg := fmt.Sprint(r.JSON["message"])
	for _, leak := range goTypeLeaks {
		if strings.Contains(msg, leak) {
			t.Errorf("%s: message %q shows %q", what, msg, leak)
		}
	}
}

// TestBodyMustBeObject checks that every route reading a JSON body answers a top-level value
// that is not an object (array, string, number, boolean, null) with a clear 400 on the field
// "body", naming what was sent and no Go type.
func TestBodyMustBeObject(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	routes := []struct{ method, path string }{
		{"POST", "/chat"},
		{"POST", "/chat/stream"},
		{"POST", "/chat/sync"},
		{"POST", "/chat/ai-stream"},
		{"POST", "/chat/sessions/s1/messages"},
		{"POST", "/chat/sessions/s1/ask-user-response"},
		{"POST", "/sessions"},
		{"PATCH", "/sessions/history/s1"},
		{"POST", "/feedback"},
		{"POST", "/api/sessions/s1/answer"},
		{"POST", "/api/sessions/s1/cancel"},
		{"POST", "/api/sessions/s1/restart"},
	}
	bodies := []struct{ body, kind string }{
		{`[]`, "an array"},
		{` [{"message":"hi"}]`, "an array"},
		{`"hi"`, "a string"},
		{`5`, "a number"},
		{`-1.5e3`, "a number"},
		{`1e400`, "a number"},
		{`true`, "a boolean"},
		{`false`, "a boolean"},
		{`null`, "null"},
	}
	for _, rt := range routes {
		for _, b := range bodies {
			what := rt.method + " " + rt.path + " " + b.body
			r := e.do(rt.method, rt.path, "", b.body)
			want := "the body must be a JSON object, got " + b.kind
			if r.Status != 400 || r.JSON["error"] != "invalid_request" || r.JSON["field"] != "body" || r.JSON["message"] != want {
				t.Errorf("%s: %d %s, want 400 invalid_request on body: %q", what, r.Status, r.Body, want)
			}
			checkNoGoTypes(t, what, r)
		}
	}
}

// TestBodyDecodeErrorsNameTheField checks that a value of the wrong type inside the object still
// names its field, and that no decode error shows a Go type.
func TestBodyDecodeErrorsNameTheField(t *testing.T) {
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello")})
	cases := []struct {
		path, body, field string
	}{
		{"/chat/sync", `{"message":5}`, "message"},
		{"/chat/sync", `{"message":"m","metadata":[]}`, "metadata"},
		{"/chat/sync", `{"message":"m","metadata":{"a":[1]}}`, "metadata"},
		{"/chat/sync", `{"message":"m","model":"echo"}`, "model"},
		{"/chat/sync", `{"message":"m","max_session_tokens":"many"}`, "max_session_tokens"},
		{"/chat/sync", `{"message":"m","max_session_tokens":1e400}`, "max_session_tokens"},
		{"/chat/sync", `{"message":"m","images":{}}`, "images"},
		{"/chat/sync", `{"message":"m","images":[5]}`, "images"},
		{"/chat/sync", `{"message":"m","attachments":[{"data":5}]}`, "attachments"},
		{"/chat/ai-stream", `{"id":"s","messages":[{"role":"user","parts":"x"}]}`, "messages"},
		{"/feedback", `{"rating":1}`, "rating"},
		{"/sessions", `{"scope_id":[]}`, "scope_id"},
		{"/sessions/history/s1", `{"title":false}`, "title"},
		{"/api/sessions/s1/cancel", `{"a":}`, "body"},
		{"/chat/sync", `{"message":"m"`, "body"},
		{"/chat/sync", `[`, "body"},
		{"/chat/sync", `tru`, "body"},
	}
	for _, c := range cases {
		method := "POST"
		if strings.HasPrefix(c.path, "/sessions/history/") {
			method = "PATCH"
		}
		r := e.do(method, c.path, "", c.body)
		what := c.path + " " + c.body
		if r.Status != 400 || r.JSON["error"] != "invalid_request" {
			t.Errorf("%s: %d %s, want 400 invalid_request", what, r.Status, r.Body)
			continue
		}
		if f := fmt.Sprint(r.JSON["field"]); !strings.HasPrefix(f, c.field) {
			t.Errorf("%s: field %q, want %q: %s", what, f, c.field, r.Body)
		}
		checkNoGoTypes(t, what, r)
	}
}
