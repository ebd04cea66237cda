package dbqueue_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gorm.io/driver/sqlite"
	"gorm.io/gorm"

	"svc/migrations"
	"svc/migrations/dbtest"
	"svc/workers"
	"svc/workers/dbqueue"
	"svc/workers/queuetest"
)

// sqliteHarness and postgresHarness give each test a private database; Open opens its own handle
// on it, in this process or in the crash test's child process.
var (
	sqliteHarness = queuetest.Harness{
		New: func(tb testing.TB) string {
			path := filepath.Join(tb.TempDir(), "svc.db")
			dbtest.SQLiteAt(tb, path) // creates and migrates it
			return "sqlite:" + path
		},
		Open: openQueue,
	}
	postgresHarness = queuetest.Harness{
		New:  func(tb testing.TB) string { return dbtest.PostgresURL(tb) }, // Open migrates it
		Open: openQueue,
	}
)

func openDB(tb testing.TB, url string) *gorm.DB {
	tb.Helper()
	db, err := migrations.Open(context.Background(), url)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	tb.Cleanup(func() {
		sqlDB, err := db.DB()
		if err == nil {
			err = sqlDB.Close()
		}
		if err != nil {
			tb.Errorf("close database: %v", err)
		}
	})
	return db
}

func openQueue(tb testing.TB, addr string, cfg queuetest.Config) workers.Queue {
	tb.Helper()
	q, err := dbqueue.New(openDB(tb, addr), dbqueue.Config{
		Concurrency:  cfg.Concurrency,
		PollInterval: cfg.PollInterval,
		Lease:        cfg.Lease,
		RetryBase:    cfg.RetryBase,
		Logger:       cfg.Logger,
	})
	if err != nil {
		tb.Fatalf("dbqueue.New: %v", err)
	}
	return q
}

func TestConformance(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { queuetest.Run(t, sqliteHarness) })
	t.Run("postgres", func(t *testing.T) { queuetest.Run(t, postgresHarness) })
}

// TestHelperProcess is the worker process that the crash test kills; see queuetest.HelperProcess.
func TestHelperProcess(t *testing.T) { queuetest.HelperProcess(t, openQueue) }

func BenchmarkQueue(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) { queuetest.Benchmark(b, sqliteHarness) })
	b.Run("postgres", func(b *testing.B) { queuetest.Benchmark(b, postgresHarness) })
}

func TestNewRejectsBadConfig(t *testing.T) {
	db := dbtest.SQLite(t)
	tests := []struct {
		name string
		cfg  dbqueue.Config
		ok   bool
		want string
	}{
		{"defaults", dbqueue.Config{}, true, ""},
		{"negative Concurrency", dbqueue.Config{Concurrency: -1}, false, "Concurrency"},
		{"Concurrency at limit", dbqueue.Config{Concurrency: dbqueue.MaxConcurrency}, true, ""},
		{"Concurrency over limit", dbqueue.Config{Concurrency: dbqueue.MaxConcurrency + 1}, false, "Concurrency"},
		{"negative PollInterval", dbqueue.Config{PollInterval: -time.Second}, false, "PollInterval"},
		{"Lease at minimum", dbqueue.Config{Lease: dbqueue.MinLease}, true, ""},
		{"Lease under minimum", dbqueue.Config{Lease: dbqueue.MinLease - 1}, false, "Lease"},
		{"negative RetryBase", dbqueue.Config{RetryBase: -1}, false, "RetryBase"},
		{"negative Retention", dbqueue.Config{Retention: -1}, false, "Retention"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := dbqueue.New(db, tt.cfg)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("New = %v, want nil", err)
			case !tt.ok && (!errors.Is(err, dbqueue.ErrConfig) || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New = %v, want ErrConfig naming %s", err, tt.want)
			}
		})
	}
	if _, err := dbqueue.New(nil, dbqueue.Config{}); !errors.Is(err, dbqueue.ErrConfig) {
		t.Errorf("New(nil db) = %v, want ErrConfig", err)
	}
	raw, err := gorm.Open(sqlite.New(sqlite.Config{DriverName: "sqlite", DSN: filepath.Join(t.TempDir(), "raw.db")}), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dbqueue.New(raw, dbqueue.Config{}); !errors.Is(err, dbqueue.ErrConfig) || !strings.Contains(err.Error(), "translate errors") {
		t.Errorf("New(db without error translation) = %v, want ErrConfig", err)
	}
}

// failingHandler always fails, and says so on the channel when it is told that its task failed
// for good.
type failingHandler chan struct{}

func (failingHandler) ProcessTask(context.Context, workers.Task) error {
	return errors.New("always bad")
}

func (f failingHandler) TaskFailed(context.Context, workers.Task, error) { f <- struct{}{} }

// TestRows checks what the jobs table records: done and failed rows with their attempts and
// error, and that Run sweeps finished rows older than Retention when it starts.
func TestRows(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) {
		ctx := context.Background()
		failed := make(failingHandler, 1)
		q, err := dbqueue.New(db, dbqueue.Config{
			PollInterval: 10 * time.Millisecond,
			RetryBase:    time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		mux := workers.NewServeMux()
		done := make(chan struct{}, 1)
		mux.HandleFunc("ok", func(context.Context, workers.Task) error { done <- struct{}{}; return nil })
		mux.Handle("bad", failed)
		for _, task := range []workers.Task{{Type: "ok", ID: "ok"}, {Type: "bad", ID: "bad"}} {
			if err := q.Enqueue(ctx, task, workers.MaxRetry(1)); err != nil {
				t.Fatal(err)
			}
		}
		runCtx, stop := context.WithCancelCause(ctx)
		ran := make(chan error, 1)
		go func() { ran <- q.Run(runCtx, mux) }()
		<-done
		<-failed
		stop(errStop)
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		type row struct {
			UniqueKey string
			State     string
			Attempts  int
			LastError string
			WorkerID  string
		}
		var rows []row
		if err := db.Raw(`SELECT unique_key, state, attempts, last_error, worker_id FROM jobs ORDER BY unique_key`).Scan(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("rows = %+v, want 2", rows)
		}
		if r := rows[0]; r.UniqueKey != "bad" || r.State != "failed" || r.Attempts != 2 || r.LastError != "always bad" {
			t.Errorf("failed row = %+v, want state failed, 2 attempts, last_error \"always bad\"", r)
		}
		if r := rows[1]; r.UniqueKey != "ok" || r.State != "done" || r.Attempts != 1 || r.WorkerID == "" {
			t.Errorf("done row = %+v, want state done, 1 attempt, its worker recorded", r)
		}

		// A Run with a tiny retention sweeps both finished rows when it starts.
		sweeper, err := dbqueue.New(db, dbqueue.Config{Retention: time.Nanosecond, PollInterval: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := sweeper.Enqueue(ctx, workers.Task{Type: "ok", ID: "after"}); err != nil {
			t.Fatal(err)
		}
		runCtx, stop = context.WithCancelCause(ctx)
		go func() { ran <- sweeper.Run(runCtx, mux) }()
		<-done // the sweep ran before the first claim
		stop(errStop)
		if err := <-ran; err != nil {
			t.Fatal(err)
		}
		var keys []string
		if err := db.Raw(`SELECT unique_key FROM jobs ORDER BY unique_key`).Scan(&keys).Error; err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != "after" {
			t.Errorf("rows after the sweep = %q, want only the job processed after it", keys)
		}
	})
}

// errStop is the cancel cause of the Runs these tests stop.
var errStop = errors.New("test: stop")

func TestRunNeedsMigratedTable(t *testing.T) {
	db, err := migrations.OpenRaw(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "empty.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := db.DB(); err == nil {
			_ = sqlDB.Close() // nothing to report on a scratch database
		}
	})
	q, err := dbqueue.New(db, dbqueue.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background(), workers.NewServeMux()); err == nil || !strings.Contains(err.Error(), "migrations") {
		t.Fatalf("Run on an unmigrated database = %v, want an error pointing at migrations", err)
	}
}

func TestEnqueueBatch(t *testing.T) {
	for name, h := range map[string]queuetest.Harness{"sqlite": sqliteHarness, "postgres": postgresHarness} {
		t.Run(name, func(t *testing.T) {
			db := openDB(t, h.New(t))
			q, err := dbqueue.New(db, dbqueue.Config{})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := q.Enqueue(ctx, workers.Task{Type: "t", ID: "a"}); err != nil {
				t.Fatal(err)
			}
			// a is pending: left out, not an error; b twice in one batch: once.
			err = workers.EnqueueAll(ctx, q, []workers.Task{{Type: "t", ID: "a"}, {Type: "t", ID: "b"}, {Type: "t", ID: "b"}, {Type: "t"}}, workers.MaxRetry(3))
			if err != nil {
				t.Fatalf("EnqueueAll = %v", err)
			}
			var rows []struct {
				UniqueKey string
				MaxRetry  int
			}
			if err := db.Raw(`SELECT unique_key, max_retry FROM jobs WHERE state = 'queued' ORDER BY unique_key`).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			keys := map[string]int{}
			for _, r := range rows {
				keys[r.UniqueKey] = r.MaxRetry
			}
			if len(rows) != 3 || keys["a"] != workers.DefaultMaxRetry || keys["b"] != 3 {
				t.Errorf("queued jobs = %+v; want a (the first), b once with max_retry 3, and the one without ID", rows)
			}
			if err := workers.EnqueueAll(ctx, q, []workers.Task{{Type: ""}}); !errors.Is(err, workers.ErrBadTask) {
				t.Errorf("EnqueueAll of an invalid task = %v, want ErrBadTask", err)
			}
		})
	}
}
