package dbqueue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"svc/workers"
)

// EnqueueTx inserts t as a queued job within tx, a transaction on the queue's database, so that
// the job commits (or not) with what else tx writes. A task whose ID is pending or running is
// workers.ErrDuplicate, without aborting tx (the insert does nothing, also on Postgres). Call
// Wake after tx commits, so that an idle Run claims the job at once rather than at its next poll.
func (q *Queue) EnqueueTx(ctx context.Context, tx *gorm.DB, t workers.Task, opts ...workers.Option) error {
	dup, err := q.EnqueueManyTx(ctx, tx, []workers.Task{t}, opts...)
	if err != nil {
		return err
	}
	if dup[0] {
		return fmt.Errorf("enqueue task %q: %w", t.ID, workers.ErrDuplicate)
	}
	return nil
}

// Wake makes an idle Run of q look for due jobs at once (after EnqueueTx's transaction commits).
func (q *Queue) Wake() {
	select {
	case q.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// EnqueueManyTx is EnqueueTx of every task of ts in one statement, all with opts; it reports
// for each whether it was a duplicate (an ID pending or running, or repeated in ts) rather than
// enqueued.
func (q *Queue) EnqueueManyTx(ctx context.Context, tx *gorm.DB, ts []workers.Task, opts ...workers.Option) (duplicate []bool, err error) {
	if len(ts) == 0 {
		return nil, nil
	}
	now := q.now()
	o, err := workers.ResolveOptions(now, opts...)
	if err != nil {
		return nil, err
	}
	runAt := now
	if !o.ProcessAt.IsZero() {
		runAt = o.ProcessAt.UTC().Truncate(time.Microsecond)
	}
	keys := make([]string, len(ts))
	var sql strings.Builder
	args := make([]any, 0, 9*len(ts))
	sql.WriteString(`INSERT INTO jobs (id, type, payload, unique_key, state, attempts, max_retry, run_at, worker_id, last_error, timeout_ms, created_at, updated_at) VALUES `)
	for i, t := range ts {
		if err := t.Validate(); err != nil {
			return nil, err
		}
		id := newID()
		keys[i] = t.ID
		if keys[i] == "" {
			keys[i] = id
		}
		payload := t.Payload
		if payload == nil {
			payload = []byte{}
		}
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString("(?, ?, ?, ?, 'queued', 0, ?, ?, '', '', ?, ?, ?)")
		args = append(args, id, t.Type, payload, keys[i], o.MaxRetry, runAt, o.Timeout.Milliseconds(), now, now)
	}
	sql.WriteString(" ON CONFLICT DO NOTHING RETURNING unique_key")
	var added []string
	if err := tx.WithContext(ctx).Raw(sql.String(), args...).Scan(&added).Error; err != nil {
		return nil, fmt.Errorf("enqueue %d tasks: %w", len(ts), err)
	}
	fresh := make(map[string]bool, len(added))
	for _, k := range added {
		fresh[k] = true
	}
	duplicate = make([]bool, len(ts))
	for i, k := range keys {
		duplicate[i] = !fresh[k]
		delete(fresh, k) // a key repeated in ts is a duplicate after its first
	}
	return duplicate, nil
}
