package asynqqueue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"

	"svc/workers"
)

// failTimeout bounds one call of a handler's TaskFailed.
const failTimeout = time.Minute

// Run starts an asynq server on the queue and processes tasks with mux's handlers until ctx is
// done, then shuts the server down, waiting for the handlers in flight; see workers.Queue.
func (q *Queue) Run(ctx context.Context, mux *workers.ServeMux) error {
	if mux == nil {
		return errors.New("asynqqueue: Run: nil ServeMux")
	}
	if err := q.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("asynqqueue: redis unreachable: %w", err)
	}
	onError := func(ctx context.Context, at *asynq.Task, err error) { q.handleError(ctx, at, err, mux) }
	srv := asynq.NewServerFromRedisClient(q.rdb, asynq.Config{
		Concurrency: q.cfg.Concurrency,
		// Handlers keep ctx's values but not its cancellation: stopping waits for them.
		BaseContext:              func() context.Context { return context.WithoutCancel(ctx) },
		TaskCheckInterval:        q.cfg.PollInterval,
		DelayedTaskCheckInterval: q.cfg.PollInterval,
		RetryDelayFunc: func(n int, _ error, _ *asynq.Task) time.Duration {
			return workers.RetryDelay(q.cfg.RetryBase, n+1)
		},
		Queues:       map[string]int{q.cfg.Queue: 1},
		ErrorHandler: asynq.ErrorHandlerFunc(onError),
		Logger:       logger{q.log},
		LogLevel:     asynq.InfoLevel,
		// Each in-flight handler is bounded by its own deadline, never cut off by shutdown.
		ShutdownTimeout: workers.MaxTimeout + time.Hour,
		HealthCheckFunc: func(err error) {
			if err != nil {
				q.log.Warn("redis health check", "error", err)
			}
		},
	})
	err := srv.Start(asynq.HandlerFunc(func(ctx context.Context, at *asynq.Task) error {
		return q.process(ctx, at, mux)
	}))
	if err != nil {
		return fmt.Errorf("asynqqueue: start server: %w", err)
	}
	var reapers sync.WaitGroup
	q.reap(ctx, &reapers)
	<-ctx.Done()
	reapers.Wait()
	srv.Shutdown()
	return nil
}

// terminalError marks the final failure of a task: asynq archives it (SkipRetry) and the
// ErrorHandler tells the task's handler with err (ServeMux.Fail).
type terminalError struct{ err error }

func (e *terminalError) Error() string   { return e.err.Error() }
func (e *terminalError) Unwrap() []error { return []error{asynq.SkipRetry, e.err} }

// process is the asynq handler: it applies the exact timeout, sets the attempt number, runs mux,
// and decides whether a failure is final.
func (q *Queue) process(ctx context.Context, at *asynq.Task, mux *workers.ServeMux) error {
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	asynqMax, _ := asynq.GetMaxRetry(ctx)
	maxRetry := asynqMax - 1 // the spare retry; see the package doc
	t := workers.Task{Type: at.Type(), Payload: at.Payload(), ID: id}
	if retried > maxRetry {
		// Only asynq's recoverer brings a task here: its last allowed attempt was lost.
		return &terminalError{err: q.lostError(id, retried)}
	}
	timeout := workers.DefaultTimeout
	if ms, err := strconv.ParseInt(at.Headers()[headerTimeout], 10, 64); err == nil && ms > 0 {
		timeout = time.Duration(ms) * time.Millisecond
	}
	log := q.log.With("task_id", id, "task_type", t.Type, "attempt", retried+1)
	lctx, lost := context.WithCancelCause(ctx)
	defer lost(nil)
	stop := q.keepAlive(id, lost, log)
	defer stop()
	hctx, cancel := context.WithTimeout(lctx, timeout)
	defer cancel()
	err := mux.ProcessTask(workers.WithAttempt(hctx, retried+1), t)
	if errors.Is(context.Cause(lctx), errLost) {
		// Another worker may run the task now; never final here (see the package doc).
		return fmt.Errorf("%w: %w (handler returned: %v)", workers.ErrWorkerLost, errLost, err)
	}
	switch {
	case err == nil:
		return nil
	case errors.Is(err, workers.ErrSkipRetry) || retried >= maxRetry:
		return &terminalError{err: err}
	default:
		return err
	}
}

// lostError explains why the last attempt of task id ended without a result, from the error
// asynq recorded.
func (q *Queue) lostError(id string, attempts int) error {
	info, err := q.inspector.GetTaskInfo(q.cfg.Queue, id)
	if err != nil {
		return fmt.Errorf("%w (attempt %d; recorded error unavailable: %w)", workers.ErrWorkerLost, attempts, err)
	}
	switch {
	case info.LastErr == asynq.ErrLeaseExpired.Error() || strings.Contains(info.LastErr, workers.ErrWorkerLost.Error()):
		return fmt.Errorf("%w (attempt %d of %d)", workers.ErrWorkerLost, attempts, attempts)
	case info.LastErr == context.DeadlineExceeded.Error():
		return fmt.Errorf("asynqqueue: attempt %d outlived its deadline: %w", attempts, context.DeadlineExceeded)
	default:
		return fmt.Errorf("asynqqueue: attempt %d ended without a result: %s", attempts, info.LastErr)
	}
}

// handleError is asynq's ErrorHandler: it logs failures and tells the task's handler of final ones.
func (q *Queue) handleError(ctx context.Context, at *asynq.Task, err error, mux *workers.ServeMux) {
	id, _ := asynq.GetTaskID(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	log := q.log.With("task_id", id, "task_type", at.Type(), "attempt", retried+1)
	var final *terminalError
	if !errors.As(err, &final) {
		log.Info("task failed; will retry", "error", err)
		return
	}
	log.Warn("task failed for good", "error", final.err)
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), failTimeout)
	defer cancel()
	if err := mux.Fail(hctx, workers.Task{Type: at.Type(), Payload: at.Payload(), ID: id}, final.err); err != nil {
		log.Error("tell the handler its task failed", "error", err)
	}
}

// logger adapts slog to asynq's Logger.
type logger struct{ l *slog.Logger }

func (a logger) Debug(args ...any) { a.l.Debug(fmt.Sprint(args...)) }
func (a logger) Info(args ...any)  { a.l.Info(fmt.Sprint(args...)) }
func (a logger) Warn(args ...any)  { a.l.Warn(fmt.Sprint(args...)) }
func (a logger) Error(args ...any) { a.l.Error(fmt.Sprint(args...)) }

// Fatal logs at error level; asynq v0.26.0 never calls it, and a library must not exit the process.
func (a logger) Fatal(args ...any) { a.l.Error(fmt.Sprint(args...)) }
