package dbqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"svc/groupcommit"
	"svc/migrations"
	"svc/workers"
)

const (
	// sweepInterval is how often Run deletes finished jobs past Config.Retention.
	sweepInterval = time.Minute
	// dbTimeout bounds each bookkeeping statement.
	dbTimeout = 30 * time.Second
	// failTimeout bounds one call of a handler's TaskFailed.
	failTimeout = time.Minute
	// abandonGrace is how long a worker waits for a handler whose ctx has ended before it records
	// the attempt as failed and leaves the handler's goroutine behind.
	abandonGrace = 2 * time.Second
	// maxErrorLen caps the stored last_error.
	maxErrorLen = 8 << 10
	// claimBatch is the most jobs one claim statement takes.
	claimBatch = 32
	// errorLogEvery rate-limits the logging of repeated claim errors.
	errorLogEvery = 10 * time.Second
)

// errLeaseLost cancels a handler whose claim was taken over after its lease expired.
var errLeaseLost = errors.New("dbqueue: lease lost; another worker may run the task")

// lostMessage is stored as last_error of a job reclaimed from a worker whose lease expired.
const lostMessage = "worker lost while running the task (lease expired)"

// job is a claimed row.
type job struct {
	ID        string
	Type      string
	Payload   []byte
	UniqueKey string
	Attempts  int
	MaxRetry  int
	TimeoutMs int64
	LastError string
}

// Run claims and processes due jobs with mux's handlers until ctx is done; see workers.Queue.
func (q *Queue) Run(ctx context.Context, mux *workers.ServeMux) error {
	if mux == nil {
		return errors.New("dbqueue: Run: nil ServeMux")
	}
	if err := q.db.WithContext(ctx).Exec(`SELECT 1 FROM jobs WHERE 1 = 0`).Error; err != nil {
		if ctx.Err() != nil {
			return nil // asked to stop before starting: nothing to do
		}
		return fmt.Errorf("dbqueue: jobs table unavailable (are migrations applied?): %w", err)
	}
	r := &run{
		q:    q,
		mux:  mux,
		id:   claimPrefix(q.cfg.Instance) + newID()[:8],
		base: context.WithoutCancel(ctx),
	}
	r.done.Run = r.markDone
	if q.cfg.Instance != "" {
		r.reclaimPredecessors()
	}
	r.loop(ctx)
	return nil
}

// run is one Run call: a dispatcher loop and its workers.
type run struct {
	q    *Queue
	mux  *workers.ServeMux
	id   string
	seq  int // claims so far; only the dispatcher touches it
	base context.Context

	// The done marks of finished jobs, committed a group at a time (finish): whether each job
	// was still this worker's.
	done groupcommit.Group[doneMark, bool]
}

// doneMark is one finished job whose done mark is to be stored.
type doneMark struct{ id, workerID string }

// loop claims jobs while it has free slots, then sleeps until a wake-up, a freed slot or the
// poll interval. On ctx done it waits for its workers.
func (r *run) loop(ctx context.Context) {
	cfg := r.q.cfg
	var wg sync.WaitGroup
	defer wg.Wait()
	// freed has room for every worker, so a finishing worker never blocks, even after the
	// dispatcher stopped reading.
	freed := make(chan struct{}, cfg.Concurrency)
	running := 0
	timer := time.NewTimer(cfg.PollInterval)
	defer timer.Stop()
	var nextSweep, lastErrLog time.Time
	for ctx.Err() == nil {
		if now := time.Now(); !now.Before(nextSweep) {
			r.sweep()
			nextSweep = now.Add(sweepInterval)
		}
		for running < cfg.Concurrency && ctx.Err() == nil {
			r.seq++
			workerID := fmt.Sprintf("%s/%d", r.id, r.seq)
			// One statement claims as many jobs as there are free slots (up to claimBatch): a
			// claim per job made the claims a fifth of the CPU of a busy lane.
			n := min(cfg.Concurrency-running, claimBatch)
			js, err := r.claim(workerID, n)
			if err != nil {
				if time.Since(lastErrLog) > errorLogEvery {
					r.q.log.Error("claim job", "error", err)
					lastErrLog = time.Now()
				}
				break
			}
			for _, j := range js {
				running++
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer func() { freed <- struct{}{} }()
					r.work(j, workerID)
				}()
			}
			if len(js) < n {
				break
			}
		}
		select {
		case <-ctx.Done():
		case <-r.q.wake:
		case <-freed:
			running--
			// Every slot freed meanwhile too, so that one claim fills them all.
			for drained := false; !drained; {
				select {
				case <-freed:
					running--
				default:
					drained = true
				}
			}
		case <-timer.C:
			timer.Reset(cfg.PollInterval)
		}
	}
}

// claim takes up to n of the oldest due jobs (or jobs whose lease expired) for workerID; none
// when nothing is due. The jobs of one claim share workerID: every later statement on a job names
// its id too.
func (r *run) claim(workerID string, n int) ([]*job, error) {
	ctx, cancel := context.WithTimeout(r.base, dbTimeout) // a claim must not be cut between commit and read
	defer cancel()
	now := r.q.now()
	var pick string
	var pickArgs []any
	if r.q.dialect == migrations.Postgres {
		pick = `SELECT id FROM jobs
		        WHERE ((state = 'queued' AND run_at <= ?) OR (state = 'running' AND lease_until < ?))` + r.q.lane + `
		        ORDER BY run_at, created_at LIMIT ? FOR UPDATE SKIP LOCKED`
		pickArgs = append(append([]any{now, now}, r.q.laneArgs...), n)
	} else {
		// An UPDATE takes SQLite's single write lock even when it matches nothing; look first
		// with a read, which under WAL blocks no one, so that idle polling does not contend.
		var due int64
		err := r.q.db.WithContext(ctx).Raw(`SELECT EXISTS (SELECT 1 FROM jobs WHERE state = 'queued' AND run_at <= ?`+r.q.lane+`)
			OR EXISTS (SELECT 1 FROM jobs WHERE state = 'running' AND lease_until < ?`+r.q.lane+`)`,
			append(append(append([]any{now}, r.q.laneArgs...), now), r.q.laneArgs...)...).Scan(&due).Error
		if err != nil || due == 0 {
			return nil, err
		}
		// Each kind through its own index, in order and limited, then merged: one condition
		// with OR made SQLite sort every due job at each claim, a backlog's worth of work.
		pick = `SELECT id FROM (
		          SELECT * FROM (SELECT id, run_at, created_at FROM jobs WHERE state = 'running' AND lease_until < ?` + r.q.lane + `
		                         ORDER BY run_at, created_at LIMIT ?)
		          UNION ALL
		          SELECT * FROM (SELECT id, run_at, created_at FROM jobs WHERE state = 'queued' AND run_at <= ?` + r.q.lane + `
		                         ORDER BY run_at, created_at LIMIT ?))
		        ORDER BY run_at, created_at LIMIT ?`
		pickArgs = append(append(append(append(append([]any{now}, r.q.laneArgs...), n, now), r.q.laneArgs...), n), n)
	}
	var rows []job
	err := r.q.db.WithContext(ctx).Raw(
		`UPDATE jobs SET state = 'running', attempts = attempts + 1, lease_until = ?, worker_id = ?, updated_at = ?,
		        last_error = CASE WHEN state = 'running' THEN ? ELSE last_error END
		 WHERE id IN (`+pick+`)
		 RETURNING id, type, payload, unique_key, attempts, max_retry, timeout_ms, last_error`,
		append([]any{now.Add(r.q.cfg.Lease), workerID, now, lostMessage}, pickArgs...)...).Scan(&rows).Error
	if err != nil {
		return nil, err
	}
	out := make([]*job, len(rows))
	for i := range rows {
		out[i] = &rows[i]
	}
	return out, nil
}

// work runs one claimed job and records its outcome, holding the lease with a heartbeat until
// the outcome is stored.
func (r *run) work(j *job, workerID string) {
	task := workers.Task{Type: j.Type, Payload: j.Payload, ID: j.UniqueKey}
	log := r.q.log.With("task_id", task.ID, "task_type", task.Type, "attempt", j.Attempts)
	hctx, lost := context.WithCancelCause(r.base)
	defer lost(nil)
	hb := r.startHeartbeat(j.ID, workerID, lost, log)
	defer hb.stop()

	if j.Attempts > j.MaxRetry+1 {
		// Reclaimed after its worker died on the last allowed attempt: give up without running.
		err := fmt.Errorf("%w (attempt %d of %d)", workers.ErrWorkerLost, j.Attempts-1, j.MaxRetry+1)
		r.fail(j, workerID, task, err, log)
		return
	}
	err := r.call(hctx, task, j, log)
	if errors.Is(context.Cause(hctx), errLeaseLost) {
		log.Warn("lease lost while running; leaving the task to its new worker", "error", err)
		return
	}
	switch {
	case err == nil:
		r.finish(j, workerID, log)
	case errors.Is(err, workers.ErrSkipRetry) || j.Attempts > j.MaxRetry:
		r.fail(j, workerID, task, err, log)
	default:
		r.retry(j, workerID, err, log)
	}
}

// call runs the handler under the task's timeout. A handler that ignores its ctx is left behind
// abandonGrace after the ctx ended; its goroutine exits when the handler returns.
func (r *run) call(ctx context.Context, t workers.Task, j *job, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(j.TimeoutMs)*time.Millisecond)
	defer cancel()
	ctx = workers.WithAttempt(ctx, j.Attempts)
	res := make(chan error, 1) // buffered: an abandoned handler can still finish and exit
	go func() { res <- r.mux.ProcessTask(ctx, t) }()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
	}
	grace := time.NewTimer(abandonGrace)
	defer grace.Stop()
	select {
	case err := <-res:
		return err
	case <-grace.C:
		log.Error("handler ignored the end of its ctx; abandoning it", "cause", context.Cause(ctx))
		return fmt.Errorf("dbqueue: handler still running %v after its ctx ended: %w", abandonGrace, context.Cause(ctx))
	}
}

// finish marks j done, and returns once the mark is stored. Marks are stored a group at a time
// (groupcommit): a statement (and, on SQLite, a commit) per job was a tenth of a busy lane's
// CPU; a mark waits at most for the statement before its own.
func (r *run) finish(j *job, workerID string, log *slog.Logger) {
	owned, err := r.done.Do(doneMark{id: j.ID, workerID: workerID})
	r.logOutcome(log, "mark job done", owned, err)
}

// markDone stores the done marks of group in one statement, and says of each whether its
// worker still owned its job.
func (r *run) markDone(group []doneMark) ([]bool, error) {
	var q strings.Builder
	q.WriteString(`UPDATE jobs SET state = 'done', lease_until = NULL, updated_at = ? WHERE state = 'running' AND (`)
	args := make([]any, 0, 1+2*len(group))
	args = append(args, r.q.now())
	for i, m := range group {
		if i > 0 {
			q.WriteString(" OR ")
		}
		q.WriteString("(id = ? AND worker_id = ?)")
		args = append(args, m.id, m.workerID)
	}
	q.WriteString(") RETURNING id")
	ctx, cancel := context.WithTimeout(r.base, dbTimeout)
	defer cancel()
	var ids []string
	if err := r.q.db.WithContext(ctx).Raw(q.String(), args...).Scan(&ids).Error; err != nil {
		return nil, err
	}
	owned := make(map[string]bool, len(ids))
	for _, id := range ids {
		owned[id] = true
	}
	res := make([]bool, len(group))
	for i, m := range group {
		res[i] = owned[m.id]
	}
	return res, nil
}

func (r *run) retry(j *job, workerID string, cause error, log *slog.Logger) {
	delay := workers.RetryDelay(r.q.cfg.RetryBase, j.Attempts)
	now := r.q.now()
	owned, err := r.update(`UPDATE jobs SET state = 'queued', run_at = ?, lease_until = NULL, worker_id = '', last_error = ?, updated_at = ?
		WHERE id = ? AND worker_id = ? AND state = 'running'`, now.Add(delay), truncate(cause.Error()), now, j.ID, workerID)
	log.Info("task failed; will retry", "error", cause, "retry_in", delay)
	r.logOutcome(log, "schedule retry", owned, err)
}

// fail records the final error, tells the task's handler (ServeMux.Fail), then marks the job
// failed. The handler is told before the final mark so that a crash in between tells it again
// rather than never.
func (r *run) fail(j *job, workerID string, t workers.Task, cause error, log *slog.Logger) {
	log.Warn("task failed for good", "error", cause)
	owned, err := r.update(`UPDATE jobs SET last_error = ?, updated_at = ?
		WHERE id = ? AND worker_id = ? AND state = 'running'`, truncate(cause.Error()), r.q.now(), j.ID, workerID)
	if !owned || err != nil {
		r.logOutcome(log, "record failure", owned, err)
		return
	}
	r.tellHandler(t, cause, log)
	owned, err = r.update(`UPDATE jobs SET state = 'failed', lease_until = NULL, updated_at = ?
		WHERE id = ? AND worker_id = ? AND state = 'running'`, r.q.now(), j.ID, workerID)
	r.logOutcome(log, "mark job failed", owned, err)
}

func (r *run) tellHandler(t workers.Task, cause error, log *slog.Logger) {
	ctx, cancel := context.WithTimeout(r.base, failTimeout)
	defer cancel()
	if err := r.mux.Fail(ctx, t, cause); err != nil {
		log.Error("tell the handler its task failed", "error", err)
	}
}

func (r *run) logOutcome(log *slog.Logger, what string, owned bool, err error) {
	switch {
	case err != nil:
		log.Error(what+"; the task will run again after its lease expires", "error", err)
	case !owned:
		log.Warn(what + ": the claim was taken over after its lease expired")
	}
}

// update runs a conditional bookkeeping statement and reports whether it touched a row.
func (r *run) update(sql string, args ...any) (bool, error) {
	ctx, cancel := context.WithTimeout(r.base, dbTimeout)
	defer cancel()
	res := r.q.db.WithContext(ctx).Exec(sql, args...)
	return res.RowsAffected > 0, res.Error
}

// sweep deletes finished jobs older than the retention period.
func (r *run) sweep() {
	ctx, cancel := context.WithTimeout(r.base, dbTimeout)
	defer cancel()
	err := r.q.db.WithContext(ctx).Exec(`DELETE FROM jobs WHERE state IN ('done', 'failed') AND updated_at < ?`,
		r.q.now().Add(-r.q.cfg.Retention)).Error
	if err != nil {
		r.q.log.Error("delete finished jobs", "error", err)
	}
}

// heartbeat extends one claim's lease until stopped; it cancels the handler when the claim is gone.
type heartbeat struct {
	stopc chan struct{}
	done  chan struct{}
}

func (r *run) startHeartbeat(jobID, workerID string, lost context.CancelCauseFunc, log *slog.Logger) *heartbeat {
	h := &heartbeat{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		tick := time.NewTicker(r.q.cfg.Lease / 3)
		defer tick.Stop()
		for {
			select {
			case <-h.stopc:
				return
			case <-tick.C:
			}
			owned, err := r.update(`UPDATE jobs SET lease_until = ?, updated_at = ?
				WHERE id = ? AND worker_id = ? AND state = 'running'`, r.q.now().Add(r.q.cfg.Lease), r.q.now(), jobID, workerID)
			switch {
			case err != nil:
				log.Warn("extend lease", "error", err)
			case !owned:
				lost(errLeaseLost)
				return
			}
		}
	}()
	return h
}

// stop ends the heartbeat and waits for its goroutine.
func (h *heartbeat) stop() {
	close(h.stopc)
	<-h.done
}

func truncate(s string) string {
	if len(s) <= maxErrorLen {
		return s
	}
	return s[:maxErrorLen] + "…"
}
