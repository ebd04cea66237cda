package runtime_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/runner/runtime"
	"svc/runner/streams/redisstream"
)

// BenchmarkChatStreamRedisLog is BenchmarkChatStream with the turn log in Redis (the
// scale-out backend) instead of memory: every frame also goes to a Redis stream.
func BenchmarkChatStreamRedisLog(b *testing.B) {
	rdb := dbtest.Redis(b)
	prefix := fmt.Sprintf("bench:turnlog:%d:", time.Now().UnixNano())
	b.Cleanup(func() {
		if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	})
	tl, err := redisstream.New(context.Background(), redisstream.Config{Redis: rdb, Prefix: prefix, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	defer tl.Close()
	benchChatStream(b, nil, tl)
}

// BenchmarkReattachFirstFrame is a reconnect to a finished turn of a tool call and an answer:
// the time from the request to its first replayed frame, p50 and p90 as metrics.
func BenchmarkReattachFirstFrame(b *testing.B) {
	for _, backend := range []string{"memory", "redis"} {
		b.Run(backend, func(b *testing.B) {
			opts := runtime.Options{Agent: loadAgent(b, "hello")}
			if backend == "redis" {
				rdb := dbtest.Redis(b)
				prefix := fmt.Sprintf("bench:reattach:%d:", time.Now().UnixNano())
				b.Cleanup(func() {
					if keys, _ := rdb.Keys(context.Background(), prefix+"*").Result(); len(keys) > 0 {
						rdb.Del(context.Background(), keys...)
					}
				})
				tl, err := redisstream.New(context.Background(), redisstream.Config{Redis: rdb, Prefix: prefix, Logger: quietLogger()})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = tl.Close() })
				opts.TurnLog = tl
			}
			e := start(b, opts)
			fs := e.chat("", map[string]any{"message": strings.Repeat("word ", 50)})
			id := sessionOf(b, fs)
			lat := make([]time.Duration, 0, b.N)
			client := e.srv.Client()
			b.ResetTimer()
			for b.Loop() {
				t0 := time.Now()
				resp, err := client.Do(e.request("GET", "/chat/sessions/"+id+"/stream?after=10", "", nil))
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
