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

	"gorm.io/gorm"

	"svc/migrations/dbtest"
	"svc/runner/durable"
)

// eachStore runs fn against Memory and against the database Store on SQLite and Postgres.
func eachStore(t *testing.T, fn func(t *testing.T, s durable.Store)) {
	t.Run("memory", func(t *testing.T) { fn(t, &durable.Memory{}) })
	dbtest.Each(t, func(t *testing.T, db *gorm.DB) { fn(t, durable.NewDB(db)) })
}

// t0 is a time with millisecond precision, which every backend keeps.
var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func newRun(id, status string, attempt int) durable.Run {
	return durable.Run{
		ID: id, AgentID: "agt", DeployID: "dep_1", ToolName: "refund", ParentSessionID: "ses_1",
		Owner: "usr_1", ScopeID: "scope_1", Status: status,
		Input:   json.RawMessage(`{"amount":12,"note":"<b>&</b>"}`),
		Context: map[string]string{"customer": "c_9", "tier": "gold"},
		Model:   durable.Model{Provider: "echo", Model: "echo-1", Effort: "low"},
		Attempt: attempt, LeaseUntil: t0.Add(time.Minute), CreatedAt: t0, UpdatedAt: t0,
	}
}

func mustCreate(t *testing.T, s durable.Store, r durable.Run) {
	t.Helper()
	if err := s.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func sameTime(a, b time.Time) bool { return a.Equal(b) }

func TestCreateGet(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		want := newRun("run_1", durable.Running, 1)
		mustCreate(t, s, want)
		if err := s.Create(ctx, want); err == nil {
			t.Error("a second run of the same id was created")
		}
		got, err := s.Get(ctx, "agt", "run_1")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != want.ID || got.AgentID != want.AgentID || got.DeployID != want.DeployID || got.ToolName != want.ToolName ||
			got.ParentSessionID != want.ParentSessionID || got.Owner != want.Owner || got.ScopeID != want.ScopeID ||
			got.Status != want.Status || string(got.Input) != string(want.Input) || !equalMaps(got.Context, want.Context) ||
			got.Model != want.Model || got.Pause != nil || got.Result != nil || got.Error != "" || got.AnsweredBy != "" || got.Attempt != 1 ||
			!sameTime(got.LeaseUntil, want.LeaseUntil) || !sameTime(got.CreatedAt, t0) || !sameTime(got.UpdatedAt, t0) {
			t.Errorf("Get = %+v\nwant %+v", got, want)
		}
		if got.CreatedAt.Location() != time.UTC || got.LeaseUntil.Location() != time.UTC {
			t.Errorf("times not in UTC: %v, %v", got.CreatedAt, got.LeaseUntil)
		}
		if _, err := s.Get(ctx, "agt", "run_none"); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Get of an unknown run: %v", err)
		}
		if _, err := s.Get(ctx, "other", "run_1"); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Get for another agent: %v", err)
		}
		// Every method that names an agent hides the run from another one.
		if _, err := s.Claim(ctx, "other", "run_1", []string{durable.Running}, t0, t0); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Claim for another agent: %v", err)
		}
		if _, err := s.Cancel(ctx, "other", "run_1", t0); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Cancel for another agent: %v", err)
		}
		if _, err := s.Answer(ctx, "other", "run_1", "input#1", nil, "u", t0, t0); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Answer for another agent: %v", err)
		}
		other := want
		other.AgentID = "other"
		if _, err := s.Settle(ctx, other); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Settle for another agent: %v", err)
		}
		if _, err := s.Claim(ctx, "agt", "run_none", []string{durable.Running}, t0, t0); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Claim of an unknown run: %v", err)
		}

		// A run of svc dev (no agent) and one with nothing optional.
		bare := durable.Run{ID: "run_bare", ToolName: "t", Status: durable.Sleeping, CreatedAt: t0, UpdatedAt: t0}
		mustCreate(t, s, bare)
		got, err = s.Get(ctx, "", "run_bare")
		if err != nil || got.Input != nil || got.Context != nil || got.Pause != nil || !got.LeaseUntil.IsZero() || got.Attempt != 0 {
			t.Errorf("bare run = %+v, %v", got, err)
		}
	})
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestRecordJournal(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		mustCreate(t, s, newRun("run_1", durable.Running, 2))
		keys := []string{"step:stamp#1", "now#1", "random#1", "tool:lookup#1", "step:stamp#2"}
		for i, k := range keys {
			v := json.RawMessage(fmt.Sprintf(`{"i":%d,"s":"<&>"}`, i))
			if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: k, Value: v, At: t0.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatalf("Record %s: %v", k, err)
			}
		}
		if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: "now#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrRecorded) {
			t.Errorf("Record of a recorded key: %v", err)
		}
		if err := s.Record(ctx, "run_1", 1, durable.Entry{Key: "late#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record under an old attempt: %v", err)
		}
		if err := s.Record(ctx, "run_1", 3, durable.Entry{Key: "early#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record under a future attempt: %v", err)
		}
		if err := s.Record(ctx, "run_none", 1, durable.Entry{Key: "x#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record on an unknown run: %v", err)
		}
		j, err := s.Journal(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		if len(j) != len(keys) {
			t.Fatalf("journal has %d entries, want %d: %+v", len(j), len(keys), j)
		}
		for i, e := range j {
			want := fmt.Sprintf(`{"i":%d,"s":"<&>"}`, i)
			if e.Key != keys[i] || e.Seq != i+1 || string(e.Value) != want || !e.At.Equal(t0.Add(time.Duration(i)*time.Second)) {
				t.Errorf("entry %d = %+v (value %s), want %s #%d %s", i, e, e.Value, keys[i], i+1, want)
			}
		}
		if j, err := s.Journal(ctx, "run_none"); err != nil || len(j) != 0 {
			t.Errorf("journal of an unknown run = %v, %v", j, err)
		}

		// A parked or ended run takes no entry, even under its attempt.
		if _, err := s.Settle(ctx, durable.Run{ID: "run_1", AgentID: "agt", Attempt: 2, Status: durable.Completed, Result: json.RawMessage(`"ok"`)}); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: "after#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record on a completed run: %v", err)
		}
		// A recorded key on a run that moved on: the run's state wins.
		if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: "now#1", Value: json.RawMessage(`1`), At: t0}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record of a recorded key on a completed run: %v", err)
		}
	})
}

// Concurrent recordings of distinct keys all land, each once, in a journal whose order is stable.
func TestRecordConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		mustCreate(t, s, newRun("run_1", durable.Running, 1))
		var wg sync.WaitGroup
		for i := range 16 {
			wg.Go(func() {
				if err := s.Record(ctx, "run_1", 1, durable.Entry{Key: fmt.Sprintf("tool:t#%d", i), Value: json.RawMessage(`true`), At: t0}); err != nil {
					t.Errorf("Record %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		j, err := s.Journal(ctx, "run_1")
		if err != nil || len(j) != 16 {
			t.Fatalf("journal = %d entries, %v", len(j), err)
		}
		seen := map[string]bool{}
		for i, e := range j {
			seen[e.Key] = true
			if e.Seq < 1 || (i > 0 && e.Seq < j[i-1].Seq) {
				t.Errorf("entry %d has seq %d after %d", i, e.Seq, j[max(i-1, 0)].Seq)
			}
		}
		if len(seen) != 16 {
			t.Errorf("keys %v", seen)
		}
		again, err := s.Journal(ctx, "run_1")
		if err != nil || !slices.EqualFunc(j, again, func(a, b durable.Entry) bool { return a.Key == b.Key && a.Seq == b.Seq }) {
			t.Errorf("journal order changed between reads: %v", err)
		}
	})
}

func TestClaim(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		now := t0.Add(time.Hour)
		lease := now.Add(time.Minute)

		// From an allowed status.
		parked := newRun("run_sleep", durable.Sleeping, 3)
		parked.Pause = &durable.Pause{Kind: durable.PauseSleep, Key: "sleep#1", WakeAt: &now}
		mustCreate(t, s, parked)
		got, err := s.Claim(ctx, "agt", "run_sleep", []string{durable.Sleeping}, now, lease)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != durable.Running || got.Attempt != 4 || !got.LeaseUntil.Equal(lease) || !got.UpdatedAt.Equal(now) ||
			got.Pause == nil || got.Pause.Key != "sleep#1" {
			t.Errorf("claimed = %+v", got)
		}
		if err := s.Record(ctx, "run_sleep", 4, durable.Entry{Key: "sleep#1", Value: json.RawMessage(`null`), At: now}); err != nil {
			t.Errorf("Record under the claimed attempt: %v", err)
		}
		if err := s.Record(ctx, "run_sleep", 3, durable.Entry{Key: "x#1", Value: json.RawMessage(`1`), At: now}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record under the attempt before the claim: %v", err)
		}

		// From a status not allowed.
		mustCreate(t, s, newRun("run_wait", durable.AwaitingInput, 1))
		got, err = s.Claim(ctx, "agt", "run_wait", []string{durable.Sleeping}, now, lease)
		if !errors.Is(err, durable.ErrStale) || got.ID != "run_wait" || got.Status != durable.AwaitingInput || got.Attempt != 1 {
			t.Errorf("Claim from a status not allowed = %+v, %v", got, err)
		}
		for _, ended := range []string{durable.Completed, durable.Failed, durable.Cancelled} {
			r := newRun("run_"+ended, ended, 1)
			r.LeaseUntil = t0 // long lapsed: an ended run is not claimed for its lease
			mustCreate(t, s, r)
			if got, err := s.Claim(ctx, "agt", r.ID, []string{durable.Sleeping, durable.AwaitingInput}, now, lease); !errors.Is(err, durable.ErrStale) || got.Status != ended {
				t.Errorf("Claim of a %s run = %+v, %v", ended, got, err)
			}
		}

		// A running run whose lease ended: its executor is dead.
		dead := newRun("run_dead", durable.Running, 5)
		dead.LeaseUntil = now.Add(-time.Second)
		mustCreate(t, s, dead)
		got, err = s.Claim(ctx, "agt", "run_dead", nil, now, lease)
		if err != nil || got.Attempt != 6 || !got.LeaseUntil.Equal(lease) {
			t.Errorf("Claim of a lapsed run = %+v, %v", got, err)
		}
		// A running run whose lease holds (also exactly now: "ended before now").
		for i, until := range []time.Time{now.Add(time.Second), now} {
			live := newRun(fmt.Sprintf("run_live%d", i), durable.Running, 5)
			live.LeaseUntil = until
			mustCreate(t, s, live)
			got, err = s.Claim(ctx, "agt", live.ID, []string{durable.Sleeping}, now, lease)
			if !errors.Is(err, durable.ErrStale) || got.Attempt != 5 || !got.LeaseUntil.Equal(until) {
				t.Errorf("Claim of a live run (lease %v) = %+v, %v", until, got, err)
			}
		}
		// Leases compare to the sub-second, also on SQLite, which keeps times as text.
		half := now.Add(500 * time.Millisecond)
		for i, c := range []struct {
			until  time.Time
			lapsed bool
		}{{now, true}, {now.Add(250 * time.Millisecond), true}, {now.Add(750 * time.Millisecond), false}, {now.Add(time.Second), false}} {
			r := newRun(fmt.Sprintf("run_frac%d", i), durable.Running, 1)
			r.LeaseUntil = c.until
			mustCreate(t, s, r)
			_, err := s.Claim(ctx, "agt", r.ID, nil, half, lease)
			if (err == nil) != c.lapsed || (err != nil && !errors.Is(err, durable.ErrStale)) {
				t.Errorf("Claim at %v of a run leased until %v: %v", half, c.until, err)
			}
		}
	})
}

// Of concurrent claims, exactly one wins; the others get the run as the winner left it.
func TestClaimConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		mustCreate(t, s, newRun("run_1", durable.Sleeping, 1))
		now := t0.Add(time.Hour)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wins []durable.Run
		var losers []durable.Run
		for i := range 8 {
			wg.Go(func() {
				got, err := s.Claim(ctx, "agt", "run_1", []string{durable.Sleeping}, now, now.Add(time.Duration(i+1)*time.Minute))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins = append(wins, got)
				case errors.Is(err, durable.ErrStale):
					losers = append(losers, got)
				default:
					t.Errorf("Claim: %v", err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 || len(losers) != 7 {
			t.Fatalf("%d claims won, %d lost", len(wins), len(losers))
		}
		for _, l := range losers {
			if l.Status != durable.Running || l.Attempt != 2 || !l.LeaseUntil.Equal(wins[0].LeaseUntil) {
				t.Errorf("loser saw %+v, winner %+v", l, wins[0])
			}
		}
		got, err := s.Get(ctx, "agt", "run_1")
		if err != nil || got.Attempt != 2 || !got.LeaseUntil.Equal(wins[0].LeaseUntil) {
			t.Errorf("stored %+v, %v", got, err)
		}
	})
}

func parkedAtInput(id string) durable.Run {
	r := newRun(id, durable.AwaitingInput, 1)
	r.Pause = &durable.Pause{Kind: durable.PauseInput, Key: "input:size#1", Question: "Which size?"}
	return r
}

func TestAnswer(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		now := t0.Add(time.Hour)
		lease := now.Add(time.Minute)
		mustCreate(t, s, parkedAtInput("run_1"))

		got, err := s.Answer(ctx, "agt", "run_1", "input:other#1", json.RawMessage(`"L"`), "usr_2", now, lease)
		if !errors.Is(err, durable.ErrStale) || got.Status != durable.AwaitingInput || got.Attempt != 1 || got.AnsweredBy != "" {
			t.Errorf("Answer of another key = %+v, %v", got, err)
		}
		if j, _ := s.Journal(ctx, "run_1"); len(j) != 0 {
			t.Errorf("a refused answer was journaled: %+v", j)
		}

		got, err = s.Answer(ctx, "agt", "run_1", "input:size#1", json.RawMessage(`{"value":"L"}`), "usr_2", now, lease)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != durable.Running || got.Attempt != 2 || got.AnsweredBy != "usr_2" || !got.LeaseUntil.Equal(lease) || !got.UpdatedAt.Equal(now) {
			t.Errorf("answered = %+v", got)
		}
		j, err := s.Journal(ctx, "run_1")
		if err != nil || len(j) != 1 || j[0].Key != "input:size#1" || string(j[0].Value) != `{"value":"L"}` || j[0].Seq != 1 || !j[0].At.Equal(now) {
			t.Errorf("journal = %+v, %v", j, err)
		}
		// The answered pause is answered: a second answer is stale.
		if got, err := s.Answer(ctx, "agt", "run_1", "input:size#1", json.RawMessage(`"S"`), "usr_3", now, lease); !errors.Is(err, durable.ErrStale) || got.AnsweredBy != "usr_2" {
			t.Errorf("second Answer = %+v, %v", got, err)
		}
		// The executor of the answer's attempt carries on.
		if err := s.Record(ctx, "run_1", 2, durable.Entry{Key: "step:ship#1", Value: json.RawMessage(`1`), At: now}); err != nil {
			t.Errorf("Record after the answer: %v", err)
		}

		// A sleeping run is answered (woken) the same way, and a run not parked is not.
		sleeping := newRun("run_sleep", durable.Sleeping, 1)
		sleeping.Pause = &durable.Pause{Kind: durable.PauseSleep, Key: "sleep#1", WakeAt: &now}
		mustCreate(t, s, sleeping)
		if got, err := s.Answer(ctx, "agt", "run_sleep", "sleep#1", nil, "timer", now, lease); err != nil || got.Status != durable.Running {
			t.Errorf("wake = %+v, %v", got, err)
		}
		mustCreate(t, s, newRun("run_run", durable.Running, 1))
		if _, err := s.Answer(ctx, "agt", "run_run", "input:size#1", nil, "u", now, lease); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Answer of a running run: %v", err)
		}
		if _, err := s.Answer(ctx, "agt", "run_none", "input:size#1", nil, "u", now, lease); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Answer of an unknown run: %v", err)
		}
	})
}
