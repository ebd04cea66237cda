package dbstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"svc/migrations"
	"svc/registry"
	"svc/runner/sessions"
)

// Store is a sessions.Store over a migrated gorm database.
type Store struct {
	db *gorm.DB
}

var (
	_ sessions.Store       = (*Store)(nil)
	_ sessions.Refresher   = (*Store)(nil)
	_ sessions.Sizer       = (*Store)(nil)
	_ sessions.RunRecorder = (*Store)(nil)
	_ sessions.TraceFinder = (*Store)(nil)
)

// New returns a store over db, which must carry migration 00003.
func New(db *gorm.DB) *Store { return &Store{db: db} }

type messageRow struct {
	SessionID string `gorm:"primaryKey"`
	Seq       int    `gorm:"primaryKey"`
	Role      string
	Payload   string
	CreatedAt time.Time `gorm:"autoCreateTime:false"`
}

// TableName names the table for gorm.
func (messageRow) TableName() string { return "session_messages" }

// Load implements sessions.Store.
func (st *Store) Load(ctx context.Context, id string) (*sessions.Session, error) {
	s, err := st.record(ctx, id)
	if err != nil {
		return nil, err
	}
	return s, st.loadMessages(ctx, s, 0)
}

// record reads the session record of id, without messages.
func (st *Store) record(ctx context.Context, id string) (*sessions.Session, error) {
	var row registry.SessionRow
	err := st.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, sessions.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("load session: %w", err)
	}
	return fromRow(&row)
}

// loadMessages appends the entries of s from sequence number from on to s.Messages.
func (st *Store) loadMessages(ctx context.Context, s *sessions.Session, from int) error {
	var msgs []messageRow
	if err := st.db.WithContext(ctx).Where("session_id = ? AND seq >= ?", s.ID, from).Order("seq").Find(&msgs).Error; err != nil {
		return fmt.Errorf("load session messages: %w", err)
	}
	for i := range msgs {
		if msgs[i].Seq != from+i {
			return fmt.Errorf("load session %s: message %d missing", s.ID, from+i)
		}
		var e sessions.Entry
		if err := json.Unmarshal([]byte(msgs[i].Payload), &e); err != nil {
			return fmt.Errorf("load session %s message %d: %w", s.ID, msgs[i].Seq, err)
		}
		s.Messages = append(s.Messages, e)
	}
	return nil
}

// Refresh implements sessions.Refresher: one read of the record, one of the newer entries, in
// one snapshot (a repeatable-read transaction), so that a delete and a new session of the same
// id between the two reads cannot mix the two histories.
func (st *Store) Refresh(ctx context.Context, have *sessions.Session) (*sessions.Session, error) {
	var s *sessions.Session
	err := st.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		in := &Store{db: tx}
		var err error
		if s, err = in.record(ctx, have.ID); err != nil {
			return err
		}
		from := len(have.Messages)
		// The database may round the creation time to microseconds.
		if d := s.CreatedAt.Sub(have.CreatedAt); d <= -time.Microsecond || d >= time.Microsecond {
			from = 0 // deleted and created anew: none of have's entries are its own
		}
		s.Messages = make([]sessions.Entry, from, from+4)
		copy(s.Messages, have.Messages)
		return in.loadMessages(ctx, s, from)
	}, &sql.TxOptions{Isolation: st.snapshot(), ReadOnly: true})
	if err != nil {
		return nil, err
	}
	return s, nil
}

// snapshot is the isolation level of a consistent read: repeatable read on Postgres; SQLite's
// transactions are serializable already.
func (st *Store) snapshot() sql.IsolationLevel {
	if migrations.DialectOf(st.db) == migrations.Postgres {
		return sql.LevelRepeatableRead
	}
	return sql.LevelDefault
}

// Save implements sessions.Store: the record and the new messages in one transaction.
func (st *Store) Save(ctx context.Context, s *sessions.Session, from int) error {
	return st.SaveRun(ctx, s, from, nil)
}

// SaveRun implements sessions.RunRecorder: Save, with run's row (runs.go) inserted in the same
// transaction unless run is nil or its ID is recorded already.
func (st *Store) SaveRun(ctx context.Context, s *sessions.Session, from int, run *sessions.Run) error {
	row, err := toRow(s)
	if err != nil {
		return err
	}
	var rr *registry.RunRow
	if run != nil {
		if rr, err = toRunRow(run); err != nil {
			return err
		}
	}
	from = max(from, 0)
	msgs := make([]messageRow, 0, max(len(s.Messages)-from, 0))
	for i := from; i < len(s.Messages); i++ {
		e := &s.Messages[i]
		payload, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("save session %s message %d: %w", s.ID, i, err)
		}
		msgs = append(msgs, messageRow{SessionID: s.ID, Seq: i, Role: string(e.Role), Payload: string(payload), CreatedAt: e.At.UTC()})
	}
	err = st.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "id"}}, UpdateAll: true}).Create(row).Error; err != nil {
			return err
		}
		rest, err := insertRunWithMessages(tx, rr, msgs)
		if err != nil {
			return err
		}
		if rest.msgs != nil {
			if err := tx.Clauses(clause.OnConflict{DoNothing: true}).CreateInBatches(rest.msgs, messageBatch).Error; err != nil {
				return err
			}
		}
		if rest.run == nil {
			return nil
		}
		return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(rest.run).Error
	})
	if err != nil {
		return fmt.Errorf("save session: %w", err)
	}
	return nil
}

// List implements sessions.Store.
func (st *Store) List(ctx context.Context, q sessions.Query) ([]*sessions.Session, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = sessions.DefaultListLimit
	}
	tx := st.db.WithContext(ctx).Where("agent_id = ?", q.AgentID)
	if q.ScopeID != "" {
		tx = tx.Where("scope_id = ?", q.ScopeID)
	}
	for _, k := range slices.Sorted(maps.Keys(q.Metadata)) {
		tx = migrations.WhereJSONKey(tx, "metadata", k, q.Metadata[k])
	}
	var rows []registry.SessionRow
	if err := tx.Order("updated_at DESC").Order("id").Limit(limit).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("list sessions: %w", err)
	}
	out := make([]*sessions.Session, 0, len(rows))
	for i := range rows {
		s, err := fromRow(&rows[i])
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Delete implements sessions.Store: the record, its history and its runs.
func (st *Store) Delete(ctx context.Context, id string) error {
	var n int64
	err := st.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("session_id = ?", id).Delete(&messageRow{}).Error; err != nil {
			return err
		}
		if err := tx.Where("session_id = ?", id).Delete(&registry.RunRow{}).Error; err != nil {
			return err
		}
		res := tx.Where("id = ?", id).Delete(&registry.SessionRow{})
		n = res.RowsAffected
		return res.Error
	})
	if err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	if n == 0 {
		return sessions.ErrNotFound
	}
	return nil
}

func toRow(s *sessions.Session) (*registry.SessionRow, error) {
	model, err := json.Marshal(s.Model)
	if err != nil {
		return nil, fmt.Errorf("save session %s: model: %w", s.ID, err)
	}
	meta, err := marshalMap(s.Metadata)
	if err != nil {
		return nil, fmt.Errorf("save session %s: metadata: %w", s.ID, err)
	}
	ctxJSON, err := marshalMap(s.Context)
	if err != nil {
		return nil, fmt.Errorf("save session %s: context: %w", s.ID, err)
	}
	state, err := json.Marshal(s.State)
	if err != nil {
		return nil, fmt.Errorf("save session %s: state: %w", s.ID, err)
	}
	status := s.Status
	if status == "" {
		status = sessions.StatusIdle
	}
	return &registry.SessionRow{
		ID: s.ID, AgentID: s.AgentID, Owner: s.Owner, ScopeID: s.ScopeID, Agent: s.Agent, Skill: s.Skill,
		DeployID: s.DeployID, Model: string(model), MaxSessionTokens: int64(s.MaxSessionTokens),
		TokensUsed: int64(s.Usage.Total()), InputTokens: int64(s.Usage.InputTokens),
		OutputTokens: int64(s.Usage.OutputTokens), CachedTokens: int64(s.Usage.CachedTokens), StoredBytes: s.StoredBytes,
		Title: s.Title, Status: status, Metadata: meta, Context: ctxJSON, State: string(state),
		CreatedAt: s.CreatedAt.UTC(), UpdatedAt: s.UpdatedAt.UTC(),
	}, nil
}

func fromRow(r *registry.SessionRow) (*sessions.Session, error) {
	s := &sessions.Session{
		ID: r.ID, AgentID: r.AgentID, Owner: r.Owner, ScopeID: r.ScopeID, Agent: r.Agent, Skill: r.Skill,
		DeployID: r.DeployID, MaxSessionTokens: int(r.MaxSessionTokens),
		Usage:       sessions.Usage{InputTokens: int(r.InputTokens), OutputTokens: int(r.OutputTokens), CachedTokens: int(r.CachedTokens)},
		StoredBytes: r.StoredBytes, Title: r.Title, Status: r.Status, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
	}
	if err := json.Unmarshal([]byte(r.Model), &s.Model); err != nil {
		return nil, fmt.Errorf("load session %s: model: %w", r.ID, err)
	}
	if err := unmarshalMap(r.Metadata, &s.Metadata); err != nil {
		return nil, fmt.Errorf("load session %s: metadata: %w", r.ID, err)
	}
	if err := unmarshalMap(r.Context, &s.Context); err != nil {
		return nil, fmt.Errorf("load session %s: context: %w", r.ID, err)
	}
	if err := json.Unmarshal([]byte(r.State), &s.State); err != nil {
		return nil, fmt.Errorf("load session %s: state: %w", r.ID, err)
	}
	return s, nil
}

// AgentStoredBytes implements sessions.Sizer: one indexed sum over the agent's sessions.
func (st *Store) AgentStoredBytes(ctx context.Context, agentID string) (int64, error) {
	var n int64
	err := st.db.WithContext(ctx).Model(&registry.SessionRow{}).Where("agent_id = ?", agentID).Select("COALESCE(SUM(stored_bytes), 0)").Scan(&n).Error
	if err != nil {
		return 0, fmt.Errorf("sum stored bytes of agent %s: %w", agentID, err)
	}
	return n, nil
}

func marshalMap(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func unmarshalMap(s string, m *map[string]string) error {
	if s == "" || s == "{}" {
		*m = nil
		return nil
	}
	return json.Unmarshal([]byte(s), m)
}

// Running implements sessions.RunningLister: the sessions of every agent whose status is
// running, at most 10,000.
func (st *Store) Running(ctx context.Context) ([]string, error) {
	var ids []string
	if err := st.db.WithContext(ctx).Model(&registry.SessionRow{}).Where("status = ?", sessions.StatusRunning).Limit(10_000).Pluck("id", &ids).Error; err != nil {
		return nil, fmt.Errorf("list running sessions: %w", err)
	}
	return ids, nil
}
