package runtime_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions/memstore"
	"svc/runner/sessions/redislock"
)

// TestLostLockStopsTheTurn: when a turn's shared session lock is lost (another runner took the
// key), the turn stops at once with an error frame and done reason error, stores nothing over
// the session, and the session serves the next turn.
func TestLostLockStopsTheTurn(t *testing.T) {
	rdb := dbtest.Redis(t)
	prefix := "svc:test:lockloss:" + time.Now().Format("150405.000000") + ":"

	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"never"}}, modelstest.Turn{Text: []string{"second"}})
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	held, gate := make(chan struct{}, 1), make(chan struct{})
	var first atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			held <- struct{}{}
			select { // the first model call thinks until the turn is cancelled
			case <-gate:
			case <-r.Context().Done():
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	defer close(gate)
	store := memstore.New()
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, SharedStore: true,
		Locker: redislock.New(rdb, redislock.Config{Prefix: prefix, TTL: time.Second}),
		Models: func(ref agent.ModelRef) (models.Provider, error) {
			return models.New(models.Config{Provider: models.ProviderOpenAI, Model: ref.Model, BaseURL: slow.URL + target.Path, APIKey: "sk-test"}, slow.Client())
		}, DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})

	answer := make(chan *response, 1)
	go func() {
		answer <- e.do("POST", "/chat/sync", "", map[string]any{"message": "hello", "session_id": "s1"})
	}()
	<-held
	rdb.Set(context.Background(), prefix+"s1", "another runner's token", 2*time.Second) // taken over
	var r *response
	select {
	case r = <-answer:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn went on after its lock was lost")
	}
	done, _ := r.JSON["done"].(map[string]any)
	if r.Status != 200 || done["reason"] != "error" || !strings.Contains(string(r.Body), "turn lock was lost") {
		t.Fatalf("turn after its lock was lost = %d %s", r.Status, r.Body)
	}
	s, err := store.Load(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Messages) != 1 || s.Status != "running" {
		t.Errorf("stored session = %d messages, status %s: want the user message the turn began with, nothing stored after", len(s.Messages), s.Status)
	}
	// Once the other runner's hold ends, the session serves again.
	rdb.Del(context.Background(), prefix+"s1")
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "again", "session_id": "s1"}); r.Status != 200 || r.JSON["done"].(map[string]any)["reason"] != "model_stop" {
		t.Errorf("the next turn = %d %s", r.Status, r.Body)
	}
}
