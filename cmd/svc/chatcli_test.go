package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"svc/client"
	"svc/runner/models/modelstest"
)

func TestChat(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	token := runtimeToken(t, p, a.AgentID)

	res := runCLI(t, p, "", "chat", "hello", "--message", "hi", "--context", "plan=pro", "--named-agent", "support")
	if res.err != nil || res.stdout != "echo: hi\n" || res.stderr != echoWarning {
		t.Fatalf("one-shot chat = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	// The session is the named agent's, with the context in its prompt.
	var list struct {
		Sessions []struct {
			SessionID string `json:"session_id"`
			Agent     string
		}
	}
	agentGet(t, p, "hello", "/sessions/history", token, &list)
	if len(list.Sessions) != 1 || list.Sessions[0].Agent != "support" {
		t.Fatalf("sessions = %+v, want one of the support agent", list.Sessions)
	}
	var prompt struct {
		SystemPrompt string `json:"system_prompt"`
	}
	agentGet(t, p, "hello", "/inspect/context?session_id="+list.Sessions[0].SessionID, token, &prompt)
	if !strings.Contains(prompt.SystemPrompt, "You help customers on the pro plan.") {
		t.Errorf("system prompt = %q, want the context's plan in it", prompt.SystemPrompt)
	}

	// Interactive: the session continues between messages, /new starts another, /exit leaves.
	res = runCLI(t, p, "one\n\n  two  \n/new\nthree\n/exit\nnever\n", "chat", "--agent", "hello")
	if res.err != nil {
		t.Fatal(res.err)
	}
	if want := "echo: one\necho: two\necho: three\n"; res.stdout != want {
		t.Errorf("interactive output = %q, want %q", res.stdout, want)
	}
	if diff := cmp.Diff([]string{"default: one, two", "default: three", "support: hi"}, chatSessions(t, p, "hello", token)); diff != "" {
		t.Errorf("sessions (-want +got):\n%s", diff)
	}

	// --deployment talks to the pinned URL; --session continues (here: names) a session. This
	// agent has no production deployment, so its persistent URL does not answer.
	pinned := newAgent(t, p, "pinned", false)
	d := deployDir(t, p, pinned.AgentID, chatAgentDir(t), "preview-pin")
	if res := runCLI(t, p, "", "chat", "pinned", "-m", "x"); res.err == nil || !strings.Contains(res.err.Error(), "NO_ACTIVE_DEPLOYMENT") {
		t.Errorf("chat at the persistent URL of an agent without production = %v", res.err)
	}
	res = runCLI(t, p, "", "chat", "pinned", "--deployment", d.DeployID, "--session", "s-old", "-m", "pinned")
	if res.err != nil || res.stdout != "echo: pinned\n" {
		t.Fatalf("chat with --deployment = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	var h struct {
		Messages []struct{ Role, Content string }
	}
	agentGet(t, p, d.DeployID+"--pinned", "/sessions/history/s-old", runtimeToken(t, p, pinned.AgentID), &h)
	if len(h.Messages) == 0 || h.Messages[0].Content != "pinned" {
		t.Errorf("session s-old = %+v, want the message sent", h)
	}
}

func TestChatFrames(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")

	// The echo model calls the tool a message names: the call, its result (cut for the
	// terminal), then the answer.
	res := runCLI(t, p, "", "chat", "hello", "-m", `/tool load_knowledge {"name":"big"}`)
	want := "→ load_knowledge {\"name\":\"big\"}\n" +
		"← " + strings.Repeat("é", 300) + "…\n" +
		"echo: " + strings.Repeat("é", 400) + "\n"
	if diff := cmp.Diff(want, res.stdout); res.err != nil || diff != "" {
		t.Errorf("stdout (-want +got):\n%s\nerror %v", diff, res.err)
	}
	if res.stderr != echoWarning {
		t.Errorf("stderr = %q, want the echo model's warning", res.stderr)
	}
	res = runCLI(t, p, "", "chat", "hello", "-m", `/tool lookup {"q":"x","a":1}`)
	want = "→ lookup {\"q\":\"x\",\"a\":1}\n" +
		"← error: tool \"lookup\" is not available to this agent\n" +
		"echo: error: tool \"lookup\" is not available to this agent\n"
	if diff := cmp.Diff(want, res.stdout); res.err != nil || diff != "" {
		t.Errorf("stdout (-want +got):\n%s\nerror %v", diff, res.err)
	}

	// A model that fails: the error frame, and the turn's end. The third call answers, with
	// reasoning that is not shown.
	model := modelstest.NewOpenAIServer(t,
		modelstest.Turn{Status: 400, ErrorMessage: "provider down"},
		modelstest.Turn{Status: 400, ErrorMessage: "provider down"},
		modelstest.Turn{Reasoning: []string{"hidden"}, Text: []string{"Found ", "it."}})
	m := newAgent(t, p, "model", true)
	deployDir(t, p, m.AgentID, writeTree(t, map[string]string{
		"svc.json": `{"name":"model","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}), "production")
	res = runCLI(t, p, "", "chat", "model", "-m", "fail")
	if !isExit(res.err) || !strings.Contains(res.stderr, "error: model call failed: ") || !strings.Contains(res.stderr, "provider down") ||
		!strings.HasSuffix(res.stderr, "(turn ended: error)\n") {
		t.Errorf("one-shot with an error frame = %v, stderr %q; want exit 1 with the error", res.err, res.stderr)
	}
	// Interactive mode reports the error and goes on.
	res = runCLI(t, p, "fail\ngo\n", "chat", "model")
	if res.err != nil || res.stdout != "Found it.\n" || strings.Count(res.stderr, "error: model call failed") != 1 {
		t.Errorf("interactive with an error frame = %v, stdout %q, stderr %q", res.err, res.stdout, res.stderr)
	}
}

// TestChatRenderer: how each kind of frame is shown, including those the runtime sends only for
// tools and limits the tests above do not reach (a structured result, the turn limit).
func TestChatRenderer(t *testing.T) {
	var out, errOut bytes.Buffer
	r := &chatRenderer{out: &out, errOut: &errOut, atLineStart: true}
	for _, f := range []string{
		`{"type":"init","session_id":"s1"}`,
		`{"type":"warning","message":"no model configured: using echo"}`,
		`{"type":"text_delta","content":"Let me "}`,
		`{"type":"text_delta","content":"look."}`,
		`{"type":"tool_call_start","tool_name":"lookup","tool_id":"t1","parameters":{"q":"x","a":1}}`,
		`{"type":"tool_call_result","tool_id":"t1","status":"success","result":{"found": true}}`,
		`{"type":"tool_call_start","tool_name":"fail","tool_id":"t2","parameters":{}}`,
		`{"type":"tool_call_result","tool_id":"t2","status":"error","error":"boom"}`,
		`{"type":"tool_call_result","tool_id":"t3","status":"success","content":"` + strings.Repeat("é", 400) + `"}`,
		`{"type":"thinking_delta","content":"hidden"}`,
		`{"type":"text_delta","content":"Found it."}`,
		`{"type":"done","reason":"max_turns","turns":50}`,
	} {
		var frame client.Frame
		if err := json.Unmarshal([]byte(f), &frame); err != nil {
			t.Fatal(err)
		}
		if err := r.frame(frame); err != nil {
			t.Fatal(err)
		}
	}
	want := "Let me look.\n" +
		"→ lookup {\"q\":\"x\",\"a\":1}\n" +
		"← {\"found\":true}\n" +
		"→ fail {}\n" +
		"← error: boom\n" +
		"← " + strings.Repeat("é", 300) + "…\n" +
		"Found it.\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
	if want := "warning: no model configured: using echo\n(turn ended: max_turns)\n"; errOut.String() != want {
		t.Errorf("stderr = %q, want %q", errOut.String(), want)
	}
	if r.session != "s1" || r.failed {
		t.Errorf("renderer session %q, failed %v", r.session, r.failed)
	}
}

func TestChatRenewsAnExpiredToken(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	// In front of the platform, a runtime token expires after one turn: a chat that follows
	// another without a token minted in between reaches the runtime with its token's signature
	// spoiled, which the runtime refuses (401) as it refuses an expired token. (Tokens are told
	// apart by their minting, not their value: two minted in the same second for the same
	// claims are the same JWT.)
	target, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	mints, fresh := 0, false
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/api/agents/"+a.AgentID+"/tokens":
			mints, fresh = mints+1, true
		case r.URL.Path == "/chat/stream":
			if !fresh {
				r.Header.Set("Authorization", r.Header.Get("Authorization")+"x")
			}
			fresh = false
		}
		mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	res := runCLI(t, nil, "a\nb\nc\n", "chat", "hello", "--url", front.URL, "--token", p.token)
	if res.err != nil || res.stdout != "echo: a\necho: b\necho: c\n" {
		t.Errorf("chat across expiries = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if mints != 3 {
		t.Errorf("%d runtime tokens minted, want 3: one, then a new one after each refusal", mints)
	}
}

// writerFunc adapts a function to io.Writer.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

func TestChatInterrupted(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	// This model streams a first chunk, then holds its answer open until the runtime leaves.
	model := modelstest.NewOpenAIServer(t, modelstest.Turn{Text: []string{"Let me think"}, Hang: true})
	slow := newAgent(t, p, "slow", true)
	deployDir(t, p, slow.AgentID, writeTree(t, map[string]string{
		"svc.json": `{"name":"slow","version":"1","models":{"main":{"provider":"openai-compatible","model":"fake","baseUrl":"` + model.URL + `"}}}`,
	}), "production")
	tests := []struct {
		name, agent string
		pressedOn   string // Ctrl-C once stdout shows this
		want        string // stdout starts with it
	}{
		{"once the turn is over", "hello", "\n", "echo: hi\n"},
		{"while the answer streams", "slow", "Let me think", "Let me think\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			pressed := writerFunc(func(b []byte) (int, error) {
				if bytes.Contains(b, []byte(tt.pressedOn)) {
					cancel(errors.New("ctrl-c"))
				}
				return len(b), nil
			})
			// stdin stays open after the first line, as a terminal does.
			pr, pw := io.Pipe()
			defer pw.Close() //nolint:errcheck // ends the command's stdin reader
			res := runCLIWith(ctx, t, p, io.MultiReader(strings.NewReader("hi\n"), pr), pressed, "chat", tt.agent)
			if res.err != nil || !strings.HasPrefix(res.stdout, tt.want) {
				t.Errorf("interrupted chat = %q, %v; want %q and a quiet exit", res.stdout, res.err, tt.want)
			}
		})
	}
}

func TestChatRefusals(t *testing.T) {
	p := startPlatform(t)
	newAgent(t, p, "hello", false)
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"no agent", []string{"chat", "-m", "x", "--agent", ""}, "no agent"},
		{"bad context", []string{"chat", "hello", "--context", "novalue"}, `--context "novalue": want KEY=VALUE`},
		{"bad apps domain", []string{"chat", "hello", "--apps-domain", "a/b"}, "setting SVC_APPS_DOMAIN"},
		{"unknown agent", []string{"chat", "ghost", "-m", "x"}, `no agent has the id or slug "ghost"`},
		{"unknown deployment agent", []string{"chat", "hello", "--apps-domain", "other.localhost", "-m", "x"}, "chat with hello.other.localhost"},
		{"no deployment", []string{"chat", "hello", "-m", "x"}, "NO_ACTIVE_DEPLOYMENT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := runCLI(t, p, "", tt.args...)
			if res.err == nil || !strings.Contains(res.err.Error(), tt.wantErr) {
				t.Errorf("error = %v, want it to contain %q", res.err, tt.wantErr)
			}
		})
	}
	// Without a production deployment, chat says what could serve: promote or --deployment.
	if res := runCLI(t, p, "", "chat", "hello", "-m", "x"); res.err == nil || !strings.Contains(res.err.Error(), "svc promote --agent hello --from ENV") ||
		!strings.Contains(res.err.Error(), "--deployment DEPLOY_ID") {
		t.Errorf("chat without any deployment = %v", res.err)
	}
	a := newAgent(t, p, "previewed", false)
	d := deployDir(t, p, a.AgentID, agentDir(t), "preview")
	res := runCLI(t, p, "", "chat", "previewed", "-m", "x")
	for _, want := range []string{"NO_ACTIVE_DEPLOYMENT", "deployment " + d.DeployID + " is active in preview",
		"svc promote --agent previewed --from preview", "svc chat previewed --deployment " + d.DeployID} {
		if res.err == nil || !strings.Contains(res.err.Error(), want) {
			t.Errorf("chat with only a preview deployment = %v, want %q in it", res.err, want)
		}
	}
}

func TestAgentURL(t *testing.T) {
	tests := []struct {
		platform, slug, deploy, domain, want string
	}{
		{"http://127.0.0.1:8080", "hello", "", "apps.localhost", "http://hello.apps.localhost:8080"},
		{"https://svc.example.com", "hello", "", ".Apps.Example.com.", "https://hello.apps.example.com"},
		{"http://127.0.0.1:8080/", "hello", "D12", "apps.localhost", "http://d12--hello.apps.localhost:8080"},
	}
	for _, tt := range tests {
		got, err := agentURL(tt.platform, tt.slug, tt.deploy, tt.domain)
		if err != nil || got != tt.want {
			t.Errorf("agentURL(%q, %q, %q, %q) = %q, %v; want %q", tt.platform, tt.slug, tt.deploy, tt.domain, got, err, tt.want)
		}
	}
	if _, err := agentURL("http://x", "", "", "apps.localhost"); err == nil {
		t.Error("agentURL without a slug succeeded")
	}
}

func TestStepWriter(t *testing.T) {
	var out bytes.Buffer
	w := &stepWriter{w: &out}
	for _, chunk := range []string{"[fe", "tch] a\n[fetch] b\r\n", "[ not a step\n[]x\n2026-01-02T03:04:05.123Z [pack] c\n", "tail"} {
		if _, err := w.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	want := "▸ fetch\n    a\n    b\n    [ not a step\n    []x\n▸ pack\n    c\n    tail\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
}

// TestChatExitThroughAPipe: /exit leaves at once, with standard input still open (a terminal
// that has not been closed), instead of waiting for another line.
func TestChatExitThroughAPipe(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	in, typed := io.Pipe()
	defer typed.Close()
	go func() {
		_, _ = io.WriteString(typed, "one\n/exit\n") // and nothing more: the writer stays open
	}()
	done := make(chan cliResult, 1)
	go func() { done <- runCLIWith(context.Background(), t, p, in, nil, "chat", "--agent", "hello") }()
	select {
	case res := <-done:
		if res.err != nil || res.stdout != "echo: one\n" {
			t.Errorf("chat = %q, %v", res.stdout, res.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("svc chat did not leave on /exit while its input stayed open")
	}
}

// cutAfter is a body that ends after n SSE events, as a dropped connection would.
type cutAfter struct {
	r    io.ReadCloser
	n    int
	seen int
	last byte
}

func (c *cutAfter) Read(p []byte) (int, error) {
	if c.seen >= c.n {
		return 0, io.EOF
	}
	k, err := c.r.Read(p[:1]) // one byte at a time: stop exactly after the n-th event
	if k == 1 {
		if p[0] == '\n' && c.last == '\n' {
			c.seen++
		}
		c.last = p[0]
	}
	return k, err
}

func (c *cutAfter) Close() error { return c.r.Close() }

// TestChatReattaches: the first chat stream is cut after two frames; svc chat reattaches with
// Last-Event-ID and prints the whole answer once.
func TestChatReattaches(t *testing.T) {
	p := startPlatform(t)
	a := newAgent(t, p, "hello", true)
	deployDir(t, p, a.AgentID, chatAgentDir(t), "production")
	target, err := url.Parse(p.url)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	cut, resumes := false, []string{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		mu.Lock()
		defer mu.Unlock()
		if resp.Request.URL.Path == "/chat/stream" && !cut {
			cut = true
			resp.Body = &cutAfter{r: resp.Body, n: 2}
		}
		return nil
	}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/stream") && r.Method == http.MethodGet {
			mu.Lock()
			resumes = append(resumes, r.Header.Get("Last-Event-ID"))
			mu.Unlock()
		}
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	res := runCLI(t, nil, "", "chat", "hello", "--url", front.URL, "--token", p.token, "-m", "one two three")
	if res.err != nil || res.stdout != "echo: one two three\n" || !strings.Contains(res.stderr, "reattaching") {
		t.Errorf("chat through a cut = %q, %v (stderr %q)", res.stdout, res.err, res.stderr)
	}
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(resumes, []string{"2"}) {
		t.Errorf("reattaches with Last-Event-ID %q, want [2]", resumes)
	}
}
