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

// Of concurrent answers to one pause, exactly one is recorded; the others see who answered.
func TestAnswerConcurrent(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		mustCreate(t, s, parkedAtInput("run_1"))
		now := t0.Add(time.Hour)
		var wg sync.WaitGroup
		var mu sync.Mutex
		var wins, losers []durable.Run
		for i := range 8 {
			wg.Go(func() {
				got, err := s.Answer(ctx, "agt", "run_1", "input:size#1", json.RawMessage(fmt.Sprintf(`%d`, i)), fmt.Sprintf("usr_%d", i), now, now.Add(time.Minute))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					wins = append(wins, got)
				case errors.Is(err, durable.ErrStale):
					losers = append(losers, got)
				default:
					t.Errorf("Answer: %v", err)
				}
			})
		}
		wg.Wait()
		if len(wins) != 1 || len(losers) != 7 {
			t.Fatalf("%d answers won, %d lost", len(wins), len(losers))
		}
		for _, l := range losers {
			if l.AnsweredBy != wins[0].AnsweredBy || l.Status != durable.Running || l.Attempt != 2 {
				t.Errorf("loser saw %+v, winner %+v", l, wins[0])
			}
		}
		j, err := s.Journal(ctx, "run_1")
		if err != nil || len(j) != 1 || "usr_"+string(j[0].Value) != wins[0].AnsweredBy {
			t.Errorf("journal = %+v, %v; winner %s", j, err, wins[0].AnsweredBy)
		}
	})
}

func TestSettle(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		now := t0.Add(time.Hour)
		mustCreate(t, s, newRun("run_1", durable.Running, 2))

		stale := durable.Run{ID: "run_1", AgentID: "agt", Attempt: 1, Status: durable.Completed, Result: json.RawMessage(`1`)}
		if got, err := s.Settle(ctx, stale); !errors.Is(err, durable.ErrStale) || got.Status != durable.Running || got.Result != nil {
			t.Errorf("Settle under a stale attempt = %+v, %v", got, err)
		}

		wake, expires := now.Add(24*time.Hour), now.Add(48*time.Hour)
		pause := &durable.Pause{
			Kind: durable.PauseApproval, Key: "approval:refund#1", Question: "Refund 12 €?", Context: "order <o_1> & more",
			InputType: "choice", Options: json.RawMessage(`[{"value":"yes","label":"Yes","recommended":true},{"value":"no","label":"No"}]`),
			Payload: json.RawMessage(`{"amount":12,"currency":"EUR"}`), AllowEdits: true,
			EligibleAnswerers: []string{"usr_1", "grp_ops"}, ExcludeAnswerers: []string{"usr_9"},
			WakeAt: &wake, ExpiresAt: &expires, OnTimeout: json.RawMessage(`{"action":"escalate","to":["grp_lead"]}`),
		}
		in := durable.Run{ID: "run_1", AgentID: "agt", Attempt: 2, Status: durable.AwaitingInput, Pause: pause, UpdatedAt: now}
		got, err := s.Settle(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		pause.Question = "changed by the caller after Settle" // the store holds its own copy
		pause.EligibleAnswerers[0] = "changed"
		pause.Options[2] = 'X'
		got, err = s.Get(ctx, "agt", "run_1")
		if err != nil {
			t.Fatal(err)
		}
		p := got.Pause
		if got.Status != durable.AwaitingInput || got.Attempt != 2 || !got.UpdatedAt.Equal(now) || p == nil {
			t.Fatalf("settled = %+v", got)
		}
		if p.Kind != durable.PauseApproval || p.Key != "approval:refund#1" || p.Question != "Refund 12 €?" || p.Context != "order <o_1> & more" ||
			p.InputType != "choice" || string(p.Options) != `[{"value":"yes","label":"Yes","recommended":true},{"value":"no","label":"No"}]` ||
			string(p.Payload) != `{"amount":12,"currency":"EUR"}` || !p.AllowEdits ||
			!slices.Equal(p.EligibleAnswerers, []string{"usr_1", "grp_ops"}) || !slices.Equal(p.ExcludeAnswerers, []string{"usr_9"}) ||
			p.WakeAt == nil || !p.WakeAt.Equal(wake) || p.ExpiresAt == nil || !p.ExpiresAt.Equal(expires) ||
			string(p.OnTimeout) != `{"action":"escalate","to":["grp_lead"]}` {
			t.Errorf("pause = %+v", p)
		}
		// The parked run is answered at that pause's key, and the answer's executor settles it.
		got, err = s.Answer(ctx, "agt", "run_1", "approval:refund#1", json.RawMessage(`{"approved":true}`), "usr_1", now, now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		got, err = s.Settle(ctx, durable.Run{ID: "run_1", AgentID: "agt", Attempt: got.Attempt, Status: durable.Completed, Result: json.RawMessage(`{"refunded":12}`)})
		if err != nil || got.Status != durable.Completed || string(got.Result) != `{"refunded":12}` || got.Pause != nil || got.AnsweredBy != "usr_1" {
			t.Errorf("completed = %+v, %v", got, err)
		}
		if _, err := s.Settle(ctx, durable.Run{ID: "run_1", AgentID: "agt", Attempt: 3, Status: durable.Failed, Error: "again"}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Settle of a completed run: %v", err)
		}

		mustCreate(t, s, newRun("run_2", durable.Running, 1))
		got, err = s.Settle(ctx, durable.Run{ID: "run_2", AgentID: "agt", Attempt: 1, Status: durable.Failed, Error: "boom"})
		if err != nil || got.Status != durable.Failed || got.Error != "boom" || got.Result != nil {
			t.Errorf("failed = %+v, %v", got, err)
		}
		if _, err := s.Settle(ctx, durable.Run{ID: "run_none", AgentID: "agt", Attempt: 1, Status: durable.Failed}); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Settle of an unknown run: %v", err)
		}
	})
}

func TestCancel(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		now := t0.Add(time.Hour)
		mustCreate(t, s, parkedAtInput("run_1"))
		got, err := s.Cancel(ctx, "agt", "run_1", now)
		if err != nil || got.Status != durable.Cancelled || !got.UpdatedAt.Equal(now) || got.Pause == nil || got.Pause.Key != "input:size#1" {
			t.Errorf("Cancel = %+v, %v", got, err)
		}
		if got, err := s.Cancel(ctx, "agt", "run_1", now); !errors.Is(err, durable.ErrStale) || got.Status != durable.Cancelled {
			t.Errorf("second Cancel = %+v, %v", got, err)
		}
		if _, err := s.Answer(ctx, "agt", "run_1", "input:size#1", nil, "u", now, now); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Answer of a cancelled run: %v", err)
		}

		// A running run is cancelled under its executor, whose next write is stale.
		mustCreate(t, s, newRun("run_2", durable.Running, 1))
		if _, err := s.Cancel(ctx, "agt", "run_2", now); err != nil {
			t.Fatal(err)
		}
		if err := s.Record(ctx, "run_2", 1, durable.Entry{Key: "x#1", Value: json.RawMessage(`1`), At: now}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Record after Cancel: %v", err)
		}
		if _, err := s.Settle(ctx, durable.Run{ID: "run_2", AgentID: "agt", Attempt: 1, Status: durable.Completed}); !errors.Is(err, durable.ErrStale) {
			t.Errorf("Settle after Cancel: %v", err)
		}

		for _, ended := range []string{durable.Completed, durable.Failed} {
			mustCreate(t, s, newRun("run_"+ended, ended, 1))
			if got, err := s.Cancel(ctx, "agt", "run_"+ended, now); !errors.Is(err, durable.ErrStale) || got.Status != ended || !got.UpdatedAt.Equal(t0) {
				t.Errorf("Cancel of a %s run = %+v, %v", ended, got, err)
			}
		}
		if _, err := s.Cancel(ctx, "agt", "run_none", now); !errors.Is(err, durable.ErrNotFound) {
			t.Errorf("Cancel of an unknown run: %v", err)
		}
	})
}

func TestList(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		statuses := []string{durable.Running, durable.AwaitingInput, durable.Sleeping, durable.Completed, durable.Failed, durable.Cancelled}
		for i := range 12 {
			r := newRun(fmt.Sprintf("run_%02d", i), statuses[i%len(statuses)], 1)
			r.CreatedAt = t0.Add(time.Duration(i) * time.Minute)
			if i == 11 {
				r.CreatedAt = t0.Add(10 * time.Minute) // a tie with run_10: the larger id first
			}
			mustCreate(t, s, r)
			o := newRun(fmt.Sprintf("other_%02d", i), statuses[i%len(statuses)], 1)
			o.AgentID = "other"
			mustCreate(t, s, o)
		}
		ids := func(rs []durable.Run) []string {
			var out []string
			for _, r := range rs {
				out = append(out, r.ID)
			}
			return out
		}
		all, err := s.List(ctx, durable.Filter{AgentID: "agt"})
		want := []string{"run_11", "run_10", "run_09", "run_08", "run_07", "run_06", "run_05", "run_04", "run_03", "run_02", "run_01", "run_00"}
		if err != nil || !slices.Equal(ids(all), want) {
			t.Errorf("List = %v, %v; want %v", ids(all), err, want)
		}
		parked, err := s.List(ctx, durable.Filter{AgentID: "agt", Statuses: []string{durable.AwaitingInput, durable.Sleeping}})
		want = []string{"run_08", "run_07", "run_02", "run_01"}
		if err != nil || !slices.Equal(ids(parked), want) {
			t.Errorf("List parked = %v, %v; want %v", ids(parked), err, want)
		}
		top, err := s.List(ctx, durable.Filter{AgentID: "agt", Limit: 3})
		want = []string{"run_11", "run_10", "run_09"}
		if err != nil || !slices.Equal(ids(top), want) {
			t.Errorf("List limit 3 = %v, %v; want %v", ids(top), err, want)
		}
		if none, err := s.List(ctx, durable.Filter{AgentID: "nobody"}); err != nil || len(none) != 0 {
			t.Errorf("List of an agent without runs = %v, %v", ids(none), err)
		}
		if got := all[0]; string(got.Input) != `{"amount":12,"note":"<b>&</b>"}` || got.Context["tier"] != "gold" {
			t.Errorf("listed run = %+v", got)
		}
	})
}

// The default and largest page is 500.
func TestListLimit(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		for i := range 502 {
			r := newRun(fmt.Sprintf("run_%03d", i), durable.Completed, 1)
			r.CreatedAt = t0.Add(time.Duration(i) * time.Second)
			mustCreate(t, s, r)
		}
		for _, n := range []int{0, 1000} {
			got, err := s.List(ctx, durable.Filter{AgentID: "agt", Limit: n})
			if err != nil || len(got) != 500 || got[0].ID != "run_501" {
				t.Errorf("List limit %d = %d runs, %v", n, len(got), err)
			}
		}
	})
}

// Memory hands out copies: changing what went in or came out changes nothing stored.
func TestMemoryCopies(t *testing.T) {
	ctx := context.Background()
	s := &durable.Memory{}
	wake := t0
	in := parkedAtInput("run_1")
	in.Pause.WakeAt = &wake
	in.Pause.Options = json.RawMessage(`["a"]`)
	in.Pause.EligibleAnswerers = []string{"u"}
	mustCreate(t, s, in)
	in.Input[0] = 'X'
	in.Context["tier"] = "changed"
	in.Pause.Question = "changed"
	in.Pause.Options[0] = 'X'
	in.Pause.EligibleAnswerers[0] = "changed"
	*in.Pause.WakeAt = t0.Add(time.Hour)

	out, err := s.Get(ctx, "agt", "run_1")
	if err != nil {
		t.Fatal(err)
	}
	check := func(r durable.Run) {
		t.Helper()
		if r.Input[0] != '{' || r.Context["tier"] != "gold" || r.Pause.Question != "Which size?" || r.Pause.Options[0] != '[' ||
			r.Pause.EligibleAnswerers[0] != "u" || !r.Pause.WakeAt.Equal(t0) {
			t.Errorf("stored run changed through an alias: %+v %+v", r, r.Pause)
		}
	}
	check(out)
	out.Input[0] = 'X'
	out.Context["tier"] = "changed"
	out.Pause.Question = "changed"
	out.Pause.Options[0] = 'X'
	out.Pause.EligibleAnswerers[0] = "changed"
	*out.Pause.WakeAt = t0.Add(time.Hour)
	again, err := s.Get(ctx, "agt", "run_1")
	if err != nil {
		t.Fatal(err)
	}
	check(again)

	if _, err := s.Cancel(ctx, "agt", "run_1", t0); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, s, newRun("run_2", durable.Running, 1))
	v := json.RawMessage(`{"a":1}`)
	if err := s.Record(ctx, "run_2", 1, durable.Entry{Key: "k#1", Value: v, At: t0}); err != nil {
		t.Fatal(err)
	}
	v[0] = 'X'
	j, _ := s.Journal(ctx, "run_2")
	j[0].Value[1] = 'X'
	j2, _ := s.Journal(ctx, "run_2")
	if string(j2[0].Value) != `{"a":1}` {
		t.Errorf("journal changed through an alias: %s", j2[0].Value)
	}
}

// RecordAll writes entries in order after those already there, all or none: a key recorded
// already, twice in the batch, or a run no longer running under the attempt writes nothing.
func TestRecordAll(t *testing.T) {
	eachStore(t, func(t *testing.T, s durable.Store) {
		ctx := context.Background()
		mustCreate(t, s, newRun("run_1", durable.Running, 2))
		e := func(key string) durable.Entry {
			return durable.Entry{Key: key, Value: json.RawMessage(`"` + key + `"`), At: t0}
		}
		if err := s.Record(ctx, "run_1", 2, e("now#1")); err != nil {
			t.Fatal(err)
		}
		if err := s.RecordAll(ctx, "run_1", 2, []durable.Entry{e("step:a#1"), e("step:a#2"), e("random#1")}); err != nil {
			t.Fatal(err)
		}
		for _, bad := range []struct {
			name    string
			attempt int
			es      []durable.Entry
			want    error
		}{
			{"a recorded key", 2, []durable.Entry{e("step:b#1"), e("step:a#1")}, durable.ErrRecorded},
			{"a key twice", 2, []durable.Entry{e("step:c#1"), e("step:c#1")}, durable.ErrRecorded},
			{"a stale attempt", 1, []durable.Entry{e("step:d#1"), e("step:d#2")}, durable.ErrStale},
		} {
			if err := s.RecordAll(ctx, "run_1", bad.attempt, bad.es); !errors.Is(err, bad.want) {
				t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
			}
		}
		if err := s.RecordAll(ctx, "run_1", 2, nil); err != nil {
			t.Errorf("no entries: %v", err)
		}
		j, err := s.Journal(ctx, "run_1")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for i, en := range j {
			keys = append(keys, en.Key)
			if en.Seq != i+1 || string(en.Value) != `"`+en.Key+`"` {
				t.Errorf("entry %d = %+v", i, en)
			}
		}
		if want := []string{"now#1", "step:a#1", "step:a#2", "random#1"}; !slices.Equal(keys, want) {
			t.Errorf("journal %q, want %q", keys, want)
		}
	})
}
