package connections_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"svc/agent"
	"svc/runner/connections"
	"svc/runner/tools"
)

// BenchmarkRequest compares one request call through the tool layer (argument and path checks,
// rules, secrets resolved and redacted, the checked dialer's transport, the body parsed,
// stripped and re-encoded, one log line) with a plain net/http GET of the same loopback
// server in the same run; the difference is the tool's overhead. p50-ns is the median of the
// per-call times.
//
//	go test -run '^$' -bench Request -benchmem ./runner/connections
func BenchmarkRequest(b *testing.B) {
	body := []byte(`{"id":42,"title":"Database latency","severity":"major","reporter":{"name":"Ada","email":"ada@example.com"},"updates":[{"at":"2026-01-01T00:00:00Z","text":"Investigating"}]}`)
	h := newHarness(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}), []*agent.Connection{conn("status", deskPolicy(), deskAccess())}, func(o *connections.Options) {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	})
	call := tools.Call{ID: "c1", Arguments: json.RawMessage(`{"connection":"status","method":"GET","path":"/incidents/42"}`), Session: tools.Session{ID: "s1"}}
	ctx := context.Background()

	b.Run("tool", func(b *testing.B) {
		times := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := h.tool.Call(ctx, call); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
		}
		reportP50(b, times)
	})
	b.Run("plain", func(b *testing.B) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		client := &http.Client{Transport: tr}
		url := h.srv.URL + "/incidents/42"
		times := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			resp, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.ReadAll(resp.Body); err != nil {
				b.Fatal(err)
			}
			resp.Body.Close()
			times = append(times, time.Since(t0))
		}
		reportP50(b, times)
	})
}

func reportP50(b *testing.B, times []time.Duration) {
	if len(times) == 0 {
		return
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
}

// BenchmarkMCPCall compares one MCP tool call through MCPTool (the tools rule, the rate limit,
// the auth header resolved per request through the checked transport, the result redacted
// and bounded, the svc.mcp.call span, one log line) with the SDK client's own CallTool on a
// session to the same loopback server, in the same run; the difference is our overhead.
//
//	go test -run '^$' -bench MCPCall -benchmem ./runner/connections
func BenchmarkMCPCall(b *testing.B) {
	s := newMCPServer(b)
	s.add("lookup", true, func(args json.RawMessage, _ http.Header) string {
		return `{"id":42,"title":"Database latency"} ` + string(args)
	})
	c, err := connections.New([]*agent.Connection{mcpConn("gh", s.srv.URL, map[string]string{"lookup": "allow"}, nil)}, connections.Options{
		Secret: func(_ context.Context, name string) (string, bool, error) { return secretToken, true, nil },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	ts, err := c.MCPTools(ctx, []string{"gh"})
	if err != nil || len(ts) != 1 {
		b.Fatal(len(ts), err)
	}
	call := tools.Call{ID: "c1", Arguments: json.RawMessage(`{"q":"latency"}`), Session: tools.Session{ID: "s1"}}
	b.Run("tool", func(b *testing.B) {
		times := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := ts[0].Call(ctx, call); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
		}
		reportP50(b, times)
	})
	b.Run("direct", func(b *testing.B) {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		defer tr.CloseIdleConnections()
		hc := &http.Client{Transport: headerTransport{tr}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "bench", Version: "1"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}}).
			Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.srv.URL, HTTPClient: hc}, nil)
		if err != nil {
			b.Fatal(err)
		}
		defer cs.Close()
		params := &mcp.CallToolParams{Name: "lookup", Arguments: json.RawMessage(`{"q":"latency"}`)}
		times := make([]time.Duration, 0, b.N)
		b.ReportAllocs()
		for b.Loop() {
			t0 := time.Now()
			if _, err := cs.CallTool(ctx, params); err != nil {
				b.Fatal(err)
			}
			times = append(times, time.Since(t0))
		}
		reportP50(b, times)
	})
}

// headerTransport sends the auth header, as the connection does.
type headerTransport struct{ rt http.RoundTripper }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", secretToken)
	return h.rt.RoundTrip(r)
}
