package runtime_test

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/runner/runtime"
	"svc/runner/sessions/memstore"
	"svc/runner/streams"
	"svc/runner/streams/redisstream"
)

// BenchmarkChatStreamRedisLog is BenchmarkChatStream with the turn log in Redis (the
// scale-out backend) instead of memory: every frame also goes to a Redis stream.
func BenchmarkChatStreamRedisLog(b *testing.B) { benchChatStream(b, nil, redisTurnLog(b, 1)[0]) }

// BenchmarkChatStreamNoLog is BenchmarkChatStream without a turn log (no reattach): what the
// logs cost is measured against it.
func BenchmarkChatStreamNoLog(b *testing.B) { benchChatStream(b, nil, noLog{}) }

// noLog is a TurnLog that keeps nothing.
type noLog struct{}

func (noLog) Open(context.Context, string, func()) (streams.Writer, error) { return noWriter{}, nil }
func (noLog) Read(context.Context, string, string, int64) (streams.Batch, error) {
	return streams.Batch{}, streams.ErrNoTurn
}
func (noLog) Stop(context.Context, string) (bool, error) { return false, nil }

type noWriter struct{}

func (noWriter) Append(int64, []byte) {}
func (noWriter) Close()               {}

// BenchmarkReattachFirstFrame is a reconnect to a finished turn of a tool call and an answer:
// the time from the request to its first replayed frame, p50 and p90 as metrics. The
// reconnect reaches the runner that ran the turn (memory, redis), or another runner sharing
// the Redis log and the sessions (redis-other-runner).
func BenchmarkReattachFirstFrame(b *testing.B) {
	for _, backend := range []string{"memory", "redis", "redis-other-runner"} {
		b.Run(backend, func(b *testing.B) {
			opts := runtime.Options{Agent: loadAgent(b, "hello")}
			runners := 1
			if backend == "redis-other-runner" {
				runners = 2
				opts.Sessions, opts.Locker, opts.SharedStore, opts.AgentID = memstore.New(), &memstore.Locks{}, true, "agt_x"
			}
			var logs []*redisstream.Log
			if backend != "memory" {
				logs = redisTurnLog(b, runners)
				opts.TurnLog = logs[0]
			}
			e := start(b, opts)
			fs := e.chat("", map[string]any{"message": strings.Repeat("word ", 50)})
			id := sessionOf(b, fs)
			reader := e
			if runners == 2 {
				opts.TurnLog = logs[1]
				reader = start(b, opts)
			}
			lat := make([]time.Duration, 0, b.N)
			client := reader.srv.Client()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				resp, err := client.Do(reader.request("GET", "/chat/sessions/"+id+"/stream?after=10", "", nil))
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("resume: %v %v", resp, err)
				}
				br := bufio.NewReader(resp.Body)
				if _, err := br.ReadString('\n'); err != nil { // the first replayed frame's id line
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				resp.Body.Close()
			}
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*9/10].Microseconds()), "p90-µs")
			}
		})
	}
}
