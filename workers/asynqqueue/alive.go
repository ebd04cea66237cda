package asynqqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"google.golang.org/protobuf/encoding/protowire"
)

// Fast recovery of a dead worker's tasks (see the package doc).
//
// While a task runs, its worker keeps a liveness key, asynq:{queue}:svc-alive:<task id>, holding
// a token of that run, with a TTL of Config.Lease, refreshed every Lease/5. Every Run also reaps:
// every Lease/5 it lists the queue's active tasks, and a run of a task whose liveness key has been
// missing for Lease/2 (longer than the moment between asynq's dequeue and our handler setting the
// key) is moved back to pending, its lost run counted as a failed attempt with asynq's
// ErrLeaseExpired as its error, as asynq's own recoverer would do a minute or two later.
//
// The Lease/2 is counted per run, not per task ID: a reaper sees a task only at its scans, and
// between two of them the task may have been requeued (by another Run's reaper, by asynq) and taken
// by another worker that has not set its key yet. A run is the task's message (each requeue, retry
// or failure rewrites it) with its lease's expiry in asynq's lease set (each dequeue sets it anew;
// asynq's heartbeat also moves it while the worker's process lives). When either differs from
// what the reaper saw when it found the key missing, the count starts again; the requeue script
// checks both once more. asynq keeps the lease in whole seconds, so two dequeues of one message
// within a second look like one run; asynq never requeues a message unchanged here (Run waits
// for its handlers), so that takes a task that ended and was enqueued again under its ID.

// Liveness timing.
const (
	// DefaultLease is the default Config.Lease.
	DefaultLease = 5 * time.Second
	// MinLease is the shortest accepted Config.Lease.
	MinLease = 500 * time.Millisecond
	// redisTimeout bounds one liveness or reaper call.
	redisTimeout = 5 * time.Second
)

// errLost is the cause of a handler ctx cancelled because its run is no longer the task's live one.
var errLost = errors.New("asynqqueue: liveness lost; another worker may run the task")

func aliveKey(queue, id string) string { return "asynq:{" + queue + "}:svc-alive:" + id }

// refreshAlive extends the key's TTL when it still holds our token; 0 means it does not.
var refreshAlive = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// dropAlive deletes the key when it still holds our token.
var dropAlive = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("DEL", KEYS[1])
end
return 0`)

// keepAlive marks task id as running here until stop is called; it cancels lost with errLost when
// the mark is taken over or cannot be refreshed for a whole lease (another worker may then run
// the task).
func (q *Queue) keepAlive(id string, lost context.CancelCauseFunc, log *slog.Logger) (stop func()) {
	key, token, lease := aliveKey(q.cfg.Queue, id), newID(), q.cfg.Lease
	ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
	err := q.rdb.Set(ctx, key, token, lease).Err()
	cancel()
	if err != nil {
		log.Warn("mark task as running", "error", err)
	}
	lastOK := time.Now()
	stopc, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(lease / 5)
		defer tick.Stop()
		for {
			select {
			case <-stopc:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
			n, err := refreshAlive.Run(ctx, q.rdb, []string{key}, token, lease.Milliseconds()).Int()
			cancel()
			switch {
			case err == nil && n == 1:
				lastOK = time.Now()
			case err == nil:
				lost(errLost)
				return
			case time.Since(lastOK) >= lease:
				log.Warn("liveness not refreshed for a whole lease; giving the task up", "error", err)
				lost(errLost)
				return
			default:
				log.Warn("refresh liveness", "error", err)
			}
		}
	}()
	return func() {
		close(stopc)
		<-done
		ctx, cancel := context.WithTimeout(context.Background(), redisTimeout)
		defer cancel()
		if err := dropAlive.Run(ctx, q.rdb, []string{key}, token).Err(); err != nil {
			log.Warn("unmark task", "error", err)
		}
	}
}

// probeRun answers nil when task ARGV[1]'s liveness key KEYS[2] exists or its hash KEYS[1] is
// gone, else its run: {message, lease expiry in the lease set KEYS[3] or ""}.
var probeRun = redis.NewScript(`
if redis.call("EXISTS", KEYS[2]) == 1 then
	return false
end
local msg = redis.call("HGET", KEYS[1], "msg")
if not msg then
	return false
end
return {msg, redis.call("ZSCORE", KEYS[3], ARGV[1]) or ""}`)

// requeueLost moves an active task back to pending when its liveness key is still missing and it
// is still the same run (its message ARGV[2] and lease expiry ARGV[5] unchanged), with its message
// marking the lost attempt.
var requeueLost = redis.NewScript(`
if redis.call("EXISTS", KEYS[5]) == 1 then
	return 0
end
local state, msg = unpack(redis.call("HMGET", KEYS[1], "state", "msg"))
if state ~= "active" or msg ~= ARGV[2] or (redis.call("ZSCORE", KEYS[3], ARGV[1]) or "") ~= ARGV[5] then
	return 0
end
if redis.call("LREM", KEYS[2], 0, ARGV[1]) == 0 then
	return 0
end
redis.call("ZREM", KEYS[3], ARGV[1])
redis.call("RPUSH", KEYS[4], ARGV[1])
redis.call("HSET", KEYS[1], "msg", ARGV[3], "state", "pending", "pending_since", ARGV[4])
return 1`)

// reaper finds the active tasks of dead workers and requeues them.
type reaper struct {
	q       *Queue
	log     *slog.Logger
	missing map[string]lostRun // active task ID -> its run whose liveness key was seen missing
}

// lostRun is a run of a task whose liveness key a reaper found missing.
type lostRun struct {
	since time.Time // the scan that first found the key missing in this run
	msg   string    // the task's message
	lease string    // its lease's expiry in asynq's lease set, "" when it has none
}

// same reports whether o is the run r (their since aside).
func (r lostRun) same(o lostRun) bool { return r.msg == o.msg && r.lease == o.lease }

func newReaper(q *Queue) *reaper {
	return &reaper{q: q, log: q.log, missing: map[string]lostRun{}}
}

// reap runs until ctx is done.
func (q *Queue) reap(ctx context.Context, wg *sync.WaitGroup) {
	r := newReaper(q)
	wg.Go(func() {
		tick := time.NewTicker(max(q.cfg.Lease/5, 100*time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if err := r.scan(ctx); err != nil && ctx.Err() == nil {
				r.log.Warn("look for tasks of dead workers", "error", err)
			}
		}
	})
}

func (r *reaper) scan(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	queue := r.q.cfg.Queue
	prefix := "asynq:{" + queue + "}:"
	ids, err := r.q.rdb.LRange(ctx, prefix+"active", 0, -1).Result()
	if err != nil {
		return fmt.Errorf("list active tasks: %w", err)
	}
	now := time.Now()
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		seen[id] = true
		run, missing, err := r.probe(ctx, prefix, id)
		if err != nil {
			return err
		}
		if !missing {
			delete(r.missing, id)
			continue
		}
		prev, ok := r.missing[id]
		if !ok || !prev.same(run) {
			// First seen missing in this run: an earlier run's count must not carry over to
			// it, whose worker may not have set its key yet.
			run.since = now
			r.missing[id] = run
			continue
		}
		if now.Sub(prev.since) < r.q.cfg.Lease/2 {
			continue
		}
		if err := r.requeue(ctx, prefix, id, prev, now); err != nil {
			return err
		}
		delete(r.missing, id)
	}
	for id := range r.missing {
		if !seen[id] {
			delete(r.missing, id)
		}
	}
	return nil
}

// probe reports whether active task id's liveness key is missing and, when it is, the task's run.
// A task that ended meanwhile is not missing.
func (r *reaper) probe(ctx context.Context, prefix, id string) (lostRun, bool, error) {
	keys := []string{prefix + "t:" + id, aliveKey(r.q.cfg.Queue, id), prefix + "lease"}
	res, err := probeRun.Run(ctx, r.q.rdb, keys, id).StringSlice()
	switch {
	case errors.Is(err, redis.Nil):
		return lostRun{}, false, nil
	case err != nil:
		return lostRun{}, false, fmt.Errorf("check liveness of task %s: %w", id, err)
	case len(res) != 2:
		return lostRun{}, false, fmt.Errorf("check liveness of task %s: %d values, want 2", id, len(res))
	}
	return lostRun{msg: res[0], lease: res[1]}, true, nil
}

// requeue moves run, the dead worker's run of task id, back to pending, counting the lost attempt.
func (r *reaper) requeue(ctx context.Context, prefix, id string, run lostRun, now time.Time) error {
	msg, attempt, err := markLost([]byte(run.msg), asynq.ErrLeaseExpired.Error(), now)
	if err != nil {
		return fmt.Errorf("task %s: %w", id, err)
	}
	keys := []string{prefix + "t:" + id, prefix + "active", prefix + "lease", prefix + "pending", aliveKey(r.q.cfg.Queue, id)}
	n, err := requeueLost.Run(ctx, r.q.rdb, keys, id, run.msg, msg, strconv.FormatInt(now.UnixNano(), 10), run.lease).Int()
	if err != nil {
		return fmt.Errorf("requeue task %s of a dead worker: %w", id, err)
	}
	if n == 1 {
		r.log.Warn("requeued the task of a dead worker", "task_id", id, "lost_attempt", attempt)
	}
	return nil
}

// Fields of asynq's TaskMessage (internal/proto/asynq.proto, v0.26.0) that a lost attempt changes.
const (
	fieldRetried      = 6
	fieldErrorMsg     = 7
	fieldLastFailedAt = 11
)

// markLost returns the encoded asynq task message msg with its retry count raised by one and the
// lost attempt's error and time recorded, as asynq's own recoverer records a lease that expired,
// and the 1-based number of the lost attempt.
func markLost(msg []byte, errMsg string, now time.Time) ([]byte, int, error) {
	out := make([]byte, 0, len(msg)+len(errMsg)+16)
	var retried uint64
	for b := msg; len(b) > 0; {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, fmt.Errorf("decode task message: %w", protowire.ParseError(n))
		}
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if m < 0 {
			return nil, 0, fmt.Errorf("decode task message: %w", protowire.ParseError(m))
		}
		switch num {
		case fieldRetried:
			if typ != protowire.VarintType {
				return nil, 0, errors.New("decode task message: retried is not a varint")
			}
			retried, _ = protowire.ConsumeVarint(b[n:])
		case fieldErrorMsg, fieldLastFailedAt:
		default:
			out = append(out, b[:n+m]...)
		}
		b = b[n+m:]
	}
	out = protowire.AppendTag(out, fieldRetried, protowire.VarintType)
	out = protowire.AppendVarint(out, retried+1)
	out = protowire.AppendTag(out, fieldErrorMsg, protowire.BytesType)
	out = protowire.AppendString(out, errMsg)
	out = protowire.AppendTag(out, fieldLastFailedAt, protowire.VarintType)
	out = protowire.AppendVarint(out, uint64(now.Unix()))
	return out, int(retried) + 1, nil
}
