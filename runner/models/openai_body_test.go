package models

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A call lets go of its request body once the answer has emitted an event, over HTTP/1.1 and
// HTTP/2, the body having reached the server whole; an attempt that fails before any event
// keeps it for the next one.
func TestRequestBodyReleased(t *testing.T) {
	const sent = `{"model":"m","messages":[{"role":"user","content":"hi"}]}`
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, err := io.ReadAll(r.Body)
		if err != nil || string(got) != sent || r.ContentLength != int64(len(sent)) {
			t.Errorf("server read %q (length %d), %v; want %q", got, r.ContentLength, err, sent)
		}
		if strings.HasSuffix(r.URL.Path, "/fail/chat/completions") {
			http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"+
			"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	for _, h2 := range []bool{false, true} {
		s := httptest.NewUnstartedServer(h)
		s.EnableHTTP2 = h2
		s.StartTLS()
		for _, fail := range []bool{false, true} {
			base := s.URL
			if fail {
				base += "/fail"
			}
			p := NewOpenAI(OpenAIConfig{BaseURL: base, HTTPClient: s.Client(), Model: "m"})
			body := &requestBody{b: []byte(sent)}
			em := emitter{emit: func(Event) error { return nil }}
			var acc openaiAccumulator
			err := p.attempt(context.Background(), body, &em, &acc)
			if released := body.bytes() == nil; err != nil != fail || released == fail {
				t.Errorf("h2 %v, failing %v: err %v, released %v", h2, fail, err, released)
			}
		}
		s.Close()
	}
}
