package asynqqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"svc/migrations/dbtest"
	"svc/workers"
)

// The reaper's decisions, one scan at a time, on the test Redis: asynq's own dequeue and requeue
// scripts stand in for the workers, so that an interleaving that real processes hit only now and
// then (a reaper scanning between a task's dequeue and its first liveness mark) happens every time.

// asynqDequeue is asynq v0.26.0's dequeueCmd (internal/rdb/rdb.go): what a worker's poll does when
// it takes a task, before its handler, and so our liveness mark, starts. ARGV[1] is the lease's
// expiry in Unix seconds.
var asynqDequeue = redis.NewScript(`
if redis.call("EXISTS", KEYS[2]) == 0 then
	local id = redis.call("RPOPLPUSH", KEYS[1], KEYS[3])
	if id then
		local key = ARGV[2] .. id
		redis.call("HSET", key, "state", "active")
		redis.call("HDEL", key, "pending_since")
		redis.call("ZADD", KEYS[4], ARGV[1], id)
		return redis.call("HGET", key, "msg")
	end
end
return nil`)

// asynqRequeue is asynq v0.26.0's requeueCmd: an active task pushed back to pending with its message
// unchanged (a quitting worker does it), which is what the next dequeue sees of a task that ended
// and was enqueued again under its ID, too.
var asynqRequeue = redis.NewScript(`
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
	return redis.error_reply("NOT FOUND")
end
if redis.call("ZREM", KEYS[2], ARGV[1]) == 0 then
	return redis.error_reply("NOT FOUND")
end
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending")
return redis.status_reply("OK")`)

// reaperRig is a queue of its own with the shortest lease, and no Run: the test drives its reapers.
type reaperRig struct {
	t      *testing.T
	q      *Queue
	rdb    *redis.Client
	prefix string
}

func newReaperRig(t *testing.T) *reaperRig {
	t.Helper()
	rdb := dbtest.Redis(t)
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	queue := "svctest_" + hex.EncodeToString(b[:])
	q, err := New(Config{RedisURL: dbtest.RedisURL(), Queue: queue, Lease: MinLease})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		keys, err := rdb.Keys(ctx, "asynq:{"+queue+"}:*").Result()
		if err == nil && len(keys) > 0 {
			err = rdb.Del(ctx, keys...).Err()
		}
		if err == nil {
			err = rdb.SRem(ctx, "asynq:queues", queue).Err()
		}
		if err != nil {
			t.Errorf("delete the test queue: %v", err)
		}
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &reaperRig{t: t, q: q, rdb: rdb, prefix: "asynq:{" + queue + "}:"}
}

func (g *reaperRig) enqueue(id string) {
	g.t.Helper()
	if err := g.q.Enqueue(context.Background(), workers.Task{Type: "t", ID: id}, workers.MaxRetry(5)); err != nil {
		g.t.Fatal(err)
	}
}

// dequeue takes the queue's next task as a worker's poll does, with a lease until leaseUntil.
func (g *reaperRig) dequeue(leaseUntil time.Time) {
	g.t.Helper()
	keys := []string{g.prefix + "pending", g.prefix + "paused", g.prefix + "active", g.prefix + "lease"}
	if err := asynqDequeue.Run(context.Background(), g.rdb, keys, leaseUntil.Unix(), g.prefix+"t:").Err(); err != nil {
		g.t.Fatalf("dequeue: %v", err)
	}
}

// requeue pushes active task id back to pending, its message unchanged.
func (g *reaperRig) requeue(id string) {
	g.t.Helper()
	keys := []string{g.prefix + "active", g.prefix + "lease", g.prefix + "pending", g.prefix + "t:" + id}
	if err := asynqRequeue.Run(context.Background(), g.rdb, keys, id).Err(); err != nil {
		g.t.Fatalf("requeue: %v", err)
	}
}

func (g *reaperRig) scan(r *reaper) {
	g.t.Helper()
	if err := r.scan(context.Background()); err != nil {
		g.t.Fatalf("scan: %v", err)
	}
}

// wantTask checks task id's state and how many of its attempts were counted as failed or lost.
func (g *reaperRig) wantTask(when, id string, state asynq.TaskState, retried int) {
	g.t.Helper()
	info, err := g.q.inspector.GetTaskInfo(g.q.cfg.Queue, id)
	if err != nil {
		g.t.Fatalf("%s: task %s: %v", when, id, err)
	}
	if info.State != state || info.Retried != retried {
		g.t.Fatalf("%s: task %s is %v with %d lost attempts; want %v with %d", when, id, info.State, info.Retried, state, retried)
	}
}

// TestReaperSparesTheNextRun: a reaper that saw a task's liveness mark missing in one run of it
// must not requeue the next run for it. Two workers reap; the first requeues the lost run of a
// dead worker, another worker takes the task, and the second reaper scans before that worker's
// first liveness mark (the fault harness's "lost_attempt 1 then 2, 160 ms apart"). The new run
// is reaped only when its own mark has been missing for Lease/2.
func TestReaperSparesTheNextRun(t *testing.T) {
	g := newReaperRig(t)
	lease := g.q.cfg.Lease
	g.enqueue("T")
	g.dequeue(time.Now().Add(30 * time.Second)) // worker A takes T and dies: no liveness mark
	r1, r2 := newReaper(g.q), newReaper(g.q)
	g.scan(r1)
	g.scan(r2) // both workers' reapers see A's mark missing
	time.Sleep(lease / 2)
	g.scan(r1)
	g.wantTask("after the first reaper's requeue", "T", asynq.TaskStatePending, 1)

	g.dequeue(time.Now().Add(31 * time.Second)) // worker B takes T; its handler has not marked it yet
	g.scan(r2)
	g.wantTask("after the second reaper's scan before B's first mark", "T", asynq.TaskStateActive, 1)

	stop := g.q.keepAlive("T", func(error) {}, g.q.log) // B's first mark
	g.scan(r2)
	time.Sleep(lease / 2)
	g.scan(r2)
	g.wantTask("while B keeps its mark", "T", asynq.TaskStateActive, 1)

	stop() // B's mark is gone, as a killed worker's expires
	g.scan(r2)
	time.Sleep(lease / 2)
	g.scan(r2)
	g.wantTask("once B's mark has been missing for Lease/2", "T", asynq.TaskStatePending, 2)
}

// TestReaperSparesATaskTakenAgain: the same message taken again by another dequeue (asynq's
// requeue keeps it, and a task that ended and was enqueued again under its ID has the same) is
// another run: the time its predecessor's mark was missing does not count against it.
func TestReaperSparesATaskTakenAgain(t *testing.T) {
	g := newReaperRig(t)
	lease := g.q.cfg.Lease
	g.enqueue("T")
	g.dequeue(time.Now().Add(30 * time.Second))
	r := newReaper(g.q)
	g.scan(r) // the first run's mark is missing (it is about to be set, or its worker died)
	g.requeue("T")
	g.dequeue(time.Now().Add(31 * time.Second)) // the next run, before its first mark
	time.Sleep(lease / 2)
	g.scan(r)
	g.wantTask("after a scan of the next run before its first mark", "T", asynq.TaskStateActive, 0)

	time.Sleep(lease / 2)
	g.scan(r)
	g.wantTask("once the next run's mark has been missing for Lease/2", "T", asynq.TaskStatePending, 1)
}
