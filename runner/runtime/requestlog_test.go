package runtime_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"svc/runner/runtime"
)

// syncBuffer is a log sink safe for the runtime's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// requestLines are the "runtime request" lines of a JSON log.
func requestLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if m["msg"] == "runtime request" {
			out = append(out, m)
		}
	}
	return out
}

// TestRequestLogLine: a chat gives exactly one info line with the method, host, route pattern,
// status, duration and session id, and without the message text.
func TestRequestLogLine(t *testing.T) {
	var sink syncBuffer
	log := slog.New(slog.NewJSONHandler(&sink, &slog.HandlerOptions{Level: slog.LevelInfo}))
	e := start(t, runtime.Options{Agent: loadAgent(t, "hello"), Logger: log})
	const secret = "please-keep-this-message-private"
	session := sessionOf(t, e.chat("", map[string]any{"message": secret}))
	var lines []map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if lines = requestLines(t, sink.String()); len(lines) > 0 { // written once the handler returns
			break
		}
	}
	if len(lines) != 1 {
		t.Fatalf("%d runtime request lines, want 1:\n%s", len(lines), sink.String())
	}
	l := lines[0]
	for k, want := range map[string]any{"level": "INFO", "method": "POST", "route": "POST /chat/stream", "status": float64(200), "session_id": session} {
		if l[k] != want {
			t.Errorf("%s = %v, want %v in %v", k, l[k], want, l)
		}
	}
	if host, _ := l["host"].(string); !strings.HasPrefix(host, "127.0.0.1:") {
		t.Errorf("host = %v", l["host"])
	}
	if _, ok := l["duration"].(float64); !ok {
		t.Errorf("no duration in %v", l)
	}
	if strings.Contains(sink.String(), secret) {
		t.Errorf("the log holds the message text:\n%s", sink.String())
	}
	// A request no route takes is logged with the catch-all pattern and its status.
	e.do("GET", "/nowhere", "", nil) // not streamed: its line is out before its answer
	if lines = requestLines(t, sink.String()); len(lines) != 2 || lines[1]["status"] != float64(404) || lines[1]["route"] != "/" {
		t.Errorf("lines after a 404: %v", lines)
	}
}
