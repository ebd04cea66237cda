package runtime_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"svc/migrations/dbtest"
	"svc/runner/durable"
	"svc/runner/durable/engine"
	"svc/runner/runtime"
)

// The benchmarks of durable tools (issue 11): the cost of a journaled ctx.step, the latency from
// an answer to the resumed handler, and what a parked run holds in the process. Each runs on the
// memory store, SQLite and Postgres (skipped outside CI when no Postgres answers, as dbtest does).

// benchStores runs fn as sub-benchmarks memory, sqlite and postgres, each on a fresh store.
func benchStores(b *testing.B, fn func(b *testing.B, s durable.Store)) {
	b.Run("memory", func(b *testing.B) { fn(b, &durable.Memory{}) })
	b.Run("sqlite", func(b *testing.B) { fn(b, durable.NewDB(dbtest.SQLite(b))) })
	b.Run("postgres", func(b *testing.B) { fn(b, durable.NewDB(dbtest.Postgres(b))) })
}

// firstRun starts the flow tool in a chat turn (the echo model calls it) and returns the run's
// id; the benchmarks then run the tool again with POST /api/sessions/{id}/restart, which executes
// a new run without a chat session around it.
func firstRun(tb testing.TB, e *env, s durable.Store, deployID string) string {
	tb.Helper()
	fs := e.chat("", map[string]any{"message": `/tool flow {}`})
	res := ofType(fs, "tool_call_result")
	if len(res) != 1 {
		tb.Fatalf("frames %v", types(fs))
	}
	content := str(res[0].Data["content"])
	var r map[string]any
	if json.Unmarshal([]byte(content), &r) == nil && str(r["session_id"]) != "" {
		return str(r["session_id"])
	}
	// A run that completed in the call gives its result, not its id: take the newest run of the
	// deployment.
	runs, err := s.List(context.Background(), durable.Filter{})
	if err != nil {
		tb.Fatal(err)
	}
	for _, r := range runs {
		if r.DeployID == deployID {
			return r.ID
		}
	}
	tb.Fatalf("no durable run of %s after %v", deployID, types(fs))
	return ""
}

// post sends a JSON POST and returns the status and the decoded object answered.
func post(client *http.Client, url, body string) (int, map[string]any, error) {
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil {
		return resp.StatusCode, nil, fmt.Errorf("%d %q: %w", resp.StatusCode, data, err)
	}
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, out, fmt.Errorf("status %d: %s", resp.StatusCode, data)
	}
	return resp.StatusCode, out, nil
}

// restart executes a new run of the tool of run id and returns the new run's record.
func restart(client *http.Client, e *env, id string) (map[string]any, error) {
	_, out, err := post(client, e.url+"/api/sessions/"+id+"/restart", "")
	return out, err
}

const (
	stepsHandler = `export default async function (p: any, ctx: any) {
  for (let i = 0; i < 100; i++) { await ctx.step("s", () => i); }
  return 1;
}`
	plainHandler = `export default async function (p: any, ctx: any) {
  for (let i = 0; i < 100; i++) { await (() => i)(); }
  return 1;
}`
)

// BenchmarkDurableStep measures the cost of a journaled ctx.step in a real execution: each op
// executes one run of a handler doing 100 ctx.step calls and one run of the same handler doing
// 100 plain awaits (POST /api/sessions/{id}/restart, which runs the tool to its end), each timed
// on its own. ns/step is (time with steps - time without) / 100: one Record in the store, the
// step's key and JSON, and goja's promise for the step. ns/op is both executions together.
func BenchmarkDurableStep(b *testing.B) {
	benchStores(b, func(b *testing.B, s durable.Store) {
		steps := start(b, runtime.Options{Agent: durableAgent(b, stepsHandler), Durable: durableEngine(b, engine.Config{Store: s}), DeployID: "dep_steps"})
		plain := start(b, runtime.Options{Agent: durableAgent(b, plainHandler), Durable: durableEngine(b, engine.Config{Store: s}), DeployID: "dep_plain"})
		stepsID, plainID := firstRun(b, steps, s, "dep_steps"), firstRun(b, plain, s, "dep_plain")
		client := steps.srv.Client()
		run := func(e *env, id string) time.Duration {
			t0 := time.Now()
			out, err := restart(client, e, id)
			d := time.Since(t0)
			if err != nil || out["status"] != durable.Completed {
				b.Fatalf("restart: %v %v", out, err)
			}
			return d
		}
		run(steps, stepsID) // warm up: compile the handlers, open the connections
		run(plain, plainID)
		var with, without time.Duration
		n := 0
		for b.Loop() {
			with += run(steps, stepsID)
			without += run(plain, plainID)
			n++
		}
		b.ReportMetric(float64(with-without)/float64(n)/100, "ns/step")
		b.ReportMetric(float64(with.Microseconds())/float64(n), "with-µs")
		b.ReportMetric(float64(without.Microseconds())/float64(n), "without-µs")
	})
}

// stampStore is a Store that notes, per run, when the resumed handler reached the entry of one
// key (the first journaled call after its pause: the handler has resumed) and when that entry
// was written (the first checkpoint after the pause, as DBOS's "step after Recv checkpointed"),
// and tells who waits for a run when it ended.
type stampStore struct {
	durable.Store
	key      string
	mu       sync.Mutex
	at, done map[string]time.Time
	ended    map[string]chan struct{} // closed when the run's outcome is stored
}

// Settle stores the outcome and closes the run's ended channel, if one waits.
func (s *stampStore) Settle(ctx context.Context, r durable.Run) (durable.Run, error) {
	got, err := s.Store.Settle(ctx, r)
	if err == nil && durable.Ended(got.Status) {
		s.mu.Lock()
		ch := s.ended[r.ID]
		delete(s.ended, r.ID)
		s.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	}
	return got, err
}

// endOf returns a channel closed when run id ends; call it before the run can end.
func (s *stampStore) endOf(id string) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.ended[id] = ch
	return ch
}

func (s *stampStore) Record(ctx context.Context, id string, attempt int, e durable.Entry) error {
	if e.Key != s.key {
		return s.Store.Record(ctx, id, attempt, e)
	}
	return s.timed(id, func() error { return s.Store.Record(ctx, id, attempt, e) })
}

// RecordAll stamps as Record does when its group holds the key: the runtime writes an
// execution's entries in groups, from a background writer woken as soon as the handler records
// one, so the group's start is within microseconds of the handler reaching the step.
func (s *stampStore) RecordAll(ctx context.Context, id string, attempt int, es []durable.Entry) error {
	if !slices.ContainsFunc(es, func(e durable.Entry) bool { return e.Key == s.key }) {
		return s.Store.RecordAll(ctx, id, attempt, es)
	}
	return s.timed(id, func() error { return s.Store.RecordAll(ctx, id, attempt, es) })
}

// timed runs write, noting when it began and ended for run id.
func (s *stampStore) timed(id string, write func() error) error {
	reached := time.Now()
	err := write()
	written := time.Now()
	s.mu.Lock()
	s.at[id], s.done[id] = reached, written
	s.mu.Unlock()
	return err
}

func (s *stampStore) stamp(id string) (reached, written time.Time, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	reached, ok = s.at[id]
	return reached, s.done[id], ok
}

const approvalHandler = `export default async function (p: any, ctx: any) {
  const a = await ctx.waitForApproval("go?");
  await ctx.step("t", () => Date.now());
  return 1;
}`

// percentile is the p-th percentile (0 < p <= 100) of ds, by nearest rank.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func micros(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// BenchmarkDurableResume measures answer -> resumed handler: each op parks a run (outside the
// timer), then answers it with POST /api/sessions/{id}/answer. resumed is the time from just
// before the POST to the moment the resumed handler reaches the step that follows the pause
// (noted in process by stampStore), and ckpt until that step's entry is written (DBOS's "step
// after Recv checkpointed"); round-trip is the POST until its 200, which comes once the answer
// is recorded (the run resumes in the background), and end until the run's outcome is stored.
func BenchmarkDurableResume(b *testing.B) {
	benchStores(b, func(b *testing.B, s durable.Store) {
		st := &stampStore{Store: s, key: "step:t#1", at: map[string]time.Time{}, done: map[string]time.Time{}, ended: map[string]chan struct{}{}}
		e := start(b, runtime.Options{Agent: durableAgent(b, approvalHandler), Durable: durableEngine(b, engine.Config{Store: st})})
		first := firstRun(b, e, s, "")
		client := e.srv.Client()
		park := func() string {
			out, err := restart(client, e, first)
			if err != nil || out["status"] != durable.AwaitingInput {
				b.Fatalf("park: %v %v", out, err)
			}
			return str(out["session_id"])
		}
		answer := func(id string) (resumed, checkpointed, roundTrip, end time.Duration) {
			ended := st.endOf(id)
			t0 := time.Now()
			_, out, err := post(client, e.url+"/api/sessions/"+id+"/answer", `{"value":true}`)
			roundTrip = time.Since(t0)
			if err != nil || out["status"] != durable.Running {
				b.Fatalf("answer: %v %v", out, err)
			}
			<-ended
			end = time.Since(t0)
			if run, err := s.Get(context.Background(), "", id); err != nil || run.Status != durable.Completed {
				b.Fatalf("answered run = %+v, %v", run, err)
			}
			at, done, ok := st.stamp(id)
			if !ok {
				b.Fatalf("run %s completed without recording step:t#1", id)
			}
			return at.Sub(t0), done.Sub(t0), roundTrip, end
		}
		answer(park()) // warm up
		var resumed, checkpointed, trips, ends []time.Duration
		for b.Loop() {
			b.StopTimer()
			id := park()
			b.StartTimer()
			r, c, t, d := answer(id)
			resumed, checkpointed, trips, ends = append(resumed, r), append(checkpointed, c), append(trips, t), append(ends, d)
		}
		b.ReportMetric(micros(percentile(resumed, 50)), "p50-µs")
		b.ReportMetric(micros(percentile(resumed, 99)), "p99-µs")
		b.ReportMetric(micros(percentile(checkpointed, 50)), "ckpt-p50-µs")
		b.ReportMetric(micros(percentile(trips, 50)), "rt-p50-µs")
		b.ReportMetric(micros(percentile(trips, 99)), "rt-p99-µs")
		b.ReportMetric(micros(percentile(ends, 50)), "end-p50-µs")
	})
}

// parkedRuns is how many runs BenchmarkParkedRuns parks.
const parkedRuns = 10_000

// BenchmarkParkedRuns parks 10,000 runs on one runtime over SQLite and reports what they hold in
// the process: live heap (HeapInuse) per parked run, goroutines added, and goroutine stack
// growth, each after a GC; then it answers them all, 8 at a time, and reports how long that took
// until every answered run completed (each answer's execution runs in the background).
// Run it with -benchtime 1x. Sub-benchmark queue passes an engine.Config.Schedule that drops the
// wake-ups (the platform hands them to its queue); timers leaves Schedule nil (svc dev), so each
// run's lease wake-up is a timer of the process, kept for the lease (HandlerTimeout + 5s, made
// long here so that none fires during the measurement).
func BenchmarkParkedRuns(b *testing.B) {
	for _, c := range []struct {
		name     string
		schedule func(context.Context, engine.Wakeup) error
	}{
		{"queue", func(context.Context, engine.Wakeup) error { return nil }},
		{"timers", nil},
	} {
		b.Run("sqlite/"+c.name, func(b *testing.B) {
			s := durable.NewDB(dbtest.SQLite(b))
			e := start(b, runtime.Options{Agent: durableAgent(b, approvalHandler), Durable: durableEngine(b, engine.Config{Store: s, Schedule: c.schedule, HandlerTimeout: time.Hour}), HandlerTimeout: time.Hour})
			first := firstRun(b, e, s, "")
			client := e.srv.Client()
			const workers = 8
			each := func(n int, fn func(i int) error) time.Duration {
				var next atomic.Int64
				var wg sync.WaitGroup
				errs := make(chan error, workers)
				t0 := time.Now()
				for range workers {
					wg.Go(func() {
						for {
							i := int(next.Add(1)) - 1
							if i >= n {
								return
							}
							if err := fn(i); err != nil {
								errs <- err
								return
							}
						}
					})
				}
				wg.Wait()
				d := time.Since(t0)
				close(errs)
				for err := range errs {
					b.Fatal(err)
				}
				return d
			}
			park := func(ids []string) func(int) error {
				return func(i int) error {
					out, err := restart(client, e, first)
					if err != nil || out["status"] != durable.AwaitingInput {
						return fmt.Errorf("park: %v %v", out, err)
					}
					ids[i] = str(out["session_id"])
					return nil
				}
			}
			answer := func(ids []string) func(int) error {
				return func(i int) error {
					_, out, err := post(client, e.url+"/api/sessions/"+ids[i]+"/answer", `{"value":true}`)
					if err != nil || out["status"] != durable.Running {
						return fmt.Errorf("answer: %v %v", out, err)
					}
					return nil
				}
			}
			// finished waits until no run is running: the answers' executions (in the
			// background) have all ended.
			finished := func() {
				for {
					running, err := s.List(context.Background(), durable.Filter{Statuses: []string{durable.Running}, Limit: 1})
					if err != nil {
						b.Fatal(err)
					}
					if len(running) == 0 {
						return
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			settle := func() (goruntime.MemStats, int) {
				client.CloseIdleConnections() // the server's connection goroutines end with them
				time.Sleep(200 * time.Millisecond)
				var m goruntime.MemStats
				goruntime.GC()
				goruntime.GC()
				goruntime.ReadMemStats(&m)
				return m, goruntime.NumGoroutine()
			}
			for b.Loop() {
				b.StopTimer()
				// Warm up with the same concurrency: the compiled handler, connections, pools.
				warm := make([]string, 64)
				each(len(warm), park(warm))
				each(len(warm), answer(warm))
				finished()
				before, g0 := settle()
				ids := make([]string, parkedRuns)
				parkTook := each(parkedRuns, park(ids))
				after, g1 := settle()
				b.StartTimer()
				t0 := time.Now()
				each(parkedRuns, answer(ids))
				finished()
				answerTook := time.Since(t0)
				b.StopTimer()
				done, g2 := settle()
				b.ReportMetric(float64(int64(after.HeapInuse)-int64(before.HeapInuse))/parkedRuns, "heap-B/parked")
				b.ReportMetric(float64(int64(after.StackInuse)-int64(before.StackInuse))/parkedRuns, "stack-B/parked")
				b.ReportMetric(float64(g1-g0), "goroutines-added")
				b.ReportMetric(float64(int64(done.HeapInuse)-int64(before.HeapInuse))/parkedRuns, "heap-B/answered")
				b.ReportMetric(float64(g2-g0), "goroutines-after-answers")
				b.ReportMetric(parkTook.Seconds(), "park-all-s")
				b.ReportMetric(answerTook.Seconds(), "answer-all-s")
				b.ReportMetric(float64(parkedRuns)/answerTook.Seconds(), "answers/s")
				b.StartTimer()
			}
		})
	}
}
