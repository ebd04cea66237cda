package dbqueue_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"svc/workers"
	"svc/workers/dbqueue"
)

// Two Queues on one database with complementary Types and ExceptTypes are two lanes: each Run
// claims only its own types, and together they run every task once.
func TestLanes(t *testing.T) {
	eachDB(t, func(t *testing.T, db *gorm.DB) {
		fires, err := dbqueue.New(db, dbqueue.Config{Types: []string{"fire"}, PollInterval: 10 * time.Millisecond, Concurrency: 8})
		if err != nil {
			t.Fatal(err)
		}
		rest, err := dbqueue.New(db, dbqueue.Config{ExceptTypes: []string{"fire"}, PollInterval: 10 * time.Millisecond, Concurrency: 2})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for i := range 20 {
			typ := "fire"
			if i%2 == 1 {
				typ = "build"
			}
			// Either Queue value enqueues any type.
			q := fires
			if i%4 < 2 {
				q = rest
			}
			if err := q.Enqueue(ctx, workers.Task{Type: typ, ID: fmt.Sprintf("%s-%d", typ, i)}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		seen := map[string][]string{}
		var wg sync.WaitGroup
		wg.Add(20)
		record := func(lane string) func(ctx context.Context, task workers.Task) error {
			return func(ctx context.Context, task workers.Task) error {
				mu.Lock()
				seen[lane] = append(seen[lane], task.Type)
				mu.Unlock()
				wg.Done()
				return nil
			}
		}
		runCtx, stop := context.WithCancel(ctx)
		var runs sync.WaitGroup
		for lane, q := range map[string]*dbqueue.Queue{"fires": fires, "rest": rest} {
			mux := workers.NewServeMux()
			mux.HandleFunc("fire", record(lane))
			mux.HandleFunc("build", record(lane))
			runs.Go(func() {
				if err := q.Run(runCtx, mux); err != nil {
					t.Errorf("Run: %v", err)
				}
			})
		}
		wg.Wait()
		stop()
		runs.Wait()
		for lane, types := range seen {
			for _, typ := range types {
				if (lane == "fires") != (typ == "fire") {
					t.Errorf("lane %s ran a %s task", lane, typ)
				}
			}
		}
		if len(seen["fires"]) != 10 || len(seen["rest"]) != 10 {
			t.Errorf("lanes ran %d and %d tasks, want 10 each", len(seen["fires"]), len(seen["rest"]))
		}
	})
	if _, err := dbqueue.New(openDB(t, sqliteHarness.New(t)), dbqueue.Config{Types: []string{"a"}, ExceptTypes: []string{"b"}}); !errors.Is(err, dbqueue.ErrConfig) {
		t.Errorf("Types and ExceptTypes together: %v", err)
	}
}

// eachDB runs f on a private SQLite database, then on a private Postgres one.
func eachDB(t *testing.T, f func(t *testing.T, db *gorm.DB)) {
	t.Run("sqlite", func(t *testing.T) { f(t, openDB(t, sqliteHarness.New(t))) })
	t.Run("postgres", func(t *testing.T) { f(t, openDB(t, postgresHarness.New(t))) })
}
