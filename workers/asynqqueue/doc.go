// Package asynqqueue is the workers.Queue of the scale-out roles: asynq (github.com/hibiken/asynq
// v0.26.0) on Redis, so that any number of `svc worker` processes share the builds and any of them
// may die.
//
// How asynq is mapped onto the workers.Queue contract:
//
//   - Task.ID is the asynq task ID; asynq.ErrTaskIDConflict becomes workers.ErrDuplicate. asynq
//     deletes a successful task at once (no Retention is set), freeing its ID, but keeps a failed one
//     in its archive; Enqueue deletes such a finished task when its ID comes back, so on both
//     queues a finished task never blocks its ID. (asynq's Unique option is not used: it dedupes
//     by type and payload for a TTL, which is not the contract.)
//   - Retries: the task is given asynq.MaxRetry(MaxRetry+1), one more than asked. Our handler
//     wrapper turns the failure of the last allowed attempt (and any error wrapping
//     workers.ErrSkipRetry) into asynq.SkipRetry itself, and the ErrorHandler tells the task's
//     handler (workers.ServeMux.Fail) of exactly those. The spare retry exists for one case only:
//     asynq's recoverer re-queues a task whose worker died, but when that was the last attempt it
//     archives it silently, without calling any handler. With the spare retry the task comes back,
//     the wrapper sees that its attempts are used up, does not run the handler, and fails it with
//     workers.ErrWorkerLost (or the error asynq recorded), which the handler is told.
//   - Backoff is asynq's RetryDelayFunc set to workers.RetryDelay.
//   - Timeouts: asynq keeps timeouts in whole seconds, so the exact timeout travels in a task
//     header and the wrapper applies it; asynq's own timeout is that rounded up plus a grace, as a
//     backstop for a handler that ignores its ctx.
//   - ProcessAt is rounded up to the next whole second, because asynq schedules by Unix second
//     and would otherwise start a task up to a second early.
//   - Run starts an asynq.Server and, when ctx is done, calls Shutdown, which waits for the
//     handlers in flight; ShutdownTimeout is set beyond workers.MaxTimeout so that each handler is
//     bounded by its own task deadline rather than cut off.
//
// Crash recovery is ours, because asynq's is slow and fixed: its worker extends its tasks' leases
// every 5s, the lease lasts 30s and the recoverer (every minute, and when a server starts)
// re-queues tasks whose lease expired more than 30s ago, so a killed worker's task would run again
// after one to two minutes; none of these durations is configurable in v0.26.0
// (rdb.LeaseDuration and the recoverer's interval are constants), and the Inspector cannot move an
// active task (ArchiveTask, DeleteTask and RunTask refuse it; CancelProcessing only asks its
// server). So:
//
//   - While a task runs, its worker keeps a liveness key asynq:{queue}:svc-alive:<task id> holding a
//     token of that run, with a TTL of Config.Lease (default 5s), refreshed every Lease/5. It is
//     set before the handler starts and deleted when it returns.
//   - Every Run reaps: every Lease/5 it lists the queue's active tasks; one whose liveness key has
//     been missing for Lease/2 (more than the instant between asynq's dequeue and our setting the
//     key) in the same run (the same message and asynq lease: a requeue by another Run, or a new
//     dequeue, starts the count again) is moved back to pending by one Lua script, on asynq's
//     Redis layout (task hash, active list, lease set, pending list), and only if its key is still
//     missing and that run unchanged. Its message records the lost attempt as asynq's recoverer
//     would: retried + 1 and asynq.ErrLeaseExpired as the error, so retry counts and the spare
//     retry above work as before, and a lost last attempt fails with workers.ErrWorkerLost. It is
//     requeued without a backoff delay: the task did not fail, its worker died.
//   - A worker that cannot refresh its task's key (the key holds another run's token or is gone,
//     or Redis did not answer for a whole lease) cancels the handler's ctx with ErrWorkerLost: the
//     task may be running elsewhere. The attempt then ends as a failed, non-final attempt.
//
// A killed worker's task therefore starts again about 1.5 Lease after the kill (the key expires
// within a Lease, the reaper waits Lease/2, then the next poll dequeues it): measured in
// BENCHMARKS.md. asynq's own lease and recoverer stay in place as a backstop (they find nothing
// once we have requeued a task).
//
// One hazard remains, as with any lease: a worker that is cut off from Redis (or frozen) for more
// than a lease but then comes back has its task requeued; when its handler returns, asynq's own
// bookkeeping (Done, Retry) for that attempt may land on the new run of the task, which can make
// the task run once more (at least once still holds; handlers are idempotent). Workers of a
// version without liveness keys must not share a queue with this one: their tasks would be
// requeued while they run.
package asynqqueue
