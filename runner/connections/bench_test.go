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
