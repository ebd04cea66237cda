package channels_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"svc/runner/channels"
)

// Post sends the body with the idempotency key and the caller's headers and returns the answer
// as it is; no key is refused before any call; an unreachable platform is a retryable error.
func TestPost(t *testing.T) {
	var got *http.Request
	var body []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, body = r, nil
		body, _ = io.ReadAll(r.Body)
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"ok":false}`))
	}))
	defer srv.Close()
	ctx := context.Background()
	req := channels.Request{Method: "chat.postMessage", Body: []byte(`{"text":"hi"}`)}
	if _, err := channels.Post(ctx, nil, time.Second, "slack", srv.URL, req, nil); !errors.Is(err, channels.ErrNoIdempotencyKey) || got != nil {
		t.Fatalf("Post without a key = %v (called: %v), want ErrNoIdempotencyKey and no call", err, got != nil)
	}
	req.IdempotencyKey = "ag:slack:Ev1:text:000"
	ans, err := channels.Post(ctx, nil, time.Second, "slack", srv.URL, req, http.Header{"Authorization": {"Bearer t"}})
	if err != nil || ans.Status != http.StatusTooManyRequests || ans.Header.Get("Retry-After") != "3" || string(ans.Body) != `{"ok":false}` {
		t.Fatalf("Post = %+v, %v", ans, err)
	}
	if got.Header.Get(channels.IdempotencyHeader) != req.IdempotencyKey || got.Header.Get("Authorization") != "Bearer t" ||
		got.Header.Get("Content-Type") != "application/json" || string(body) != `{"text":"hi"}` {
		t.Errorf("request headers %v, body %s", got.Header, body)
	}
	srv.Close()
	_, err = channels.Post(ctx, nil, time.Second, "slack", srv.URL, req, nil)
	if se, ok := errors.AsType[*channels.SendError](err); !ok || !se.Retryable {
		t.Errorf("Post to a closed server = %v, want a retryable SendError", err)
	}
}
