package durable

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"svc/migrations"
)

// DB is a Store over a gorm database that carries migrations 00012 and 00016 (SQLite or
// Postgres). Every change of a run is a conditional UPDATE, so that runtimes sharing the
// database never advance a run twice.
type DB struct {
	db *gorm.DB
	// recordSQL is the one statement of Record, in db's dialect.
	recordSQL string
	// answerSQL is Answer as one statement (Postgres), "" where the dialect needs a transaction.
	answerSQL string
}

var _ Store = (*DB)(nil)

// NewDB returns a Store over db.
func NewDB(db *gorm.DB) *DB {
	value, at, lock := "?", "?", ""
	if migrations.DialectOf(db) == migrations.Postgres {
		// The parameters of an INSERT ... SELECT have no target type to infer.
		value, at = "CAST(? AS JSON)", "CAST(? AS TIMESTAMPTZ)"
		// The fence: the run's row is share-locked until the entry commits. Without the lock,
		// an INSERT whose snapshot predates a claim would still see the old attempt and commit
		// after the claim, where the claimer, which read the journal in between, never sees it.
		// With it, a claim in flight makes the INSERT wait and then check the claimed row (no
		// longer its attempt: nothing written), and an INSERT in flight makes the claim wait
		// until the entry is there to read.
		lock = " FOR SHARE"
	}
	// One statement: the entry is written only while the run is running under the attempt, its
	// seq one past the run's last. ON CONFLICT leaves an existing key alone, and Record tells
	// the two ways of writing nothing apart only then. Concurrent recordings on Postgres may share
	// a seq (each sees the other's MAX uncommitted), so seq is not unique: Journal orders ties by
	// time and key. (SQLite needs no lock: a write statement holds the database's one write lock
	// from before it reads.)
	recordSQL := `INSERT INTO durable_journal (run_id, key, seq, value, at) ` +
		`SELECT ?, ?, COALESCE((SELECT MAX(seq) FROM durable_journal WHERE run_id = ?), 0) + 1, ` + value + `, ` + at + ` ` +
		`WHERE EXISTS (SELECT 1 FROM durable_runs WHERE id = ? AND attempt = ? AND status = '` + Running + `'` + lock + `) ` +
		`ON CONFLICT (run_id, key) DO NOTHING`
	// Each write is one statement (Answer opens its own transaction): gorm's default wrapping of
	// a single UPDATE in BEGIN and COMMIT would only add round trips.
	db = db.Session(&gorm.Session{SkipDefaultTransaction: true})
	s := &DB{db: db, recordSQL: recordSQL}
	if migrations.DialectOf(db) == migrations.Postgres {
		// The claim and the answer's entry in one round trip: a data-modifying WITH is one
		// statement, so a failed insert (the key exists) undoes the claim too.
		s.answerSQL = `WITH u AS (UPDATE durable_runs SET status = '` + Running + `', attempt = attempt + 1, executions = 1, ` +
			`lease_until = CAST(? AS TIMESTAMPTZ), answered_by = ?, updated_at = CAST(? AS TIMESTAMPTZ) ` +
			`WHERE id = ? AND agent_id = ? AND status IN ('` + AwaitingInput + `', '` + Sleeping + `') AND pause_key = ? RETURNING *), ` +
			`j AS (INSERT INTO durable_journal (run_id, key, seq, value, at) ` +
			`SELECT u.id, ?, COALESCE((SELECT MAX(seq) FROM durable_journal WHERE run_id = u.id), 0) + 1, CAST(? AS JSON), CAST(? AS TIMESTAMPTZ) FROM u RETURNING run_id) ` +
			`SELECT u.* FROM u, j`
	}
	return s
}

type runRow struct {
	ID              string `gorm:"primaryKey"`
	AgentID         string
	DeployID        string
	ToolName        string
	ParentSessionID string
	Owner           string
	ScopeID         string
	Status          string
	Input           sql.NullString
	Context         sql.NullString
	Model           sql.NullString
	Pause           sql.NullString
	PauseKey        sql.NullString
	AnsweredBy      string
	Result          sql.NullString
	Error           string
	Attempt         int
	Executions      int
	LeaseUntil      sql.NullTime
	CreatedAt       time.Time `gorm:"autoCreateTime:false"`
	UpdatedAt       time.Time `gorm:"autoUpdateTime:false"`
}

// TableName names the table for gorm.
func (runRow) TableName() string { return "durable_runs" }

type entryRow struct {
	RunID string `gorm:"primaryKey"`
	Key   string `gorm:"primaryKey"`
	Seq   int
	Value sql.NullString
	At    time.Time
}

// TableName names the table for gorm.
func (entryRow) TableName() string { return "durable_journal" }

func toRow(r Run) (runRow, error) {
	row := runRow{ID: r.ID, AgentID: r.AgentID, DeployID: r.DeployID, ToolName: r.ToolName,
		ParentSessionID: r.ParentSessionID, Owner: r.Owner, ScopeID: r.ScopeID, Status: r.Status,
		Input: rawText(r.Input), AnsweredBy: r.AnsweredBy, Result: rawText(r.Result), Error: r.Error,
		Attempt: r.Attempt, Executions: r.Executions, LeaseUntil: nullTime(r.LeaseUntil), CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}
	if r.Context != nil {
		b, err := json.Marshal(r.Context)
		if err != nil {
			return runRow{}, fmt.Errorf("durable: run %s: context: %w", r.ID, err)
		}
		row.Context = sql.NullString{String: string(b), Valid: true}
	}
	if r.Model != (Model{}) {
		b, _ := json.Marshal(r.Model) // three strings always encode
		row.Model = sql.NullString{String: string(b), Valid: true}
	}
	var err error
	if row.Pause, row.PauseKey, err = pauseText(r.Pause); err != nil {
		return runRow{}, fmt.Errorf("durable: run %s: pause: %w", r.ID, err)
	}
	return row, nil
}

func (row runRow) run() (Run, error) {
	r := Run{ID: row.ID, AgentID: row.AgentID, DeployID: row.DeployID, ToolName: row.ToolName,
		ParentSessionID: row.ParentSessionID, Owner: row.Owner, ScopeID: row.ScopeID, Status: row.Status,
		Input: textRaw(row.Input), AnsweredBy: row.AnsweredBy, Result: textRaw(row.Result), Error: row.Error,
		Attempt: row.Attempt, Executions: row.Executions, CreatedAt: row.CreatedAt.UTC(), UpdatedAt: row.UpdatedAt.UTC()}
	if row.LeaseUntil.Valid {
		r.LeaseUntil = row.LeaseUntil.Time.UTC()
	}
	if row.Context.Valid {
		if err := json.Unmarshal([]byte(row.Context.String), &r.Context); err != nil {
			return Run{}, fmt.Errorf("durable: run %s: context: %w", row.ID, err)
		}
	}
	if row.Model.Valid {
		if err := json.Unmarshal([]byte(row.Model.String), &r.Model); err != nil {
			return Run{}, fmt.Errorf("durable: run %s: model: %w", row.ID, err)
		}
	}
	if row.Pause.Valid {
		var p Pause
		if err := json.Unmarshal([]byte(row.Pause.String), &p); err != nil {
			return Run{}, fmt.Errorf("durable: run %s: pause: %w", row.ID, err)
		}
		p.WakeAt, p.ExpiresAt = cloneTime(p.WakeAt), cloneTime(p.ExpiresAt)
		r.Pause = &p
	}
	return r, nil
}

// pauseText is the JSON of p and its key, both NULL for no pause.
func pauseText(p *Pause) (text, key sql.NullString, err error) {
	if p == nil {
		return text, key, nil
	}
	c := clonePause(p) // its times in UTC
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // a question's "<" and "&" stay as they are
	if err := enc.Encode(c); err != nil {
		return text, key, err
	}
	return sql.NullString{String: strings.TrimSuffix(buf.String(), "\n"), Valid: true}, sql.NullString{String: p.Key, Valid: true}, nil
}

func rawText(b json.RawMessage) sql.NullString {
	if len(b) == 0 {
		return sql.NullString{}
	}
	return sql.NullString{String: string(b), Valid: true}
}

func textRaw(s sql.NullString) json.RawMessage {
	if !s.Valid || s.String == "" {
		return nil
	}
	return json.RawMessage(s.String)
}

func nullTime(t time.Time) sql.NullTime {
	if t.IsZero() {
		return sql.NullTime{}
	}
	return sql.NullTime{Time: t.UTC(), Valid: true}
}

// Create implements Store.
func (s *DB) Create(ctx context.Context, r Run) error {
	row, err := toRow(r)
	if err != nil {
		return err
	}
	if err := s.db.WithContext(ctx).Create(&row).Error; err != nil {
		return fmt.Errorf("durable: create %s: %w", r.ID, err)
	}
	return nil
}

// Get implements Store.
func (s *DB) Get(ctx context.Context, agentID, id string) (Run, error) {
	return s.get(s.db.WithContext(ctx), agentID, id)
}

func (s *DB) get(tx *gorm.DB, agentID, id string) (Run, error) {
	var row runRow
	err := tx.Where("id = ? AND agent_id = ?", id, agentID).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return Run{}, notFound(id)
	case err != nil:
		return Run{}, fmt.Errorf("durable: get %s: %w", id, err)
	}
	return row.run()
}

// List implements Store.
func (s *DB) List(ctx context.Context, f Filter) ([]Run, error) {
	q := s.db.WithContext(ctx).Where("agent_id = ?", f.AgentID)
	if len(f.Statuses) > 0 {
		q = q.Where("status IN ?", f.Statuses)
	}
	var rows []runRow
	if err := q.Order("created_at DESC, id DESC").Limit(limit(f.Limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("durable: list runs of agent %q: %w", f.AgentID, err)
	}
	out := make([]Run, 0, len(rows))
	for _, row := range rows {
		r, err := row.run()
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// Journal implements Store.
func (s *DB) Journal(ctx context.Context, id string) ([]Entry, error) {
	var rows []entryRow
	if err := s.db.WithContext(ctx).Where("run_id = ?", id).Order("seq, at, key").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("durable: journal of %s: %w", id, err)
	}
	out := make([]Entry, len(rows))
	for i, row := range rows {
		out[i] = Entry{Key: row.Key, Seq: row.Seq, Value: textRaw(row.Value), At: row.At.UTC()}
	}
	return out, nil
}

// Record implements Store: one INSERT while the key is new and the run runs under attempt, and
// a second statement only when it wrote nothing, to tell ErrRecorded from ErrStale.
func (s *DB) Record(ctx context.Context, id string, attempt int, e Entry) error {
	return s.record(s.db.WithContext(ctx), id, attempt, e)
}

// RecordAll implements Store: one Record for a single entry; for more, a transaction that
// checks the run's attempt (locking its row against a claim), numbers the entries after the
// journal's last and inserts them in one statement, with one commit.
func (s *DB) RecordAll(ctx context.Context, id string, attempt int, es []Entry) error {
	switch len(es) {
	case 0:
		return nil
	case 1:
		return s.Record(ctx, id, attempt, es[0])
	}
	return s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		now := time.Now().UTC()
		res := tx.Model(&runRow{}).Where("id = ? AND attempt = ? AND status = ?", id, attempt, Running).Update("updated_at", gorm.Expr("updated_at"))
		if res.Error != nil {
			return fmt.Errorf("durable: record %d entries of %s: %w", len(es), id, res.Error)
		}
		if res.RowsAffected == 0 {
			return stale(id)
		}
		var last sql.NullInt64
		if err := tx.Model(&entryRow{}).Where("run_id = ?", id).Select("MAX(seq)").Scan(&last).Error; err != nil {
			return fmt.Errorf("durable: record %d entries of %s: %w", len(es), id, err)
		}
		rows := make([]entryRow, len(es))
		for i, e := range es {
			at := e.At
			if at.IsZero() {
				at = now
			}
			rows[i] = entryRow{RunID: id, Key: e.Key, Seq: int(last.Int64) + i + 1, Value: rawText(e.Value), At: at.UTC()}
		}
		res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&rows)
		if res.Error != nil {
			return fmt.Errorf("durable: record %d entries of %s: %w", len(es), id, res.Error)
		}
		if int(res.RowsAffected) != len(rows) {
			return fmt.Errorf("%w: %s: a key of %d entries", ErrRecorded, id, len(rows))
		}
		return nil
	})
}

func (s *DB) record(tx *gorm.DB, id string, attempt int, e Entry) error {
	at := e.At
	if at.IsZero() {
		at = time.Now()
	}
	res := tx.Exec(s.recordSQL, id, e.Key, id, rawText(e.Value), at.UTC(), id, attempt)
	if res.Error != nil {
		return fmt.Errorf("durable: record %s under %q: %w", id, e.Key, res.Error)
	}
	if res.RowsAffected > 0 {
		return nil
	}
	// Nothing written: the key exists (under a run still ours), or the run moved on.
	var n int64
	err := tx.Model(&entryRow{}).
		Where("run_id = ? AND key = ?", id, e.Key).
		Where("EXISTS (SELECT 1 FROM durable_runs WHERE id = ? AND attempt = ? AND status = ?)", id, attempt, Running).
		Count(&n).Error
	switch {
	case err != nil:
		return fmt.Errorf("durable: record %s under %q: %w", id, e.Key, err)
	case n > 0:
		return recorded(id, e.Key)
	}
	return stale(id)
}

// Claim implements Store.
func (s *DB) Claim(ctx context.Context, agentID, id string, from []string, now, leaseUntil time.Time) (Run, error) {
	db := s.db.WithContext(ctx)
	q := db.Model(&runRow{}).Where("id = ? AND agent_id = ?", id, agentID)
	lapsed := db.Where("status = ? AND lease_until < ?", Running, now.UTC())
	if len(from) > 0 {
		q = q.Where(db.Where("status IN ?", from).Or(lapsed))
	} else {
		q = q.Where(lapsed)
	}
	res := q.Updates(map[string]any{
		"status":      Running,
		"attempt":     gorm.Expr("attempt + 1"),
		"executions":  gorm.Expr("CASE WHEN status = ? THEN executions + 1 ELSE 1 END", Running),
		"lease_until": leaseUntil.UTC(),
		"updated_at":  now.UTC(),
	})
	if res.Error != nil {
		return Run{}, fmt.Errorf("durable: claim %s: %w", id, res.Error)
	}
	return s.after(ctx, agentID, id, res.RowsAffected)
}

// after reads the run a conditional update of rows rows was for: ErrStale with it when the
// update changed nothing.
func (s *DB) after(ctx context.Context, agentID, id string, rows int64) (Run, error) {
	r, err := s.Get(ctx, agentID, id)
	if err != nil {
		return Run{}, err
	}
	if rows == 0 {
		return r, stale(id)
	}
	return r, nil
}

// Answer implements Store. The claim and the journal entry are one transaction: the claim
// first, so that of concurrent answers the losers wait for the winner and then find the run
// running.
func (s *DB) Answer(ctx context.Context, agentID, id, key string, value json.RawMessage, by string, now, leaseUntil time.Time) (Run, error) {
	if s.answerSQL != "" {
		var rows []runRow
		v := rawText(value)
		err := s.db.WithContext(ctx).Raw(s.answerSQL, leaseUntil.UTC(), by, now.UTC(), id, agentID, key, key, v, now.UTC()).Scan(&rows).Error
		switch {
		case err == nil && len(rows) == 1:
			return rows[0].run()
		case err == nil: // not parked at that pause
			r, gerr := s.Get(ctx, agentID, id)
			if gerr != nil {
				return Run{}, gerr
			}
			return r, stale(id)
		}
		// A failed statement changed nothing: the transaction below tells why (a recorded key).
	}
	var won Run
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Model(&runRow{}).
			Where("id = ? AND agent_id = ? AND status IN ? AND pause_key = ?", id, agentID, []string{AwaitingInput, Sleeping}, key).
			Updates(map[string]any{
				"status":      Running,
				"attempt":     gorm.Expr("attempt + 1"),
				"executions":  1,
				"lease_until": leaseUntil.UTC(),
				"answered_by": by,
				"updated_at":  now.UTC(),
			})
		if res.Error != nil {
			return fmt.Errorf("durable: answer %s: %w", id, res.Error)
		}
		if res.RowsAffected == 0 {
			return stale(id)
		}
		r, err := s.get(tx, agentID, id)
		if err != nil {
			return err
		}
		if err := s.record(tx, id, r.Attempt, Entry{Key: key, Value: value, At: now}); err != nil {
			return err
		}
		won = r
		return nil
	})
	switch {
	case errors.Is(err, ErrStale), errors.Is(err, ErrRecorded):
		r, gerr := s.Get(ctx, agentID, id)
		if gerr != nil {
			return Run{}, gerr
		}
		return r, err
	case err != nil:
		return Run{}, err
	}
	return won, nil
}

// Settle implements Store.
func (s *DB) Settle(ctx context.Context, r Run) (Run, error) {
	row, err := toRow(r)
	if err != nil {
		return Run{}, err
	}
	res := s.db.WithContext(ctx).Model(&runRow{}).
		Where("id = ? AND agent_id = ? AND status = ? AND attempt = ?", r.ID, r.AgentID, Running, r.Attempt).
		Updates(map[string]any{
			"status":     row.Status,
			"pause":      row.Pause,
			"pause_key":  row.PauseKey,
			"result":     row.Result,
			"error":      row.Error,
			"updated_at": settledAt(r),
		})
	if res.Error != nil {
		return Run{}, fmt.Errorf("durable: settle %s: %w", r.ID, res.Error)
	}
	return s.after(ctx, r.AgentID, r.ID, res.RowsAffected)
}

// Cancel implements Store.
func (s *DB) Cancel(ctx context.Context, agentID, id string, now time.Time) (Run, error) {
	res := s.db.WithContext(ctx).Model(&runRow{}).
		Where("id = ? AND agent_id = ? AND status NOT IN ?", id, agentID, []string{Completed, Failed, Cancelled}).
		Updates(map[string]any{"status": Cancelled, "updated_at": now.UTC()})
	if res.Error != nil {
		return Run{}, fmt.Errorf("durable: cancel %s: %w", id, res.Error)
	}
	return s.after(ctx, agentID, id, res.RowsAffected)
}

// CountByStatus counts the runs of every agent by status (for the svc_durable_runs gauge).
func (s *DB) CountByStatus(ctx context.Context) (map[string]int64, error) {
	var rows []struct {
		Status string
		N      int64
	}
	if err := s.db.WithContext(ctx).Model(&runRow{}).Select("status, COUNT(*) AS n").Group("status").Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("durable: count runs: %w", err)
	}
	out := make(map[string]int64, len(rows))
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}
