package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"svc/automations"
	"svc/migrations/dbtest"
	"svc/registry"
	"svc/workers"
	"svc/workers/dbqueue"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// countingQueue is a queue that counts the tasks it took (not the duplicates it refused).
type countingQueue struct {
	workers.Queue
	mu    sync.Mutex
	taken map[string]int
}

func (q *countingQueue) Enqueue(ctx context.Context, t workers.Task, opts ...workers.Option) error {
	err := q.Queue.Enqueue(ctx, t, opts...)
	if err == nil {
		q.mu.Lock()
		q.taken[t.ID]++
		q.mu.Unlock()
	}
	return err
}

// counts returns the tasks taken so far, by ID.
func (q *countingQueue) counts() map[string]int {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make(map[string]int, len(q.taken))
	for id, n := range q.taken {
		out[id] = n
	}
	return out
}

// schedEnv is an agent's automations on a database, a fake clock, and a database queue that
// nothing runs unless the test runs it.
type schedEnv struct {
	db      *gorm.DB
	clock   *fakeClock
	store   *registry.Automations
	queue   *countingQueue
	dbq     *dbqueue.Queue
	reg     *prometheus.Registry
	metrics *workers.AutomationMetrics
	agentID string
}

func newSchedEnv(t *testing.T, db *gorm.DB, start time.Time) *schedEnv {
	t.Helper()
	clock := &fakeClock{t: start}
	ag, err := registry.NewAgents(db).Create(context.Background(), "desk", "")
	if err != nil {
		t.Fatal(err)
	}
	dbq, err := dbqueue.New(db, dbqueue.Config{PollInterval: 10 * time.Millisecond, RetryBase: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := workers.NewAutomationMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return &schedEnv{db: db, clock: clock, store: registry.NewAutomations(db).WithClock(clock.Now),
		queue: &countingQueue{Queue: dbq, taken: map[string]int{}}, dbq: dbq, reg: reg, metrics: m, agentID: ag.ID}
}

// automation stores an automation of spec created now, its next fire time the first of its
// schedule; enabled false stores it paused.
func (e *schedEnv) automation(t testing.TB, spec string, enabled bool) registry.Automation {
	t.Helper()
	a, err := automations.Decode([]byte(spec))
	if err != nil {
		t.Fatalf("decode %s: %v", spec, err)
	}
	now := e.clock.Now()
	a.Created = now
	sched, err := a.Schedule()
	if err != nil {
		t.Fatal(err)
	}
	rec := registry.Automation{AgentID: e.agentID, Name: a.Name, Spec: json.RawMessage(spec), Enabled: enabled}
	if next, ok := sched.Next(now); ok {
		rec.NextFireAt = &next
	}
	got, err := e.store.Create(context.Background(), rec)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (e *schedEnv) scheduler(cfg workers.SchedulerConfig) *workers.Scheduler {
	cfg.Automations, cfg.Queue, cfg.Now, cfg.Metrics = e.store, e.queue, e.clock.Now, e.metrics
	return workers.NewScheduler(cfg)
}

// tick moves the clock to at and ticks s once.
func (e *schedEnv) tick(t testing.TB, s *workers.Scheduler, at time.Time) workers.TickReport {
	t.Helper()
	e.clock.Set(at)
	rep, err := s.Tick(context.Background())
	if err != nil {
		t.Fatalf("Tick at %v: %v", at, err)
	}
	return rep
}

// fireTimes lists the fire times of automation id, oldest first, checking each was enqueued
// exactly once.
func (e *schedEnv) fireTimes(t testing.TB, id string) []time.Time {
	t.Helper()
	var out []time.Time
	var before registry.Cursor
	for {
		fires, next, err := e.store.ListFires(context.Background(), id, registry.FireQuery{Limit: 500, Before: before})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fires {
			out = append(out, f.FireTime)
		}
		if next.IsZero() {
			break
		}
		before = next
	}
	slices.SortFunc(out, func(a, b time.Time) int { return a.Compare(b) })
	counts := e.queue.counts()
	for _, ft := range out {
		task := workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: id, FireTime: ft})
		if counts[task.ID] != 1 {
			t.Errorf("fire %v of %s was enqueued %d times, want once", ft, id, counts[task.ID])
		}
	}
	return out
}

func (e *schedEnv) next(t testing.TB, id string) *time.Time {
	t.Helper()
	a, err := e.store.ByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return a.NextFireAt
}

// metricValue is the value of the counter name (with outcome, when given) or the sample count of
// the histogram name, in reg.
func metricValue(t testing.TB, reg *prometheus.Registry, name, outcome string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if outcome != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != outcome) {
				continue
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount())
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func times(start time.Time, step time.Duration, n int) []time.Time {
	var out []time.Time
	for i := range n {
		out = append(out, start.Add(time.Duration(i)*step))
	}
	return out
}

func equalTimes(a, b []time.Time) bool {
	return slices.EqualFunc(a, b, func(x, y time.Time) bool { return x.Equal(y) })
}

func TestSchedulerEveryMinute(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	a := e.automation(t, `{"name":"m","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	s := e.scheduler(workers.SchedulerConfig{})
	for i := 1; i <= 100; i++ {
		at := start.Add(time.Duration(i)*time.Minute + 300*time.Millisecond)
		if rep := e.tick(t, s, at); rep.Fired != 1 || rep.Missed != 0 {
			t.Fatalf("tick %d = %+v, want one fire", i, rep)
		}
		if rep := e.tick(t, s, at.Add(time.Second)); rep.Fired != 0 || rep.Due != 0 {
			t.Fatalf("second tick in minute %d = %+v, want nothing due", i, rep)
		}
	}
	if got, want := e.fireTimes(t, a.ID), times(start.Add(time.Minute), time.Minute, 100); !equalTimes(got, want) {
		t.Errorf("fires = %d from %v, want the 100 minutes %v … %v", len(got), got[:min(1, len(got))], want[0], want[99])
	}
	if n := e.next(t, a.ID); n == nil || !n.Equal(start.Add(101*time.Minute)) {
		t.Errorf("next fire = %v, want %v", n, start.Add(101*time.Minute))
	}
	if got := metricValue(t, e.reg, "svc_automation_missed_total", ""); got != 0 {
		t.Errorf("missed = %v, want 0", got)
	}
}

func TestSchedulerCronDST(t *testing.T) {
	oslo, err := time.LoadLocation("Europe/Oslo")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		from, to time.Time
		want     []time.Time
	}{
		{
			name: "spring forward fires the skipped 02:30 at 03:00 CEST",
			from: time.Date(2026, 3, 27, 12, 0, 0, 0, oslo), to: time.Date(2026, 3, 30, 12, 0, 0, 0, oslo),
			want: []time.Time{
				time.Date(2026, 3, 28, 2, 30, 0, 0, oslo),
				time.Date(2026, 3, 29, 3, 0, 0, 0, oslo), // 01:00Z
				time.Date(2026, 3, 30, 2, 30, 0, 0, oslo),
			},
		},
		{
			name: "fall back fires the repeated 02:30 once",
			from: time.Date(2026, 10, 24, 12, 0, 0, 0, oslo), to: time.Date(2026, 10, 26, 12, 0, 0, 0, oslo),
			want: []time.Time{
				time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST, the first of the two
				time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC), // 02:30 CET
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newSchedEnv(t, dbtest.SQLite(t), tt.from.UTC())
			a := e.automation(t, `{"name":"c","trigger":{"cron":"30 2 * * *","timezone":"Europe/Oslo"},"action":{"message":"go"}}`, true)
			s := e.scheduler(workers.SchedulerConfig{})
			for at := tt.from.UTC(); !at.After(tt.to); at = at.Add(10 * time.Minute) {
				e.tick(t, s, at)
			}
			if got := e.fireTimes(t, a.ID); !equalTimes(got, tt.want) {
				t.Errorf("fires = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSchedulerAtFiresOnce(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	at := start.Add(10 * time.Minute)
	a := e.automation(t, `{"name":"once","trigger":{"at":"`+at.Format(time.RFC3339)+`"},"action":{"message":"go"}}`, true)
	s := e.scheduler(workers.SchedulerConfig{})
	for _, d := range []time.Duration{5 * time.Minute, 10 * time.Minute, 11 * time.Minute, time.Hour} {
		e.tick(t, s, start.Add(d))
	}
	if got := e.fireTimes(t, a.ID); !equalTimes(got, []time.Time{at}) {
		t.Errorf("fires = %v, want once at %v", got, at)
	}
	if n := e.next(t, a.ID); n != nil {
		t.Errorf("next fire after the at = %v, want nil", n)
	}
}

func TestSchedulerCatchup(t *testing.T) {
	for _, tt := range []struct {
		catchup    string
		wantFires  int // after the first, of 10:00
		wantMissed float64
	}{
		{"1h", 1, 2},  // 13:00 fires; 11:00 and 12:00 are missed
		{"0s", 0, 3},  // nothing fires at 13:30; all three are missed
		{"24h", 1, 2}, // 13:00 fires, superseding 11:00 and 12:00
	} {
		t.Run("catchup "+tt.catchup, func(t *testing.T) {
			start := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
			e := newSchedEnv(t, dbtest.SQLite(t), start)
			a := e.automation(t, `{"name":"h","trigger":{"cron":"0 * * * *"},"action":{"message":"go"},"catchup":"`+tt.catchup+`"}`, true)
			s := e.scheduler(workers.SchedulerConfig{})
			e.tick(t, s, start.Add(time.Hour+30*time.Second)) // 10:00 fires
			// Down from 10:01 to 13:30.
			rep := e.tick(t, s, start.Add(4*time.Hour+30*time.Minute))
			if rep.Fired != tt.wantFires || float64(rep.Missed) != tt.wantMissed {
				t.Errorf("tick after the outage = %+v, want %d fires and %v missed", rep, tt.wantFires, tt.wantMissed)
			}
			want := []time.Time{start.Add(time.Hour)}
			if tt.wantFires == 1 {
				want = append(want, start.Add(4*time.Hour))
			}
			if got := e.fireTimes(t, a.ID); !equalTimes(got, want) {
				t.Errorf("fires = %v, want %v", got, want)
			}
			if got := metricValue(t, e.reg, "svc_automation_missed_total", ""); got != tt.wantMissed {
				t.Errorf("svc_automation_missed_total = %v, want %v", got, tt.wantMissed)
			}
			if n := e.next(t, a.ID); n == nil || !n.Equal(start.Add(5*time.Hour)) {
				t.Errorf("next fire = %v, want 14:00", n)
			}
		})
	}
}

func TestSchedulerSkipsWhatDoesNotFire(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	paused := e.automation(t, `{"name":"p","trigger":{"every":"1m"},"action":{"message":"go"}}`, false)
	broken := e.automation(t, `{"name":"b","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	event := e.automation(t, `{"name":"e","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	ctx := context.Background()
	if err := e.db.Exec("UPDATE automations SET spec = ? WHERE id = ?", `{"name":"b","trigger":{"every":"soon"}}`, broken.ID).Error; err != nil {
		t.Fatal(err)
	}
	if err := e.db.Exec("UPDATE automations SET spec = ? WHERE id = ?", `{"name":"e","trigger":{"event":true},"action":{"message":"go"}}`, event.ID).Error; err != nil {
		t.Fatal(err)
	}
	s := e.scheduler(workers.SchedulerConfig{})
	for i := 1; i <= 10; i++ {
		e.tick(t, s, start.Add(time.Duration(i)*time.Minute))
	}
	for _, a := range []registry.Automation{paused, broken, event} {
		if got := e.fireTimes(t, a.ID); len(got) != 0 {
			t.Errorf("%s fired at %v, want never", a.Name, got)
		}
	}
	if n := e.next(t, paused.ID); n == nil {
		t.Error("the paused automation lost its next fire time")
	}
	for _, a := range []registry.Automation{broken, event} {
		if n := e.next(t, a.ID); n != nil {
			t.Errorf("%s's next fire = %v, want nil (it no longer schedules)", a.Name, n)
		}
	}
	if _, err := e.store.ByID(ctx, broken.ID); err != nil {
		t.Fatal(err)
	}
}

// TestSchedulerExactlyOnce runs 4 Schedulers ticking together over 100 minutes of 50 automations
// on one Postgres database, with the queue delivering to a handler that counts: every
// (automation, fire time) has one fire and one delivered task.
func TestSchedulerExactlyOnce(t *testing.T) {
	const schedulers, ticks, count = 4, 100, 50
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.Postgres(t), start)
	var ids []string
	for i := range count {
		ids = append(ids, e.automation(t, fmt.Sprintf(`{"name":"a%d","trigger":{"every":"1m"},"action":{"message":"go"}}`, i), true).ID)
	}
	var mu sync.Mutex
	delivered, ran := map[string]int{}, map[string]int{}
	h := workers.NewAutomationFireHandler(workers.AutomationFireConfig{Automations: e.store, Queue: e.queue, Now: e.clock.Now, Metrics: e.metrics,
		Run: func(ctx context.Context, r workers.AutomationRun) (workers.AutomationResult, error) {
			mu.Lock()
			ran[r.Fire.AutomationID+" "+r.Fire.FireTime.String()]++
			mu.Unlock()
			return workers.AutomationResult{}, nil
		}})
	mux := workers.NewServeMux()
	mux.HandleFunc(workers.TaskAutomationFire, func(ctx context.Context, task workers.Task) error {
		mu.Lock()
		delivered[task.ID]++
		mu.Unlock()
		return h.ProcessTask(ctx, task)
	})
	runQueue(t, e.dbq, mux)

	var scheds []*workers.Scheduler
	for range schedulers {
		// The stale scan is left out (StaleAfter a day, longer than the test's 100 minutes: with
		// an hour, the scan at minute 91 enqueued again the fires of the first half hour that
		// the queue had not reached yet): its own test covers it, and a task it enqueues again
		// may be delivered once more (to do nothing).
		scheds = append(scheds, e.scheduler(workers.SchedulerConfig{Batch: 20, StaleAfter: 24 * time.Hour}))
	}
	var fired, lost, missed int
	for i := 1; i <= ticks; i++ {
		e.clock.Set(start.Add(time.Duration(i)*time.Minute + time.Second))
		reps := make([]workers.TickReport, schedulers)
		var wg sync.WaitGroup
		for j, s := range scheds {
			wg.Go(func() {
				var err error
				if reps[j], err = s.Tick(context.Background()); err != nil {
					t.Errorf("tick %d of scheduler %d: %v", i, j, err)
				}
			})
		}
		wg.Wait()
		for _, r := range reps {
			fired, lost, missed = fired+r.Fired, lost+r.Lost, missed+r.Missed
		}
	}
	if fired != ticks*count || missed != 0 {
		t.Errorf("the schedulers fired %d (lost %d claims), missed %d; want %d fires, none missed", fired, lost, missed, ticks*count)
	}
	waitFor(t, "every fire run", func() bool {
		return metricValue(t, e.reg, "svc_automation_runs_total", "done") >= ticks*count
	})
	want := times(start.Add(time.Minute), time.Minute, ticks)
	for _, id := range ids {
		if got := e.fireTimes(t, id); !equalTimes(got, want) {
			t.Errorf("fires of %s = %d, want the %d minutes", id, len(got), ticks)
		}
		for _, ft := range want {
			task := workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: id, FireTime: ft})
			mu.Lock()
			n, runs := delivered[task.ID], ran[id+" "+ft.String()]
			mu.Unlock()
			if n != 1 || runs != 1 {
				t.Errorf("the task of fire %v of %s was delivered %d times and ran %d times, want once each", ft, id, n, runs)
			}
		}
	}
	mu.Lock()
	if len(delivered) != ticks*count || len(ran) != ticks*count {
		t.Errorf("%d tasks delivered, %d fires ran; want %d", len(delivered), len(ran), ticks*count)
	}
	mu.Unlock()
}

// TestSchedulerRequeuesLostFire: a fire claimed whose task never reached the queue is enqueued
// again by a tick after StaleAfter, and runs once.
func TestSchedulerRequeuesLostFire(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	a := e.automation(t, `{"name":"m","trigger":{"every":"1h"},"action":{"message":"go"}}`, true)
	fireTime := *a.NextFireAt
	e.clock.Set(fireTime)
	next := fireTime.Add(time.Hour)
	// The claim of a scheduler that died before its enqueue.
	if ok, err := e.store.ClaimFire(context.Background(), a.ID, fireTime, &next); !ok || err != nil {
		t.Fatalf("ClaimFire = %v, %v", ok, err)
	}
	s := e.scheduler(workers.SchedulerConfig{StaleAfter: 30 * time.Second})
	if rep := e.tick(t, s, fireTime.Add(29*time.Second)); rep.Requeued != 0 || rep.Fired != 0 {
		t.Errorf("tick before StaleAfter = %+v, want nothing", rep)
	}
	if rep := e.tick(t, s, fireTime.Add(31*time.Second)); rep.Requeued != 0 {
		t.Errorf("tick 2s after the last stale scan = %+v, want no scan (one every StaleAfter/2)", rep)
	}
	if rep := e.tick(t, s, fireTime.Add(45*time.Second)); rep.Requeued != 1 {
		t.Errorf("tick after StaleAfter = %+v, want the fire enqueued again", rep)
	}
	runs := make(chan registry.AutomationFire, 10)
	h := workers.NewAutomationFireHandler(workers.AutomationFireConfig{Automations: e.store, Queue: e.queue, Now: e.clock.Now, Metrics: e.metrics,
		Run: func(ctx context.Context, r workers.AutomationRun) (workers.AutomationResult, error) {
			runs <- r.Fire
			return workers.AutomationResult{SessionID: "s1", DoneReason: "model_stop"}, nil
		}})
	mux := workers.NewServeMux()
	mux.Handle(workers.TaskAutomationFire, h)
	runQueue(t, e.dbq, mux)
	waitFor(t, "the fire done", func() bool {
		f, err := e.store.GetFire(context.Background(), a.ID, fireTime)
		return err == nil && f.Status == registry.FireDone
	})
	if rep := e.tick(t, s, fireTime.Add(2*time.Minute)); rep.Requeued != 0 {
		t.Errorf("tick after the run = %+v, want nothing enqueued again", rep)
	}
	if len(runs) != 1 {
		t.Errorf("the lost fire ran %d times, want once", len(runs))
	}
	if f := <-runs; !f.FireTime.Equal(fireTime) {
		t.Errorf("ran fire %v, want %v", f.FireTime, fireTime)
	}
}

// runQueue runs q with mux until the test ends.
func runQueue(t *testing.T, q workers.Queue, mux *workers.ServeMux) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := q.Run(ctx, mux); err != nil {
			t.Errorf("queue run: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitFor polls cond until it holds, failing the test after 3 minutes (a bound, not a speed).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkSchedulerTick times the claim and enqueue of fires: 10,000 automations due in one
// tick, on the database queue, reported per fire.
func BenchmarkSchedulerTick(b *testing.B) {
	for _, db := range []struct {
		name string
		open func(testing.TB) *gorm.DB
	}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}} {
		b.Run(db.name, func(b *testing.B) {
			const count = 10000
			start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
			e := newBenchEnv(b, db.open(b), start, count)
			s := e.scheduler(workers.SchedulerConfig{})
			fires := 0
			b.ResetTimer()
			for i := range b.N {
				e.clock.Set(start.Add(time.Duration(i+1)*time.Minute + time.Second))
				rep, err := s.Tick(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				if rep.Fired != count {
					b.Fatalf("tick %d fired %d, want %d", i, rep.Fired, count)
				}
				fires += rep.Fired
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fires), "ns/fire")
		})
	}
}

// newBenchEnv is a schedEnv with count every-minute automations, inserted in one statement.
func newBenchEnv(b *testing.B, db *gorm.DB, start time.Time, count int) *schedEnv {
	b.Helper()
	e := &schedEnv{db: db, clock: &fakeClock{t: start}}
	ag, err := registry.NewAgents(db).Create(context.Background(), "desk", "")
	if err != nil {
		b.Fatal(err)
	}
	e.agentID = ag.ID
	dbq, err := dbqueue.New(db, dbqueue.Config{})
	if err != nil {
		b.Fatal(err)
	}
	e.dbq, e.queue = dbq, &countingQueue{Queue: dbq, taken: map[string]int{}}
	e.store = registry.NewAutomations(db).WithClock(e.clock.Now)
	e.automation(b, `{"name":"m","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	// Copy the one made count-1 times, as the API would have created them.
	err = db.Exec(`INSERT INTO automations (id, agent_id, owner_scope, saver, name, spec, enabled, disabled_reason, event_secret, created_at, updated_at, next_fire_at)
		WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)
		SELECT 'aubench-' || n.i, a.agent_id, a.owner_scope, a.saver, a.name, a.spec, a.enabled, a.disabled_reason, a.event_secret, a.created_at, a.updated_at, a.next_fire_at
		FROM automations a, n`, count-1).Error
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// TestSchedulerRun: Run ticks until its ctx is done, then returns nil.
func TestSchedulerRun(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	a := e.automation(t, `{"name":"m","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	e.clock.Set(start.Add(time.Minute))
	s := e.scheduler(workers.SchedulerConfig{Interval: 5 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	task := workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: a.ID, FireTime: start.Add(time.Minute)})
	waitFor(t, "the fire's task", func() bool { return e.queue.counts()[task.ID] > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil once its ctx is done", err)
	}
	if got := e.fireTimes(t, a.ID); len(got) != 1 {
		t.Errorf("fires = %v, want one", got)
	}
}

// TestSchedulerRunWakesAtFireTime: after a tick, Run sleeps until the next fire time when it
// comes before the next Interval, so that a fire is not left waiting for a whole Interval.
func TestSchedulerRunWakesAtFireTime(t *testing.T) {
	start := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	e := newSchedEnv(t, dbtest.SQLite(t), start)
	a := e.automation(t, `{"name":"m","trigger":{"every":"1m"},"action":{"message":"go"}}`, true)
	fireTime := start.Add(time.Minute)
	// The first tick and its wait read the clock 30ms before the fire time, every later read is
	// at it: only a Run that wakes before its hour-long Interval fires.
	var reads atomic.Int64
	s := workers.NewScheduler(workers.SchedulerConfig{Automations: e.store, Queue: e.queue, Metrics: e.metrics, Interval: time.Hour,
		Now: func() time.Time {
			if reads.Add(1) <= 2 {
				return fireTime.Add(-30 * time.Millisecond)
			}
			return fireTime
		}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	task := workers.NewAutomationFireTask(workers.AutomationFireTask{AutomationID: a.ID, FireTime: fireTime})
	waitFor(t, "the fire's task", func() bool { return e.queue.counts()[task.ID] > 0 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil once its ctx is done", err)
	}
}
