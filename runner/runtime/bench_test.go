package runtime_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	goruntime "runtime"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"svc/agent"
	"svc/migrations/dbtest"
	"svc/runner/models"
	"svc/runner/models/modelstest"
	"svc/runner/runtime"
	"svc/runner/sessions/dbstore"
	"svc/traces"
)

// BenchmarkChatStream runs whole chat turns over a real listener against a fake OpenAI server
// that streams 32 text chunks with no delay, each turn in a fresh session of the hello agent.
// ns/op is one turn, client and fake model included; allocs/op counts the whole process.
func BenchmarkChatStream(b *testing.B) { benchChatStream(b, nil, nil) }

// BenchmarkChatStreamTraced is BenchmarkChatStream with every turn traced and exported over
// OTLP/HTTP, batched, to a receiver on loopback that takes the spans and answers at once.
// With BENCH_OTLP_URL set (such as http://127.0.0.1:4318), the spans go to that receiver instead,
// which may run in another process, so that its cost is not counted.
func BenchmarkChatStreamTraced(b *testing.B) {
	url := os.Getenv("BENCH_OTLP_URL")
	if url == "" {
		recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/x-protobuf")
		}))
		defer recv.Close()
		url = recv.URL
	}
	exp, err := traces.NewExporter(traces.Config{URL: url + "/v1/traces"})
	if err != nil {
		b.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(traces.NewBatcher(exp, traces.DefaultBatchConfig)))
	defer tp.Shutdown(context.Background())
	benchChatStream(b, tp.Tracer("bench"), nil)
}

// benchRuntime is the hello agent on gpt-4o-mini, sent to a fake OpenAI server that streams 32
// text chunks at once.
func benchRuntime(b *testing.B, tracer trace.Tracer, turnLog runtime.TurnLog) *env {
	fake := modelstest.NewOpenAIBenchServer(b, 32)
	return start(b, runtime.Options{
		Tracer:       tracer,
		TurnLog:      turnLog,
		Agent:        loadAgent(b, "hello"),
		DefaultModel: agent.ModelRef{Provider: "openai", Model: "gpt-4o-mini"},
		Models: runtime.NewModels(func(name string) (string, bool) {
			switch name {
			case "OPENAI_BASE_URL":
				return fake.URL, true
			case "OPENAI_API_KEY":
				return "sk-bench", true
			}
			return "", false
		}, fake.Client()),
	})
}

func benchChatStream(b *testing.B, tracer trace.Tracer, turnLog runtime.TurnLog) {
	e := benchRuntime(b, tracer, turnLog)
	client := e.srv.Client()
	body := []byte(`{"message":"Say hello"}`)
	b.ReportAllocs()
	b.SetParallelism(1)
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 32<<10)
		for pb.Next() {
			req, err := http.NewRequest("POST", e.url+"/chat/stream", bytes.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 200 || n < 32*50 {
				b.Errorf("turn: status %d, %d bytes, %v", resp.StatusCode, n, err)
				return
			}
		}
	})
}

// BenchmarkTurnEcho is one turn with the echo model: the runtime's own cost without a model
// API round trip.
func BenchmarkTurnEcho(b *testing.B) {
	e := start(b, runtime.Options{Agent: loadAgent(b, "hello"), DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	client := e.srv.Client()
	b.ReportAllocs()
	for b.Loop() {
		resp, err := client.Post(e.url+"/chat/stream", "application/json", strings.NewReader(`{"message":"Say hello to the benchmark"}`))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}

// BenchmarkIdleSessionMemory creates b.N sessions of one echo turn each (run it with
// -benchtime=10000x) and reports the live heap they hold once idle, per session.
func BenchmarkIdleSessionMemory(b *testing.B) {
	rt, err := runtime.New(runtime.Options{Agent: loadAgent(b, "hello"), Logger: quietLogger(),
		DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close(b.Context()) //nolint:errcheck // nothing to report at the end of a benchmark
	turn := func() {
		req := httptest.NewRequest("POST", "/chat/stream", strings.NewReader(`{"message":"Hello, how are you today?","metadata":{"userId":"u-123456"}}`))
		rec := httptest.NewRecorder()
		rt.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("status %d", rec.Code)
		}
	}
	turn() // warm up lazily built state
	var before, after goruntime.MemStats
	goruntime.GC()
	goruntime.ReadMemStats(&before)
	b.ResetTimer()
	for range b.N {
		turn()
	}
	b.StopTimer()
	goruntime.GC()
	goruntime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(b.N), "heap-bytes/session")
}

// BenchmarkSharedStoreTurn is one echo turn on a session of 200 stored entries, on the platform
// path: a runtime over a shared Postgres store (SVC_TEST_POSTGRES_URL or the local server).
// Each turn takes the turn lock, loads the whole session and stores the new entries.
func BenchmarkSharedStoreTurn(b *testing.B) {
	store := dbstore.New(dbtest.Postgres(b))
	e := start(b, runtime.Options{Agent: loadAgent(b, "hello"), AgentID: agentID, Sessions: store,
		SharedStore: true, DefaultModel: agent.ModelRef{Provider: models.ProviderEcho, Model: "echo"}})
	client := e.srv.Client()
	turn := func(session string) string {
		body := `{"message":"Say hello to the benchmark, with a longer message to store"}`
		if session != "" {
			body = `{"message":"Say hello to the benchmark, with a longer message to store","session_id":"` + session + `"}`
		}
		resp, err := client.Post(e.url+"/chat/stream", "application/json", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		fs := readFrames(b, resp.Body, 0)
		return sessionOf(b, fs)
	}
	id := turn("")
	for range 99 { // 200 entries: a user message and an answer each
		turn(id)
	}
	b.ReportAllocs()
	for b.Loop() {
		turn(id)
	}
}
