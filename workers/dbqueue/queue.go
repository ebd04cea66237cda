package dbqueue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"gorm.io/gorm"

	"svc/migrations"
	"svc/workers"
)

// Defaults of Config.
const (
	DefaultConcurrency  = 4
	DefaultPollInterval = 200 * time.Millisecond
	DefaultLease        = 30 * time.Second
	DefaultRetention    = 24 * time.Hour

	// enqueueBatch is the most tasks one statement of EnqueueBatch inserts.
	enqueueBatch = 500

	// MinLease is the shortest accepted Config.Lease: the heartbeat renews every Lease/3.
	MinLease = 100 * time.Millisecond
	// MaxConcurrency is the largest accepted Config.Concurrency.
	MaxConcurrency = 1024
)

// ErrConfig is wrapped by New's error for a bad Config or database handle; the message names the field.
var ErrConfig = errors.New("dbqueue: bad config")

// Config tunes a Queue. Zero values mean the documented defaults.
type Config struct {
	// Concurrency is the number of tasks one Run processes at once (default 4).
	Concurrency int
	// PollInterval is how often an idle Run looks for due tasks (default 200ms). An Enqueue on the
	// same Queue value wakes it at once.
	PollInterval time.Duration
	// Lease is how long a claim lasts without a heartbeat (default 30s, at least MinLease). A task
	// whose worker died runs again after at most this long.
	Lease time.Duration
	// RetryBase is the first retry delay (default workers.DefaultRetryBase); see workers.RetryDelay.
	RetryBase time.Duration
	// Retention is how long finished jobs are kept (default 24h).
	Retention time.Duration
	// Logger receives the queue's logs (default slog.Default()).
	Logger *slog.Logger
	// Types, when set, makes Run claim only tasks of these types, and ExceptTypes, when set,
	// only tasks of other types: two Queues on one database with complementary filters are two
	// lanes with their own Concurrency (automation fires apart from builds). Enqueue takes any
	// type either way, and wakes only its own Queue's Run.
	Types       []string
	ExceptTypes []string
	// Instance names the owner of the queue's claims across restarts, such as the absolute path
	// of `svc up`'s data dir (optional). Every claim records it with this host and this process's
	// pid; when Run starts, it takes back at once the claims of the same Instance made on this
	// host by a process that is no longer alive (a predecessor killed mid-task), instead of
	// waiting out their lease. Claims of other instances, of other hosts, or of a live process
	// are left to their lease. Empty means no owner: every claim waits out its lease.
	Instance string
}

// Queue is a workers.Queue whose tasks are rows of the jobs table.
type Queue struct {
	db      *gorm.DB
	dialect migrations.Dialect
	cfg     Config
	log     *slog.Logger
	// wake is signalled (without blocking) by Enqueue, so an idle Run claims at once.
	wake chan struct{}
	// lane is the SQL condition of Types and ExceptTypes ("" for none), with its arguments.
	lane     string
	laneArgs []any
}

var _ workers.Queue = (*Queue)(nil)

// New returns a Queue on db, which must be migrated and opened by migrations.Open (whose error
// translation turns a duplicate key into gorm.ErrDuplicatedKey). New does no I/O.
func New(db *gorm.DB, cfg Config) (*Queue, error) {
	if db == nil {
		return nil, fmt.Errorf("%w: database handle is nil", ErrConfig)
	}
	if !db.Config.TranslateError {
		return nil, fmt.Errorf("%w: database handle must translate errors (open it with migrations.Open)", ErrConfig)
	}
	if err := cfg.withDefaults(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	q := &Queue{
		db:      db,
		dialect: migrations.DialectOf(db),
		cfg:     cfg,
		log:     log.With("component", "dbqueue"),
		wake:    make(chan struct{}, 1),
	}
	q.lane, q.laneArgs = laneFilter(cfg.Types, cfg.ExceptTypes)
	return q, nil
}

// laneFilter is the condition on a job's type that Types and ExceptTypes make: " AND type IN
// (...) AND type NOT IN (...)", or "" for no filter.
func laneFilter(types, except []string) (string, []any) {
	var sql strings.Builder
	var args []any
	for _, f := range []struct {
		op    string
		types []string
	}{{"IN", types}, {"NOT IN", except}} {
		if len(f.types) == 0 {
			continue
		}
		sql.WriteString(" AND type " + f.op + " (" + strings.TrimSuffix(strings.Repeat("?,", len(f.types)), ",") + ")")
		for _, t := range f.types {
			args = append(args, t)
		}
	}
	return sql.String(), args
}

func (c *Config) withDefaults() error {
	switch {
	case c.Concurrency < 0 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("%w: Concurrency %d must be in [1, %d] (0 means %d)", ErrConfig, c.Concurrency, MaxConcurrency, DefaultConcurrency)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: PollInterval %v must not be negative", ErrConfig, c.PollInterval)
	case c.Lease < 0 || (c.Lease > 0 && c.Lease < MinLease):
		return fmt.Errorf("%w: Lease %v must be at least %v (0 means %v)", ErrConfig, c.Lease, MinLease, DefaultLease)
	case c.RetryBase < 0:
		return fmt.Errorf("%w: RetryBase %v must not be negative", ErrConfig, c.RetryBase)
	case c.Retention < 0:
		return fmt.Errorf("%w: Retention %v must not be negative", ErrConfig, c.Retention)
	case len(c.Types) > 0 && len(c.ExceptTypes) > 0:
		return fmt.Errorf("%w: set Types or ExceptTypes, not both", ErrConfig)
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.Lease == 0 {
		c.Lease = DefaultLease
	}
	if c.RetryBase == 0 {
		c.RetryBase = workers.DefaultRetryBase
	}
	if c.Retention == 0 {
		c.Retention = DefaultRetention
	}
	return nil
}

// Enqueue inserts t as a queued job; see workers.Queue.
func (q *Queue) Enqueue(ctx context.Context, t workers.Task, opts ...workers.Option) error {
	if err := t.Validate(); err != nil {
		return err
	}
	now := q.now()
	o, err := workers.ResolveOptions(now, opts...)
	if err != nil {
		return err
	}
	id := newID()
	key := t.ID
	if key == "" {
		key = id
	}
	runAt := o.ProcessAt.UTC().Truncate(time.Microsecond)
	if o.ProcessAt.IsZero() {
		runAt = now
	}
	payload := t.Payload
	if payload == nil {
		payload = []byte{}
	}
	err = q.db.WithContext(ctx).Exec(
		`INSERT INTO jobs (id, type, payload, unique_key, state, attempts, max_retry, run_at, worker_id, last_error, timeout_ms, created_at, updated_at)
		 VALUES (?, ?, ?, ?, 'queued', 0, ?, ?, '', '', ?, ?, ?)`,
		id, t.Type, payload, key, o.MaxRetry, runAt, o.Timeout.Milliseconds(), now, now).Error
	if errors.Is(err, gorm.ErrDuplicatedKey) {
		return fmt.Errorf("enqueue task %q: %w", key, workers.ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("enqueue task %q: %w", key, err)
	}
	select {
	case q.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
	return nil
}

// EnqueueBatch inserts ts as queued jobs in one statement per enqueueBatch tasks, leaving out
// those whose ID is pending or running; see workers.BatchEnqueuer.
func (q *Queue) EnqueueBatch(ctx context.Context, ts []workers.Task, opts ...workers.Option) error {
	now := q.now()
	o, err := workers.ResolveOptions(now, opts...)
	if err != nil {
		return err
	}
	runAt := o.ProcessAt.UTC().Truncate(time.Microsecond)
	if o.ProcessAt.IsZero() {
		runAt = now
	}
	for _, t := range ts {
		if err := t.Validate(); err != nil {
			return err
		}
	}
	err = q.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for start := 0; start < len(ts); start += enqueueBatch {
			page := ts[start:min(len(ts), start+enqueueBatch)]
			args := make([]any, 0, 9*len(page))
			for _, t := range page {
				id := newID()
				key := t.ID
				if key == "" {
					key = id
				}
				payload := t.Payload
				if payload == nil {
					payload = []byte{}
				}
				args = append(args, id, t.Type, payload, key, o.MaxRetry, runAt, o.Timeout.Milliseconds(), now, now)
			}
			// ON CONFLICT DO NOTHING: the unique index of pending keys leaves a duplicate out.
			err := tx.Exec(`INSERT INTO jobs (id, type, payload, unique_key, state, attempts, max_retry, run_at, worker_id, last_error, timeout_ms, created_at, updated_at)
				VALUES `+strings.TrimSuffix(strings.Repeat("(?, ?, ?, ?, 'queued', 0, ?, ?, '', '', ?, ?, ?),", len(page)), ",")+
				` ON CONFLICT DO NOTHING`, args...).Error
			if err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("enqueue %d tasks: %w", len(ts), err)
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

// now is the queue's clock: UTC (SQLite compares times as text) at the precision both databases keep.
func (q *Queue) now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// Stats implements workers.StatsReporter: the queued tasks due now, and how long the oldest has
// been due.
func (q *Queue) Stats(ctx context.Context) (workers.QueueStats, error) {
	now := time.Now().UTC()
	due := q.db.WithContext(ctx).Table("jobs").Where("state = 'queued' AND run_at <= ?", now)
	var n int64
	if err := due.Count(&n).Error; err != nil {
		return workers.QueueStats{}, fmt.Errorf("queue stats: %w", err)
	}
	st := workers.QueueStats{Pending: int(n)}
	if n == 0 {
		return st, nil
	}
	// run_at itself, not MIN(run_at): SQLite returns an aggregate of a DATETIME as text.
	var oldest struct{ RunAt time.Time }
	err := q.db.WithContext(ctx).Table("jobs").Select("run_at").Where("state = 'queued' AND run_at <= ?", now).
		Order("run_at").Limit(1).Scan(&oldest).Error
	if err != nil {
		return workers.QueueStats{}, fmt.Errorf("queue stats: %w", err)
	}
	st.Oldest = max(now.Sub(oldest.RunAt), 0)
	return st, nil
}
