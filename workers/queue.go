package workers

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"time"
)

// Limits and defaults shared by every Queue implementation.
const (
	// MaxTypeLen is the longest accepted Task.Type, in bytes.
	MaxTypeLen = 128
	// MaxIDLen is the longest accepted Task.ID, in bytes.
	MaxIDLen = 256
	// MaxPayload is the largest accepted Task.Payload, in bytes. Tasks carry references
	// (a build ID), not data.
	MaxPayload = 1 << 20
	// MaxTimeout is the longest accepted Timeout option.
	MaxTimeout = 24 * time.Hour

	// DefaultMaxRetry is the number of retries of a task enqueued without MaxRetry.
	DefaultMaxRetry = 5
	// DefaultTimeout bounds one attempt of a task enqueued without Timeout.
	DefaultTimeout = 15 * time.Minute
	// DefaultRetryBase is the first retry delay; each further retry doubles it.
	DefaultRetryBase = time.Second
	// MaxRetryDelay caps the retry delay.
	MaxRetryDelay = time.Minute
)

// Errors callers branch on.
var (
	// ErrDuplicate is returned by Enqueue for a task whose ID is already pending, scheduled,
	// retrying or running. Nothing was enqueued.
	ErrDuplicate = errors.New("workers: a task with this ID is already pending or running")
	// ErrSkipRetry, wrapped in a handler's error, fails the task at once: no retry.
	ErrSkipRetry = errors.New("workers: skip retry")
	// ErrPanic is wrapped by the error of a handler that panicked.
	ErrPanic = errors.New("workers: handler panicked")
	// ErrNoHandler is wrapped by the error of a task whose type has no handler on the ServeMux.
	// Such a task is retried like any failure (a newer worker may know the type).
	ErrNoHandler = errors.New("workers: no handler for task type")
	// ErrWorkerLost is wrapped by the error given to FailureHandler.TaskFailed when the last
	// allowed attempt of a task was lost with its worker (killed, or cut off past its lease).
	ErrWorkerLost = errors.New("workers: worker lost while running the task (lease expired)")
	// ErrBadTask is wrapped by Enqueue's error for an invalid task or option; the message names
	// the field.
	ErrBadTask = errors.New("workers: bad task")
)

// Task is one unit of background work.
type Task struct {
	// Type routes the task to its handler on the ServeMux ("build:run"). Required.
	Type string
	// Payload is the handler's input, opaque to the queue; usually a small JSON document.
	Payload []byte
	// ID identifies the task and is its dedupe key: enqueueing an ID that is still pending or
	// running returns ErrDuplicate and enqueues nothing. Once that task has finished (done or
	// failed) the ID may be enqueued again. When empty, Enqueue uses a fresh random ID, so the
	// task is never a duplicate. Handlers see the ID either way.
	ID string
}

// Validate reports the first problem of t, naming the field, wrapped in ErrBadTask.
func (t Task) Validate() error {
	switch {
	case t.Type == "":
		return fmt.Errorf("%w: Type is empty", ErrBadTask)
	case len(t.Type) > MaxTypeLen:
		return fmt.Errorf("%w: Type is %d bytes, longer than %d", ErrBadTask, len(t.Type), MaxTypeLen)
	case strings.TrimSpace(t.Type) != t.Type:
		return fmt.Errorf("%w: Type %q has leading or trailing space", ErrBadTask, t.Type)
	case len(t.ID) > MaxIDLen:
		return fmt.Errorf("%w: ID is %d bytes, longer than %d", ErrBadTask, len(t.ID), MaxIDLen)
	case len(t.Payload) > MaxPayload:
		return fmt.Errorf("%w: Payload is %d bytes, larger than %d", ErrBadTask, len(t.Payload), MaxPayload)
	}
	return nil
}

// Handler processes tasks of one type.
//
// ProcessTask returns nil when the task is done. Any other error fails this attempt: the task is
// retried with backoff unless the error wraps ErrSkipRetry or the retries are used up. A panic is
// recovered by the ServeMux and counts as a failure. ctx carries the attempt's timeout and
// Attempt(ctx); it is not cancelled when the worker is asked to stop (Run waits instead), but it is
// cancelled when the worker loses the task's lease, because another worker may then run it.
// Handlers must be idempotent: delivery is at least once.
type Handler interface {
	ProcessTask(ctx context.Context, t Task) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t Task) error

// ProcessTask calls f(ctx, t).
func (f HandlerFunc) ProcessTask(ctx context.Context, t Task) error { return f(ctx, t) }

// FailureHandler is a Handler that owns what its tasks leave behind when they fail for good, such
// as a build to be marked failed with the reason. The queue tells it through ServeMux.Fail, also
// when the handler never got to return: a last attempt that panicked, timed out or was lost with
// its worker.
type FailureHandler interface {
	Handler
	// TaskFailed is called when task t gives up: its last allowed attempt failed, or its
	// handler's error wrapped ErrSkipRetry. err is the error of that last attempt (wrapping
	// ErrPanic, ErrWorkerLost, context.DeadlineExceeded, ...). ctx is the call's own bounded ctx.
	// It is called once per failed task in the normal course; a process that dies right after
	// calling it may cause one more call, so it must be idempotent.
	TaskFailed(ctx context.Context, t Task, err error)
}

// Queue carries tasks from Enqueue to the handlers of Run, on any process sharing the backend.
//
// Guarantees, the same on every implementation (the conformance suite workers/queuetest checks them):
//   - At least once: an enqueued task runs until one attempt succeeds or it fails for good. A task
//     whose worker dies mid-run (kill -9) is picked up again after its lease expires and runs
//     once more; handlers must therefore be idempotent.
//   - Dedupe: Enqueue of an ID that is pending or running returns ErrDuplicate, also under races
//     between processes.
//   - Retries: a failed attempt is retried after RetryDelay (exponential from the configured base,
//     capped at MaxRetryDelay, with jitter), at most MaxRetry times (so MaxRetry+1 attempts). Then
//     the task is kept as failed and its handler, when it is a FailureHandler, is told once with
//     the last error (ServeMux.Fail). A handler error wrapping ErrSkipRetry fails the task at
//     once; a panic is a failed attempt. A lost worker counts as a failed attempt; when it was the
//     last one, the error wraps ErrWorkerLost.
//   - Delay and ProcessAt: the task does not start before its time.
//   - Timeout: each attempt's ctx is cancelled after the task's Timeout.
//
// Both methods are safe for concurrent use.
type Queue interface {
	// Enqueue stores t for processing. It returns ErrDuplicate when t.ID is pending or running,
	// an error wrapping ErrBadTask for an invalid task or option, and otherwise nil only once the
	// task is durably stored. ctx bounds the call, not the task.
	Enqueue(ctx context.Context, t Task, opts ...Option) error
	// Run processes tasks with the handlers of mux until ctx is done, then stops taking tasks,
	// waits for the handlers in flight (each bounded by its task's Timeout; their ctx is not
	// cancelled) and returns nil. It returns an error only when it cannot start (for example, the
	// backend is unreachable). Several Run calls, in one process or many, share the work.
	Run(ctx context.Context, mux *ServeMux) error
}

// BatchEnqueuer is a Queue that stores many tasks at once (workers/dbqueue: one statement).
type BatchEnqueuer interface {
	// EnqueueBatch is Enqueue of each of ts with opts, except that a task whose ID is pending
	// or running is left out instead of being ErrDuplicate. On an error none of ts is enqueued.
	EnqueueBatch(ctx context.Context, ts []Task, opts ...Option) error
}

// EnqueueAll enqueues ts on q with opts, leaving out (without an error) those whose ID is
// pending or running: in one call when q is a BatchEnqueuer, otherwise one Enqueue after the
// other, stopping at the first error.
func EnqueueAll(ctx context.Context, q Queue, ts []Task, opts ...Option) error {
	if len(ts) == 0 {
		return nil
	}
	if b, ok := q.(BatchEnqueuer); ok {
		return b.EnqueueBatch(ctx, ts, opts...)
	}
	for _, t := range ts {
		if err := q.Enqueue(ctx, t, opts...); err != nil && !errors.Is(err, ErrDuplicate) {
			return err
		}
	}
	return nil
}

// Options are the resolved enqueue options of one task.
type Options struct {
	// MaxRetry is the number of retries after the first attempt.
	MaxRetry int
	// ProcessAt is the earliest start; the zero time means now.
	ProcessAt time.Time
	// Timeout bounds each attempt.
	Timeout time.Duration

	delay    time.Duration
	hasDelay bool
	errs     []error
}

// Option sets an enqueue option.
type Option func(*Options)

// MaxRetry sets the number of retries after a failed first attempt (default DefaultMaxRetry);
// 0 means one attempt only.
func MaxRetry(n int) Option {
	return func(o *Options) {
		if n < 0 {
			o.errs = append(o.errs, fmt.Errorf("%w: MaxRetry(%d) must not be negative", ErrBadTask, n))
			return
		}
		o.MaxRetry = n
	}
}

// Delay makes the task start no sooner than d after Enqueue. It replaces an earlier ProcessAt.
func Delay(d time.Duration) Option {
	return func(o *Options) {
		if d < 0 {
			o.errs = append(o.errs, fmt.Errorf("%w: Delay(%v) must not be negative", ErrBadTask, d))
			return
		}
		o.delay, o.hasDelay, o.ProcessAt = d, true, time.Time{}
	}
}

// ProcessAt makes the task start no sooner than at; a time in the past means now. It replaces
// an earlier Delay.
func ProcessAt(at time.Time) Option {
	return func(o *Options) { o.ProcessAt, o.delay, o.hasDelay = at, 0, false }
}

// Timeout bounds each attempt of the task (default DefaultTimeout, at most MaxTimeout).
func Timeout(d time.Duration) Option {
	return func(o *Options) {
		if d <= 0 || d > MaxTimeout {
			o.errs = append(o.errs, fmt.Errorf("%w: Timeout(%v) must be in (0, %v]", ErrBadTask, d, MaxTimeout))
			return
		}
		o.Timeout = d
	}
}

// ResolveOptions applies opts over the defaults, turning Delay into ProcessAt relative to now.
// Implementations call it at Enqueue. A bad option gives an error wrapping ErrBadTask.
func ResolveOptions(now time.Time, opts ...Option) (Options, error) {
	o := Options{MaxRetry: DefaultMaxRetry, Timeout: DefaultTimeout}
	for _, opt := range opts {
		if opt == nil {
			o.errs = append(o.errs, fmt.Errorf("%w: nil Option", ErrBadTask))
			continue
		}
		opt(&o)
	}
	if err := errors.Join(o.errs...); err != nil {
		return Options{}, err
	}
	if o.hasDelay {
		o.ProcessAt = now.Add(o.delay)
	}
	if !o.ProcessAt.After(now) {
		o.ProcessAt = time.Time{}
	}
	o.delay, o.hasDelay, o.errs = 0, false, nil
	return o, nil
}

// RetryDelay is the wait before the next attempt after the failure-th failed attempt (1-based):
// base doubled per earlier failure, capped at MaxRetryDelay, then jittered down to between half
// and all of it, so that tasks failing together do not retry together. base <= 0 means
// DefaultRetryBase.
func RetryDelay(base time.Duration, failure int) time.Duration {
	if base <= 0 {
		base = DefaultRetryBase
	}
	d := base
	for i := 1; i < failure && d < MaxRetryDelay; i++ {
		d *= 2
	}
	d = min(d, MaxRetryDelay)
	half := d / 2
	return half + rand.N(d-half+1) //nolint:gosec // jitter needs no cryptographic randomness
}

type attemptKey struct{}

// WithAttempt returns ctx carrying the 1-based attempt number of the task being processed.
// Queue implementations call it; handlers read Attempt.
func WithAttempt(ctx context.Context, attempt int) context.Context {
	return context.WithValue(ctx, attemptKey{}, attempt)
}

// Attempt reports which attempt of its task a handler is running (1 for the first), or 0 outside
// a handler.
func Attempt(ctx context.Context) int {
	n, _ := ctx.Value(attemptKey{}).(int)
	return n
}

// ServeMux routes tasks to handlers by Task.Type, and the news of a task that failed for good
// to its handler when that is a FailureHandler, turning handler panics into errors wrapping
// ErrPanic. Register every handler before Run; registration is safe for concurrent use anyway.
// The zero value is ready to use.
type ServeMux struct {
	mu       sync.RWMutex
	handlers map[string]Handler
}

// NewServeMux returns an empty ServeMux.
func NewServeMux() *ServeMux { return &ServeMux{} }

// Handle registers h for taskType. It panics on an empty type, a nil handler or a type that
// already has a handler: those are wiring mistakes, found at start.
func (m *ServeMux) Handle(taskType string, h Handler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case taskType == "":
		panic("workers: ServeMux.Handle: empty task type")
	case h == nil:
		panic(fmt.Sprintf("workers: ServeMux.Handle(%q): nil handler", taskType))
	}
	if _, dup := m.handlers[taskType]; dup {
		panic(fmt.Sprintf("workers: ServeMux.Handle(%q): task type already has a handler", taskType))
	}
	if m.handlers == nil {
		m.handlers = make(map[string]Handler)
	}
	m.handlers[taskType] = h
}

// HandleFunc registers f for taskType, like Handle.
func (m *ServeMux) HandleFunc(taskType string, f func(ctx context.Context, t Task) error) {
	if f == nil {
		panic(fmt.Sprintf("workers: ServeMux.HandleFunc(%q): nil handler", taskType))
	}
	m.Handle(taskType, HandlerFunc(f))
}

// ProcessTask runs the handler of t.Type. A missing handler gives an error wrapping
// ErrNoHandler; a panic gives an error wrapping ErrPanic that names the panic's value and site.
func (m *ServeMux) ProcessTask(ctx context.Context, t Task) (err error) {
	m.mu.RLock()
	h, ok := m.handlers[t.Type]
	m.mu.RUnlock()
	if !ok {
		return fmt.Errorf("%w %q", ErrNoHandler, t.Type)
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: task %q: %v (at %s)", ErrPanic, t.Type, r, panicSite())
		}
	}()
	return h.ProcessTask(ctx, t)
}

// Fail tells the handler of t.Type that t failed for good with err, when that handler is a
// FailureHandler; otherwise it does nothing. Queue implementations call it once a task gives up.
// A panic in TaskFailed gives an error wrapping ErrPanic, for the queue to log.
func (m *ServeMux) Fail(ctx context.Context, t Task, err error) (perr error) {
	m.mu.RLock()
	h, ok := m.handlers[t.Type].(FailureHandler)
	m.mu.RUnlock()
	if !ok {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			perr = fmt.Errorf("%w: failure handler of task %q: %v (at %s)", ErrPanic, t.Type, r, panicSite())
		}
	}()
	h.TaskFailed(ctx, t, err)
	return nil
}

// panicSite names the file and line that panicked, called from a deferred recover.
func panicSite() string {
	var pcs [32]uintptr
	n := runtime.Callers(2, pcs[:])
	frames := runtime.CallersFrames(pcs[:n])
	seenPanic := false
	for {
		f, more := frames.Next()
		if seenPanic && !strings.HasPrefix(f.Function, "runtime.") {
			return fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		if f.Function == "runtime.gopanic" {
			seenPanic = true
		}
		if !more {
			return "unknown"
		}
	}
}
