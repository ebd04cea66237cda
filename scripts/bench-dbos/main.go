// Command bench-dbos measures DBOS Transact for Go on a local Postgres, as the peer of the
// durable tool benchmarks of runner/runtime (issue 11; see BENCHMARKS.md):
//
//   - step: the cost of a checkpointed step, from a workflow of 100 RunAsStep steps against a
//     workflow of none, each run to its result, alternately: ns/step = (with - without) / 100;
//   - resume: Send to a workflow blocked in Recv until the workflow's next step is checkpointed
//     (the step after the pause, as in BenchmarkDurableResume), p50 and p99;
//   - waiting: the heap, goroutine stacks and goroutines that 1,000 workflows blocked in Recv
//     hold, per workflow, then how long Send to all of them (8 at a time) takes until all finish.
//
// It creates a fresh database bench_dbos_<random> on the server of -db and drops it at the end.
// It is a module of its own, so that the main module does not depend on DBOS.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"log"
	"log/slog"
	"net/url"
	"os"
	goruntime "runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dbos-inc/dbos-transact-golang/dbos"
	"github.com/jackc/pgx/v5"
)

var (
	dbURL   = flag.String("db", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "Postgres server (its database is only used to create and drop the benchmark's)")
	stepOps = flag.Int("step-ops", 30, "pairs of workflows (100 steps, 0 steps) for the step figure")
	resumes = flag.Int("resume-ops", 200, "Send -> resumed measurements")
	waiting = flag.Int("waiting", 1000, "workflows blocked in Recv for the memory figure")
)

// stamps notes, per workflow, when the step after its Recv was checkpointed; ready tells the
// benchmark a workflow reached its Recv.
var (
	stampMu sync.Mutex
	stamps  = map[string]time.Time{}
	ready   = make(chan string, 1<<16)
)

func hundredSteps(ctx dbos.Context, _ int) (int, error) {
	for i := range 100 {
		if _, err := dbos.RunAsStep(ctx, func(context.Context) (int, error) { return i, nil }); err != nil {
			return 0, err
		}
	}
	return 1, nil
}

func noSteps(dbos.Context, int) (int, error) { return 1, nil }

func awaitMessage(ctx dbos.Context, _ int) (int, error) {
	id, err := dbos.GetWorkflowID(ctx)
	if err != nil {
		return 0, err
	}
	ready <- id
	if _, err := dbos.Recv[string](ctx, "go", time.Hour); err != nil {
		return 0, err
	}
	if _, err := dbos.RunAsStep(ctx, func(context.Context) (int64, error) { return time.Now().UnixMilli(), nil }); err != nil {
		return 0, err
	}
	now := time.Now()
	stampMu.Lock()
	stamps[id] = now
	stampMu.Unlock()
	return 1, nil
}

func main() {
	flag.Parse()
	log.SetFlags(0)
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, *dbURL)
	if err != nil {
		return fmt.Errorf("connect to %s: %w", *dbURL, err)
	}
	defer admin.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "bench_dbos_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return err
	}
	defer func() {
		if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			log.Printf("drop %s: %v", name, err)
		}
	}()
	u, err := url.Parse(*dbURL)
	if err != nil {
		return err
	}
	u.Path = "/" + name

	dctx, err := dbos.NewContext(ctx, dbos.Config{DatabaseURL: u.String(), AppName: "bench-dbos",
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		return err
	}
	dbos.RegisterWorkflow(dctx, hundredSteps)
	dbos.RegisterWorkflow(dctx, noSteps)
	dbos.RegisterWorkflow(dctx, awaitMessage)
	if err := dbos.Launch(dctx); err != nil {
		return err
	}
	defer func() { _ = dbos.Shutdown(dctx, 10*time.Second) }()

	if err := benchSteps(dctx); err != nil {
		return err
	}
	if err := benchResume(dctx); err != nil {
		return err
	}
	return benchWaiting(dctx)
}

func runToEnd(ctx dbos.Context, wf dbos.Workflow[int, int]) (time.Duration, error) {
	t0 := time.Now()
	h, err := dbos.RunWorkflow(ctx, wf, 0)
	if err != nil {
		return 0, err
	}
	if _, err := h.GetResult(); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

func benchSteps(ctx dbos.Context) error {
	if *stepOps <= 0 {
		return nil
	}
	for range 2 { // warm up
		if _, err := runToEnd(ctx, hundredSteps); err != nil {
			return err
		}
		if _, err := runToEnd(ctx, noSteps); err != nil {
			return err
		}
	}
	var with, without time.Duration
	for range *stepOps {
		d, err := runToEnd(ctx, hundredSteps)
		if err != nil {
			return err
		}
		with += d
		if d, err = runToEnd(ctx, noSteps); err != nil {
			return err
		}
		without += d
	}
	n := float64(*stepOps)
	fmt.Printf("dbos step (postgres): %.0f ns/step   with %.0f µs   without %.0f µs   (%d pairs)\n",
		float64(with-without)/n/100, float64(with.Microseconds())/n, float64(without.Microseconds())/n, *stepOps)
	return nil
}

// park starts an awaitMessage workflow and returns its handle once it reached Recv.
func park(ctx dbos.Context) (dbos.WorkflowHandle[int], error) {
	h, err := dbos.RunWorkflow(ctx, awaitMessage, 0)
	if err != nil {
		return nil, err
	}
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("workflow %s did not reach Recv", h.GetWorkflowID())
	}
	return h, nil
}

func benchResume(ctx dbos.Context) error {
	if *resumes <= 0 {
		return nil
	}
	var resumed, sends []time.Duration
	for i := range *resumes + 5 {
		h, err := park(ctx)
		if err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond) // let it block in Recv
		id := h.GetWorkflowID()
		t0 := time.Now()
		if err := dbos.Send(ctx, id, "yes", "go"); err != nil {
			return err
		}
		sent := time.Since(t0)
		if _, err := h.GetResult(); err != nil {
			return err
		}
		stampMu.Lock()
		at, ok := stamps[id]
		stampMu.Unlock()
		if !ok {
			return fmt.Errorf("workflow %s finished without its stamp", id)
		}
		if i >= 5 { // the first five warm up
			resumed, sends = append(resumed, at.Sub(t0)), append(sends, sent)
		}
	}
	fmt.Printf("dbos resume (postgres): Send -> step after Recv checkpointed p50 %.0f µs  p99 %.0f µs;  Send returns p50 %.0f µs  (%d ops)\n",
		micros(percentile(resumed, 50)), micros(percentile(resumed, 99)), micros(percentile(sends, 50)), len(resumed))
	return nil
}

func settle() (goruntime.MemStats, int) {
	time.Sleep(200 * time.Millisecond)
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&m)
	return m, goruntime.NumGoroutine()
}

func benchWaiting(ctx dbos.Context) error {
	n := *waiting
	if n <= 0 {
		return nil
	}
	before, g0 := settle()
	handles := make([]dbos.WorkflowHandle[int], n)
	t0 := time.Now()
	for i := range handles {
		h, err := dbos.RunWorkflow(ctx, awaitMessage, 0)
		if err != nil {
			return err
		}
		handles[i] = h
	}
	for range n {
		select {
		case <-ready:
		case <-time.After(60 * time.Second):
			return fmt.Errorf("the workflows did not all reach Recv")
		}
	}
	parkTook := time.Since(t0)
	time.Sleep(time.Second) // let them all block in Recv
	after, g1 := settle()

	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	t0 = time.Now()
	for range 8 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := dbos.Send(ctx, handles[i].GetWorkflowID(), "yes", "go"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, h := range handles {
		if _, err := h.GetResult(); err != nil {
			return err
		}
	}
	answerTook := time.Since(t0)
	close(errs)
	for err := range errs {
		return err
	}
	done, g2 := settle()
	fmt.Printf("dbos waiting (postgres, %d workflows in Recv): heap %.0f B/wf  stack %.0f B/wf  goroutines +%d (%.2f/wf)  heap after all finished %.0f B/wf, goroutines +%d;  start all %.2f s;  send to all and finish %.2f s (%.0f/s)\n",
		n, float64(int64(after.HeapInuse)-int64(before.HeapInuse))/float64(n), float64(int64(after.StackInuse)-int64(before.StackInuse))/float64(n),
		g1-g0, float64(g1-g0)/float64(n), float64(int64(done.HeapInuse)-int64(before.HeapInuse))/float64(n), g2-g0,
		parkTook.Seconds(), answerTook.Seconds(), float64(n)/answerTook.Seconds())
	return nil
}

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
