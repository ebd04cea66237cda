package asynqqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"svc/workers"
)

// Defaults and limits of Config.
const (
	DefaultQueue        = "svc"
	DefaultConcurrency  = 4
	DefaultPollInterval = time.Second
	// MaxConcurrency is the largest accepted Config.Concurrency.
	MaxConcurrency = 1024
	// MaxQueueLen is the longest accepted Config.Queue.
	MaxQueueLen = 64
)

// ErrConfig is wrapped by New's error for a bad Config; the message names the field.
var ErrConfig = errors.New("asynqqueue: bad config")

// queueName is what Config.Queue may hold: asynq uses it inside Redis keys and hash tags.
var queueName = regexp.MustCompile(`^[A-Za-z0-9_.:-]+$`)

// Config tunes a Queue. Zero values mean the documented defaults.
type Config struct {
	// RedisURL is the Redis server, redis://[:password@]host[:port][/db] or rediss:// for TLS. Required.
	RedisURL string
	// Queue is the asynq queue name (default "svc"). Processes that share a queue share the work;
	// tests use one queue per test.
	Queue string
	// Concurrency is the number of tasks one Run processes at once (default 4).
	Concurrency int
	// PollInterval is how often an idle Run looks for pending and for due delayed tasks (default 1s).
	PollInterval time.Duration
	// RetryBase is the first retry delay (default workers.DefaultRetryBase); see workers.RetryDelay.
	RetryBase time.Duration
	// Lease is how long a running task's liveness mark lasts without a refresh (default 5s, at
	// least MinLease); its worker refreshes it every Lease/5. A task whose worker died is requeued
	// by any Run about 1.5 Lease after the death, instead of after asynq's fixed lease and
	// recoverer (one to two minutes); see the package doc.
	Lease time.Duration
	// Logger receives the queue's and asynq's logs (default slog.Default()).
	Logger *slog.Logger
}

// Queue is a workers.Queue on asynq. Close it when done.
type Queue struct {
	cfg       Config
	log       *slog.Logger
	rdb       redis.UniversalClient
	client    *asynq.Client
	inspector *asynq.Inspector
}

var _ workers.Queue = (*Queue)(nil)

// New connects lazily to cfg.RedisURL (New does no I/O; Run checks the connection).
func New(cfg Config) (*Queue, error) {
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	opt, err := asynq.ParseRedisURI(cfg.RedisURL)
	if err != nil {
		return nil, fmt.Errorf("%w: RedisURL %s: %w", ErrConfig, redact(cfg.RedisURL), err)
	}
	rdb, ok := opt.MakeRedisClient().(redis.UniversalClient)
	if !ok {
		return nil, fmt.Errorf("%w: RedisURL %s: unsupported connection kind", ErrConfig, redact(cfg.RedisURL))
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Queue{
		cfg:       cfg,
		log:       log.With("component", "asynqqueue", "queue", cfg.Queue),
		rdb:       rdb,
		client:    asynq.NewClientFromRedisClient(rdb),
		inspector: asynq.NewInspectorFromRedisClient(rdb),
	}, nil
}

func (c *Config) withDefaults() error {
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	switch {
	case c.RedisURL == "":
		return fmt.Errorf("%w: RedisURL is empty", ErrConfig)
	case len(c.Queue) > MaxQueueLen || !queueName.MatchString(c.Queue):
		return fmt.Errorf("%w: Queue %q must be 1 to %d of A-Z a-z 0-9 _ . : -", ErrConfig, c.Queue, MaxQueueLen)
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("%w: Concurrency %d must be in [1, %d] (0 means %d)", ErrConfig, c.Concurrency, MaxConcurrency, DefaultConcurrency)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: PollInterval %v must not be negative", ErrConfig, c.PollInterval)
	case c.RetryBase < 0:
		return fmt.Errorf("%w: RetryBase %v must not be negative", ErrConfig, c.RetryBase)
	case c.Lease < 0 || (c.Lease > 0 && c.Lease < MinLease):
		return fmt.Errorf("%w: Lease %v must be at least %v (0 means %v)", ErrConfig, c.Lease, MinLease, DefaultLease)
	}
	u, err := url.Parse(c.RedisURL)
	if err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") || u.Host == "" {
		return fmt.Errorf("%w: RedisURL %s must look like redis://host:port/db", ErrConfig, redact(c.RedisURL))
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.RetryBase == 0 {
		c.RetryBase = workers.DefaultRetryBase
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	return nil
}

// Close releases the Redis connections. Call it after every Run has returned.
func (q *Queue) Close() error {
	if err := q.rdb.Close(); err != nil {
		return fmt.Errorf("close redis: %w", err)
	}
	return nil
}

// headerTimeout carries the task's exact Timeout in milliseconds (asynq keeps whole seconds).
const headerTimeout = "svc-timeout-ms"

// timeoutGrace is added to asynq's own deadline so that the wrapper's exact timeout fires first.
const timeoutGrace = 5 * time.Second

// Enqueue adds t to the queue; see workers.Queue.
func (q *Queue) Enqueue(ctx context.Context, t workers.Task, opts ...workers.Option) error {
	if err := t.Validate(); err != nil {
		return err
	}
	o, err := workers.ResolveOptions(time.Now(), opts...)
	if err != nil {
		return err
	}
	id := t.ID
	if id == "" {
		id = newID()
	}
	at := asynq.NewTaskWithHeaders(t.Type, t.Payload, map[string]string{
		headerTimeout: strconv.FormatInt(o.Timeout.Milliseconds(), 10),
	})
	aopts := []asynq.Option{
		asynq.Queue(q.cfg.Queue),
		asynq.TaskID(id),
		asynq.MaxRetry(o.MaxRetry + 1), // one spare retry: see the package doc
		asynq.Timeout(o.Timeout.Truncate(time.Second) + time.Second + timeoutGrace),
	}
	if !o.ProcessAt.IsZero() {
		// asynq schedules by Unix second, rounding down; round up so the task never starts early.
		aopts = append(aopts, asynq.ProcessAt(o.ProcessAt.Truncate(time.Second).Add(time.Second)))
	}
	// Two tries: the first conflict may be a finished task asynq still keeps, which we free.
	for range 2 {
		_, err = q.client.EnqueueContext(ctx, at, aopts...)
		if !errors.Is(err, asynq.ErrTaskIDConflict) {
			break
		}
		freed, ferr := q.freeFinished(id)
		if ferr != nil {
			return fmt.Errorf("enqueue task %q: %w", id, ferr)
		}
		if !freed {
			return fmt.Errorf("enqueue task %q: %w", id, workers.ErrDuplicate)
		}
	}
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("enqueue task %q: %w", id, workers.ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("enqueue task %q: %w", id, err)
	}
	return nil
}

// freeFinished deletes task id when asynq keeps it only as a finished (archived or completed)
// task, and reports whether the ID is now free.
func (q *Queue) freeFinished(id string) (bool, error) {
	info, err := q.inspector.GetTaskInfo(q.cfg.Queue, id)
	if errors.Is(err, asynq.ErrTaskNotFound) {
		return true, nil // finished and deleted meanwhile
	}
	if err != nil {
		return false, fmt.Errorf("inspect conflicting task: %w", err)
	}
	if info.State != asynq.TaskStateArchived && info.State != asynq.TaskStateCompleted {
		return false, nil // pending, scheduled, retrying or running: a true duplicate
	}
	err = q.inspector.DeleteTask(q.cfg.Queue, id)
	if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) {
		return false, fmt.Errorf("delete finished task: %w", err)
	}
	return true, nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// Stats implements workers.StatsReporter: the pending tasks of the queue and the latency of the
// oldest, as asynq reports them.
func (q *Queue) Stats(ctx context.Context) (workers.QueueStats, error) {
	queues, err := q.inspector.Queues()
	if err != nil {
		return workers.QueueStats{}, fmt.Errorf("queue stats: %w", err)
	}
	if !slices.Contains(queues, q.cfg.Queue) {
		return workers.QueueStats{}, nil // nothing was ever enqueued
	}
	info, err := q.inspector.GetQueueInfo(q.cfg.Queue)
	if err != nil {
		return workers.QueueStats{}, fmt.Errorf("queue stats: %w", err)
	}
	return workers.QueueStats{Pending: info.Pending, Oldest: info.Latency}, nil
}
