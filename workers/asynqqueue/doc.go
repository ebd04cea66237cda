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
// Crash recovery is asynq's: a worker extends its tasks' leases every few seconds; the lease
// lasts 30s and the recoverer (every minute, and when a server starts) re-queues tasks whose lease
// expired more than 30s ago. None of these durations is configurable in v0.26.0 (rdb.LeaseDuration
// and the recoverer's interval are constants), so a killed worker's task runs again after one to
// two minutes. The conformance suite's crash test therefore kills a real worker process and then
// ages the dead lease in Redis instead of waiting; SVC_TEST_REAL_LEASE=1 makes it wait for real.
package asynqqueue
