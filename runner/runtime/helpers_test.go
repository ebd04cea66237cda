package runtime_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"svc/runner/handlers/handlerstest"
	"sync"
	"testing"
	"time"

	"svc/agent"
	"svc/agent/agenttest"
	"svc/auth"
	"svc/runner/durable/engine"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
)

func loadAgent(t testing.TB, name string) *agent.Agent {
	t.Helper()
	ag, err := agent.LoadDir(agenttest.Dir(t, name))
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return ag
}

// env is a test runtime behind a real listener.
type env struct {
	t    testing.TB
	rt   *runtime.Runtime
	runs *engine.Engine // Options.Durable: nil when the runtime has an engine of its own
	srv  *httptest.Server
	url  string
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func start(t testing.TB, opts runtime.Options) *env { return startServer(t, opts, nil) }

// startServer is start with configure, when not nil, called on the test server before it starts.
func startServer(t testing.TB, opts runtime.Options, configure func(*httptest.Server)) *env {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	if opts.Sandbox == nil {
		opts.Sandbox = handlerstest.Pool()
	}
	rt, err := runtime.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(rt)
	if configure != nil {
		configure(srv)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := rt.Close(ctx); err != nil {
			t.Errorf("close runtime: %v", err)
		}
	})
	return &env{t: t, rt: rt, runs: opts.Durable, srv: srv, url: srv.URL}
}

// durableEngine is a started engine of cfg, shut down when the test ends (after the runtimes
// that the test starts with it, which close first).
func durableEngine(t testing.TB, cfg engine.Config) *engine.Engine {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = quietLogger()
	}
	e := engine.New(cfg)
	if err := e.Start(nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := e.Shutdown(ctx); err != nil {
			t.Errorf("shut the durable engine down: %v", err)
		}
	})
	return e
}

// openaiModels returns an Options.Models that sends every model reference to the fake server.
func openaiModels(srv *modelstest.Server) func(agent.ModelRef) (models.Provider, error) {
	return func(ref agent.ModelRef) (models.Provider, error) {
		if ref.Provider == models.ProviderEcho {
			return models.Echo{}, nil
		}
		return models.New(models.Config{Provider: models.ProviderOpenAI, Model: ref.Model, BaseURL: srv.URL, APIKey: "sk-test", Effort: ref.Effort}, srv.Client())
	}
}

// frame is a decoded SSE frame with its id line.
type frame struct {
	ID   int
	Data map[string]any
	Raw  string
}

func (f frame) typ() string { return str(f.Data["type"]) }

func str(v any) string { s, _ := v.(string); return s }

func num(v any) int { f, _ := v.(float64); return int(f) }

type response struct {
	Status int
	Header http.Header
	Body   []byte
	JSON   map[string]any
	Frames []frame
}

func (e *env) request(method, path, token string, body any) *http.Request {
	e.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, e.url+path, rd)
	if err != nil {
		e.t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return req
}

// do sends a request and reads the whole answer: JSON, or SSE frames.
func (e *env) do(method, path, token string, body any) *response {
	e.t.Helper()
	resp, err := e.srv.Client().Do(e.request(method, path, token, body))
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out := &response{Status: resp.StatusCode, Header: resp.Header}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		out.Frames = readFrames(e.t, resp.Body, -1)
		return out
	}
	out.Body, err = io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(out.Body) > 0 && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(out.Body, &out.JSON); err != nil {
			e.t.Fatalf("%s %s: body %q: %v", method, path, out.Body, err)
		}
	}
	return out
}

// readFrames reads SSE events until EOF or until stop frames were read (stop < 0: all). It
// checks that ids count up from 1 and that each event is one id line and one data line.
func readFrames(t testing.TB, r io.Reader, stop int) []frame {
	t.Helper()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	var out []frame
	var cur frame
	have := false
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if have {
				if cur.ID != len(out)+1 {
					t.Errorf("frame %d has id %d", len(out)+1, cur.ID)
				}
				out = append(out, cur)
				cur, have = frame{}, false
				if stop > 0 && len(out) >= stop {
					return out
				}
			}
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "id: "):
			id, err := strconv.Atoi(line[4:])
			if err != nil {
				t.Errorf("bad id line %q", line)
			}
			cur.ID = id
		case strings.HasPrefix(line, "data: "):
			if have {
				t.Errorf("two data lines in one event: %q", line)
			}
			have = true
			cur.Raw = line[6:]
			if cur.Raw != "[DONE]" {
				if err := json.Unmarshal([]byte(cur.Raw), &cur.Data); err != nil {
					t.Errorf("frame %q is not JSON: %v", cur.Raw, err)
				}
			}
		default:
			t.Errorf("unexpected SSE line %q", line)
		}
	}
	return out
}

func types(fs []frame) []string {
	var out []string
	for _, f := range fs {
		if f.Raw == "[DONE]" {
			out = append(out, "[DONE]")
			continue
		}
		out = append(out, f.typ())
	}
	return out
}

func ofType(fs []frame, typ string) []frame {
	var out []frame
	for _, f := range fs {
		if f.typ() == typ {
			out = append(out, f)
		}
	}
	return out
}

// topLevel keeps the frames that are not nested cards (no parent_tool_id): the model's calls.
func topLevel(fs []frame) []frame {
	var out []frame
	for _, f := range fs {
		if f.Data["parent_tool_id"] == nil || f.typ() == "subagent_event" {
			out = append(out, f)
		}
	}
	return out
}

func text(fs []frame) string {
	var b strings.Builder
	for _, f := range ofType(fs, "text_delta") {
		b.WriteString(str(f.Data["content"]))
	}
	return b.String()
}

func done(t testing.TB, fs []frame) map[string]any {
	t.Helper()
	if len(fs) == 0 || fs[len(fs)-1].typ() != "done" {
		t.Fatalf("stream does not end with done: %v", types(fs))
	}
	return fs[len(fs)-1].Data
}

func sessionOf(t testing.TB, fs []frame) string {
	t.Helper()
	if len(fs) == 0 || fs[0].typ() != "init" {
		t.Fatalf("stream does not start with init: %v", types(fs))
	}
	return str(fs[0].Data["session_id"])
}

// chat sends one streamed chat turn.
func (e *env) chat(token string, body map[string]any) []frame {
	e.t.Helper()
	r := e.do("POST", "/chat/stream", token, body)
	if r.Status != http.StatusOK {
		e.t.Fatalf("chat: status %d: %s", r.Status, r.Body)
	}
	return r.Frames
}

// waitIdle polls a session's history until no turn runs (a turn whose client left finishes
// on its own goroutine). It bounds the wait generously; it asserts nothing about speed.
func (e *env) waitIdle(id string) map[string]any {
	e.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := e.do("GET", "/sessions/history/"+id, "", nil)
		if r.Status == http.StatusOK && r.JSON["status"] == "idle" {
			return r.JSON
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("session %s did not become idle: %d %s", id, r.Status, r.Body)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// signer mints runtime tokens for tests.
type signer struct {
	t testing.TB
	s *auth.Signer
}

func newSigner(t testing.TB) *signer {
	s, err := auth.NewSigner(bytes.Repeat([]byte("k"), 32))
	if err != nil {
		t.Fatal(err)
	}
	return &signer{t, s}
}

func (s *signer) token(agentID, user, scope string) string {
	tok, err := s.s.Mint(auth.RuntimeClaims{AgentID: agentID, UserID: user, ScopeID: scope, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		s.t.Fatal(err)
	}
	return tok
}

// clock is a settable Options.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
