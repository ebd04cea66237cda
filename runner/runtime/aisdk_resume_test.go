package runtime_test

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/runner/runtime"
	"svc/runner/streams"
	"svc/runner/streams/memstream"
)

// TestAISDKResume drives the real AI SDK client (`ai` from npm) through a resume: its
// DefaultChatTransport.reconnectToStream, what useChat({resume: true}) calls, reads the turn
// from GET /chat/ai-stream/{id}/stream, and gets null once the log expired (204).
// SVC_TEST_AISDK_DIR names a directory with node_modules/ai (npm install ai@5), which `make
// services` installs; without it the test is skipped, or fails under CI.
func TestAISDKResume(t *testing.T) {
	dir := os.Getenv("SVC_TEST_AISDK_DIR")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "ai", "package.json")); dir == "" || err != nil {
		dbtest.Missing(t, "the AI SDK (SVC_TEST_AISDK_DIR with node_modules/ai; make services installs it)", fmt.Errorf("SVC_TEST_AISDK_DIR=%q: %v", dir, err))
	}
	node, err := exec.LookPath("node")
	if err != nil {
		dbtest.Missing(t, "Node.js (node in PATH)", err)
	}
	script, err := os.ReadFile(filepath.Join("testdata", "aisdk", "resume.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.CreateTemp(dir, "svc-resume-*.mjs") // beside node_modules, so that "ai" resolves
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.Write(script); err != nil {
		t.Fatal(err)
	}
	f.Close()
	clk := &clock{now: time.Now()}
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Now: clk.Now, TurnLog: memstream.New(memstream.Config{Now: clk.Now})})
	fs := e.chat("", map[string]any{"message": "resume me"})
	id := sessionOf(t, fs)
	run := func() map[string]any {
		t.Helper()
		out, err := exec.CommandContext(t.Context(), node, f.Name(), e.url+"/chat/ai-stream", id).CombinedOutput()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, out)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("node printed %s", out)
		}
		return got
	}
	got := run()
	types, _ := got["types"].([]any)
	if got["text"] != text(fs) || len(types) == 0 || types[0] != "start" || !slices.Contains(types, any("finish")) {
		t.Fatalf("the AI SDK's resume read %v; want the turn %q from start to finish", got, text(fs))
	}
	clk.Add(streams.Retention)
	if got := run(); got["null"] != true {
		t.Errorf("after 5 minutes the AI SDK's resume read %v; want null (204)", got)
	}
}
