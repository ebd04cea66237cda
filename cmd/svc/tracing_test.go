package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// TestDevExportsTraces runs `svc dev` with OTEL_EXPORTER_OTLP_ENDPOINT pointing at an OTLP/HTTP
// receiver started in the test: a chat's turn arrives as spans over protobuf, its trace id the
// done frame's trace_id, with the metadata under svc.meta.*.
func TestDevExportsTraces(t *testing.T) {
	var mu sync.Mutex
	spans := map[string]string{} // span name → trace id (hex)
	attrs := map[string]string{} // attributes of the turn span
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					spans[s.Name] = hex.EncodeToString(s.TraceId)
					if s.Name == "chat turn" {
						for _, kv := range s.Attributes {
							attrs[kv.Key] = kv.Value.GetStringValue()
						}
					}
				}
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	defer recv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	t.Setenv("AUTH_TOKEN", "")

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if out, err := execute(ctx, "dev", "../../examples/greeter", "--port", port); err != nil {
			t.Errorf("svc dev: %v\n%s", err, out)
		}
	})
	url := "http://127.0.0.1:" + port
	waitHealthy(t, url+"/health")
	body, _ := json.Marshal(map[string]any{"message": "hi", "metadata": map[string]string{"userId": "u1"}})
	resp, err := http.Post(url+"/chat/sync", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	var answer struct {
		Done struct {
			TraceID string `json:"trace_id"`
		} `json:"done"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&answer)
	resp.Body.Close()
	cancel() // svc dev stops and flushes its spans
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if answer.Done.TraceID == "" || spans["chat turn"] != answer.Done.TraceID || spans["chat echo"] != answer.Done.TraceID {
		t.Fatalf("done trace_id %q; spans received %v", answer.Done.TraceID, spans)
	}
	if attrs["svc.meta.userId"] != "u1" || attrs["svc.auth.method"] != "none" {
		t.Errorf("turn span attributes %v", attrs)
	}
}
