package runtime_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/agent"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions"
	"svc/runner/sessions/memstore"
	"svc/runner/turn"
)

// TestSessionStorageBound: a fresh session takes a message of exactly the bound and refuses one
// byte more (413 session_storage_full, nothing stored); a full session refuses the next message.
func TestSessionStorageBound(t *testing.T) {
	store := memstore.New()
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, Storage: turn.StorageLimits{SessionBytes: 100, AgentBytes: -1}})
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": strings.Repeat("a", 101), "session_id": "over"}); r.Status != 413 || r.JSON["error"] != "session_storage_full" {
		t.Fatalf("101 bytes into a 100-byte session = %d %s", r.Status, r.Body)
	}
	if _, err := store.Load(context.Background(), "over"); err == nil {
		t.Errorf("a refused first message stored the session")
	}
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": strings.Repeat("a", 100), "session_id": "at"})
	if r.Status != 200 {
		t.Fatalf("100 bytes into a 100-byte session = %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "b", "session_id": "at"}); r.Status != 413 || !strings.Contains(r.JSON["message"].(string), "start a new session") {
		t.Fatalf("a message into a full session = %d %s", r.Status, r.Body)
	}
}

// TestAgentStorageBound: the sum over the agent's sessions may reach the bound, not pass it.
func TestAgentStorageBound(t *testing.T) {
	store := memstore.New()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	first := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: "ag1", Sessions: store, Now: clock.Now})
	if r := first.do("POST", "/chat/sync", "", map[string]any{"message": strings.Repeat("a", 40)}); r.Status != 200 {
		t.Fatalf("first chat = %d %s", r.Status, r.Body)
	}
	used, err := store.AgentStoredBytes(context.Background(), "ag1")
	if err != nil || used < 80 {
		t.Fatalf("stored after one echo chat = %d, %v; want the message and its echo", used, err)
	}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), AgentID: "ag1", Sessions: store, Now: clock.Now,
		Storage: turn.StorageLimits{AgentBytes: used + 14}})
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": strings.Repeat("b", 15)}); r.Status != 429 || r.JSON["error"] != "agent_storage_full" {
		t.Fatalf("one byte over the agent bound = %d %s", r.Status, r.Body)
	}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": strings.Repeat("b", 14)}); r.Status != 200 {
		t.Fatalf("exactly at the agent bound = %d %s", r.Status, r.Body)
	}
	clock.Add(3 * time.Second) // past the cached sum: the echo of the last chat counts now
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "c"}); r.Status != 429 {
		t.Fatalf("a chat into a full agent = %d %s", r.Status, r.Body)
	}
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestAttachmentsAreKeptByReference: an attachment's bytes go to the blob store once, history
// rows hold only its reference and size, and the next turn sends the model the content again.
func TestAttachmentsAreKeptByReference(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"seen"}}, modelstest.Turn{Text: []string{"still seen"}})
	store, blobs := memstore.New(), &memstore.Blobs{}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, Blobs: blobs,
		Models: openaiModels(srv), DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	content := strings.Repeat("the attached notes ", 100)
	att := []map[string]string{{"mimeType": "text/plain", "filename": "notes.txt", "data": base64.StdEncoding.EncodeToString([]byte(content))}}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "read", "session_id": "s1", "attachments": att}); r.Status != 200 {
		t.Fatalf("chat = %d %s", r.Status, r.Body)
	}
	if got, err := blobs.Get(context.Background(), "s1", sessions.BlobRef([]byte(content))); err != nil || string(got) != content {
		t.Fatalf("blob store = %q, %v", got, err)
	}
	s, err := store.Load(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	row, err := json.Marshal(s.Messages[0])
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(row), base64.StdEncoding.EncodeToString([]byte(content))[:40]) || !strings.Contains(string(row), `"ref":"sha256:`) {
		t.Fatalf("history row holds the content, or no reference: %s", row)
	}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "again", "session_id": "s1"}); r.Status != 200 {
		t.Fatalf("second chat = %d %s", r.Status, r.Body)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[1].Body), "the attached notes") {
		t.Fatalf("the second model request does not carry the attachment again")
	}
	detail := e.do("GET", "/sessions/history/s1", "", nil)
	msgs := detail.JSON["messages"].([]any)
	atts := msgs[0].(map[string]any)["attachments"].([]any)
	if size := atts[0].(map[string]any)["size"]; size != float64(len(content)) {
		t.Errorf("history detail gives the attachment size %v, want %d", size, len(content))
	}
	// Deleting the session deletes its attachments.
	if r := e.do("DELETE", "/sessions/history/s1", "", nil); r.Status != 204 {
		t.Fatalf("delete = %d %s", r.Status, r.Body)
	}
	if _, err := blobs.Get(context.Background(), "s1", sessions.BlobRef([]byte(content))); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Errorf("the attachment outlived its session: %v", err)
	}
}

// TestRefusedAttachmentsAreNotKept: an attachment on a message over the session's bound is not
// stored, so refused messages cannot fill the disk.
func TestRefusedAttachmentsAreNotKept(t *testing.T) {
	blobs := &memstore.Blobs{}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Blobs: blobs, Storage: turn.StorageLimits{SessionBytes: 1000, AgentBytes: -1}})
	content := strings.Repeat("z", 2000)
	att := []map[string]string{{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte(content))}}
	for _, session := range []string{"fresh", "fresh"} {
		if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "x", "session_id": session, "attachments": att}); r.Status != 413 {
			t.Fatalf("a 2,000-byte attachment into a 1,000-byte session = %d %s", r.Status, r.Body)
		}
	}
	if _, err := blobs.Get(context.Background(), "fresh", sessions.BlobRef([]byte(content))); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Errorf("a refused attachment was stored: %v", err)
	}
	// Refused for its metadata, on a stored session: nothing stored either.
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "x", "session_id": "meta", "metadata": metadataOf(50, 0, 0)}); r.Status != 200 {
		t.Fatalf("a chat with 50 metadata keys = %d %s", r.Status, r.Body)
	}
	small := base64.StdEncoding.EncodeToString([]byte("tiny"))
	r := e.do("POST", "/chat/sync", "", map[string]any{"message": "x", "session_id": "meta", "metadata": map[string]string{"one-more": "v"},
		"attachments": []map[string]string{{"mimeType": "text/plain", "data": small}}})
	if r.Status != 400 || r.JSON["field"] != "metadata" {
		t.Fatalf("a 51st metadata key = %d %s", r.Status, r.Body)
	}
	if _, err := blobs.Get(context.Background(), "meta", sessions.BlobRef([]byte("tiny"))); !errors.Is(err, sessions.ErrBlobNotFound) {
		t.Errorf("the attachment of a message refused for its metadata was stored: %v", err)
	}
}

// TestLargeBodiesWaitForMemory: a large body takes its share of the body budget until its
// request ends; another that finds no room within the wait gets 503 server_busy with
// Retry-After, and is admitted once the first one is done.
func TestLargeBodiesWaitForMemory(t *testing.T) {
	srv := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"one"}}, modelstest.Turn{Text: []string{"two"}}, modelstest.Turn{Text: []string{"three"}})
	gate := make(chan struct{})
	held := make(chan struct{}, 1)
	target, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: target.Scheme, Host: target.Host})
	var first atomic.Bool
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if first.CompareAndSwap(false, true) {
			held <- struct{}{}
			<-gate // the first model call thinks until the test lets it answer
		}
		proxy.ServeHTTP(w, r)
	}))
	defer slow.Close()
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Bodies: runtime.NewBodyBudget(8<<20, 100*time.Millisecond),
		Models: func(ref agent.ModelRef) (models.Provider, error) {
			return models.New(models.Config{Provider: models.ProviderOpenAI, Model: ref.Model, BaseURL: slow.URL + target.Path, APIKey: "sk-test"}, slow.Client())
		}, DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o"}})
	big := map[string]any{"message": strings.Repeat("x", 3<<20)} // counted at 12x: the whole 8 MiB budget
	firstStatus := make(chan int, 1)
	go func() { firstStatus <- e.do("POST", "/chat/sync", "", big).Status }()
	<-held // the first request holds the budget while its model call runs
	r := e.do("POST", "/chat/sync", "", big)
	if r.Status != 503 || r.JSON["error"] != "server_busy" || r.Header.Get("Retry-After") == "" {
		t.Errorf("a large body without room = %d %v %s, want 503 server_busy with Retry-After", r.Status, r.Header, r.Body)
	}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "small"}); r.Status == 503 {
		t.Errorf("a small body waited for the large ones' memory: %d", r.Status)
	}
	close(gate)
	if s := <-firstStatus; s != 200 {
		t.Fatalf("the first large chat = %d", s)
	}
	if r := e.do("POST", "/chat/sync", "", big); r.Status != 200 {
		t.Errorf("a large body after the first one ended = %d %s", r.Status, r.Body)
	}
}

// TestUnreadableAttachmentStoresNothing: when an attachment of the history cannot be read back,
// the chat fails before anything of it is kept: the history is as it was.
func TestUnreadableAttachmentStoresNothing(t *testing.T) {
	store, blobs := memstore.New(), &memstore.Blobs{}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, Blobs: blobs})
	att := []map[string]string{{"mimeType": "text/plain", "data": base64.StdEncoding.EncodeToString([]byte("notes"))}}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "read", "session_id": "s1", "attachments": att}); r.Status != 200 {
		t.Fatalf("chat = %d %s", r.Status, r.Body)
	}
	if err := blobs.Drop(context.Background(), "s1"); err != nil { // the content is gone
		t.Fatal(err)
	}
	e = start(t, runtime.Options{Agent: loadAgent(t, "hello"), Sessions: store, Blobs: blobs}) // nothing cached
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "again", "session_id": "s1"}); r.Status != 500 {
		t.Fatalf("chat with unreadable history = %d %s, want 500", r.Status, r.Body)
	}
	// Once the content is back, the next turn runs; the failed message left nothing behind.
	if err := blobs.Put(context.Background(), "s1", sessions.BlobRef([]byte("notes")), []byte("notes")); err != nil {
		t.Fatal(err)
	}
	if r := e.do("POST", "/chat/sync", "", map[string]any{"message": "x", "session_id": "s1"}); r.Status != 200 {
		t.Fatalf("next chat = %d %s", r.Status, r.Body)
	}
	s, err := store.Load(context.Background(), "s1")
	if err != nil {
		t.Fatal(err)
	}
	var said []string
	for _, m := range s.Messages {
		if m.Role == "user" {
			said = append(said, m.Content)
		}
	}
	if strings.Join(said, ",") != "read,x" {
		t.Errorf("user messages in the history = %q, want read and x: the failed one must leave nothing", said)
	}
}
