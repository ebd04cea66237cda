package durable_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"svc/runner/durable"
)

// An execution whose lease lapsed is fenced off by the next claim: from the claim on, none of its
// writes (Record, RecordAll, Settle) lands, and the claimer's executions go on.
func TestFencedAfterLapse(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		r := newRun("run_1", durable.Running, 1)
		r.LeaseUntil = t0
		mustCreate(t, s, r)
		v := json.RawMessage(`1`)
		if err := s.Record(ctx, "run_1", 1, durable.Entry{Key: "step:a#1", Value: v, At: t0}); err != nil {
			t.Fatal(err) // past its lease but not claimed yet: the first execution still writes
		}
		now := t0.Add(time.Second)
		claimed, err := s.Claim(ctx, "agt", "run_1", nil, now, now.Add(time.Minute))
		if err != nil || claimed.Attempt != 2 {
			t.Fatalf("Claim of the lapsed run = %+v, %v", claimed, err)
		}
		if err := s.Record(ctx, "run_1", 1, durable.Entry{Key: "step:a#2", Value: v, At: now}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record of the first execution after the claim: %v", err)
		}
		if err := s.RecordAll(ctx, "run_1", 1, []durable.Entry{{Key: "step:b#1", Value: v, At: now}, {Key: "step:b#2", Value: v, At: now}}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("RecordAll of the first execution after the claim: %v", err)
		}
		late := claimed
		late.Attempt, late.Status, late.Result = 1, durable.Completed, json.RawMessage(`"late"`)
		if got, err := s.Settle(ctx, late); !errors.Is(err, durable.ErrStale) || got.Status != durable.Running || got.Attempt != 2 {
			t.Errorf("Settle of the first execution after the claim = %+v, %v", got, err)
		}
		// A claim does not take the run from a live lease either.
		if got, err := s.Claim(ctx, "agt", "run_1", nil, now, now.Add(time.Hour)); !errors.Is(err, durable.ErrStale) || got.Attempt != 2 {
			t.Errorf("Claim under the second execution's lease = %+v, %v", got, err)
		}
		if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: "step:a#2", Value: json.RawMessage(`2`), At: now}); err != nil {
			t.Errorf("Record of the second execution: %v", err)
		}
		done := claimed
		done.Status, done.Result = durable.Completed, json.RawMessage(`"second"`)
		if got, err := s.Settle(ctx, done); err != nil || got.Status != durable.Completed || string(got.Result) != `"second"` {
			t.Errorf("Settle of the second execution = %+v, %v", got, err)
		}
		j, err := s.Journal(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range j {
			got = append(got, e.Key+"="+string(e.Value))
		}
		if want := []string{"step:a#1=1", "step:a#2=2"}; !slices.Equal(got, want) {
			t.Errorf("journal %q, want %q", got, want)
		}
	})
}

// A write of the first execution racing the claim of the next one either lands before the
// claim (and the claimer reads it) or not at all: every write that reported success is in the
// journal the claimer reads right after its claim, and nothing lands after that read. On
// Postgres a write whose statement began before the claim committed must not commit after it.
func TestNoStaleWriteAfterClaim(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		for round := range 20 {
			id := fmt.Sprintf("run_%02d", round)
			r := newRun(id, durable.Running, 1)
			r.LeaseUntil = t0
			mustCreate(t, s, r)
			const writers = 4
			var (
				mu      sync.Mutex
				landed  []string // keys whose write reported success
				wg      sync.WaitGroup
				started = make(chan struct{}, writers)
			)
			for w := range writers {
				wg.Go(func() {
					for i := 0; ; i++ {
						var err error
						var keys []string
						if i%2 == 0 {
							keys = []string{fmt.Sprintf("step:w%d#%d", w, i)}
							err = s.Record(ctx, id, 1, durable.Entry{Key: keys[0], Value: json.RawMessage(`1`), At: t0})
						} else {
							keys = []string{fmt.Sprintf("step:w%d#%d", w, i), fmt.Sprintf("step:w%d#%d.b", w, i)}
							err = s.RecordAll(ctx, id, 1, []durable.Entry{{Key: keys[0], Value: json.RawMessage(`1`), At: t0}, {Key: keys[1], Value: json.RawMessage(`1`), At: t0}})
						}
						if i == 1 {
							started <- struct{}{}
						}
						switch {
						case errors.Is(err, durable.ErrStale):
							return
						case err != nil:
							t.Errorf("writer %d: %v", w, err)
							return
						}
						mu.Lock()
						landed = append(landed, keys...)
						mu.Unlock()
					}
				})
			}
			for range writers {
				<-started
			}
			now := t0.Add(time.Second)
			if _, err := s.Claim(ctx, "agt", id, nil, now, now.Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
			seen, err := s.Journal(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			after, err := s.Journal(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			keys := func(es []durable.Entry) []string {
				var out []string
				for _, e := range es {
					out = append(out, e.Key)
				}
				slices.Sort(out)
				return out
			}
			slices.Sort(landed)
			if !slices.Equal(keys(seen), keys(after)) {
				t.Fatalf("round %d: %d entries landed after the claim read %d", round, len(after)-len(seen), len(seen))
			}
			if !slices.Equal(keys(seen), landed) {
				t.Fatalf("round %d: the claimer read %d entries, the writers saw %d succeed", round, len(seen), len(landed))
			}
		}
	})
}

// Executions counts the executions since the run last waited at a pause: a claim of a lapsed
// lease adds one, an answer or a claim from a pause starts again at 1.
func TestExecutions(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		r := newRun("run_1", durable.Running, 1)
		r.Executions, r.LeaseUntil = 1, t0
		mustCreate(t, s, r)
		if got, err := s.Get(ctx, "agt", "run_1"); err != nil || got.Executions != 1 {
			t.Fatalf("created = %+v, %v", got, err)
		}
		now := t0
		for want := 2; want <= 4; want++ {
			now = now.Add(time.Minute)
			got, err := s.Claim(ctx, "agt", "run_1", nil, now, now) // a lease that lapses at once
			if err != nil || got.Executions != want || got.Attempt != want {
				t.Fatalf("lapsed claim %d = %+v, %v", want, got, err)
			}
		}
		park := durable.Run{ID: "run_1", AgentID: "agt", Attempt: 4, Status: durable.AwaitingInput,
			Pause: &durable.Pause{Kind: durable.PauseInput, Key: "input#1"}}
		if got, err := s.Settle(ctx, park); err != nil || got.Executions != 4 {
			t.Fatalf("parked = %+v, %v", got, err)
		}
		now = now.Add(time.Minute)
		got, err := s.Answer(ctx, "agt", "run_1", "input#1", json.RawMessage(`{"value":"x"}`), "u", now, now)
		if err != nil || got.Executions != 1 || got.Attempt != 5 {
			t.Fatalf("answered = %+v, %v", got, err)
		}
		now = now.Add(time.Minute)
		if got, err := s.Claim(ctx, "agt", "run_1", nil, now, now.Add(time.Minute)); err != nil || got.Executions != 2 {
			t.Fatalf("lapsed claim after the answer = %+v, %v", got, err)
		}
		park.Attempt, park.Pause = 6, &durable.Pause{Kind: durable.PauseSleep, Key: "sleep#1"}
		park.Status = durable.Sleeping
		if _, err := s.Settle(ctx, park); err != nil {
			t.Fatal(err)
		}
		if got, err := s.Claim(ctx, "agt", "run_1", []string{durable.Sleeping}, now, now.Add(time.Minute)); err != nil || got.Executions != 1 {
			t.Errorf("claim from a pause = %+v, %v", got, err)
		}
		if got, err := s.Get(ctx, "agt", "run_1"); err != nil || got.Executions != 1 || got.Attempt != 7 {
			t.Errorf("stored = %+v, %v", got, err)
		}
	})
}
