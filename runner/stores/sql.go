package stores

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"

	"svc/migrations"
)

// maxSetAttempts bounds the retries of a Set that lost a race for a new key.
const maxSetAttempts = 8

// SQL is a Backend over a SQLite or Postgres database that carries the store tables (the
// platform database from migration 00009 on, or a database Open migrated itself). One SQL
// serves one agent: every statement is bound to its agent id.
//
// A Set is one transaction. On Postgres it locks the key's current row (SELECT ... FOR UPDATE),
// so concurrent sets of a key queue; two sets that both create a key collide on the primary
// key and the loser starts over. SQLite transactions take the write lock when they begin
// (migrations.OpenRaw sets _txlock=immediate), so writes queue there too. The update of the
// current row also compares the version it read (compare-and-set) as a last guard: a version is
// never written twice or lost.
type SQL struct {
	db      *gorm.DB
	agentID string
	pg      bool
	owned   bool // Close closes db
}

var _ Backend = (*SQL)(nil)

// NewSQL returns the backend of agent agentID over db, which must carry the store tables
// (migration 00009 of the platform database). Close leaves db open.
func NewSQL(db *gorm.DB, agentID string) *SQL {
	return &SQL{db: db, agentID: agentID, pg: migrations.DialectOf(db) == migrations.Postgres}
}

// recordRow is one row of store_records or store_versions, as read.
type recordRow struct {
	RecordKey  string
	Version    int64
	Value      string
	UpdatedAt  time.Time
	SessionID  string
	ToolCallID string
}

const columns = "record_key, version, value, updated_at, session_id, tool_call_id"

func (s *SQL) toRecord(row *recordRow) (Record, error) {
	value := json.RawMessage(row.Value)
	if s.pg { // jsonb comes back with its own spacing and key order
		var err error
		if value, err = canonical([]byte(row.Value)); err != nil {
			return Record{}, fmt.Errorf("read record %q version %d: %w", row.RecordKey, row.Version, err)
		}
	}
	return Record{
		Key: row.RecordKey, Version: row.Version, Value: value, UpdatedAt: row.UpdatedAt.UTC(),
		Trace: traceOf(Trace{SessionID: row.SessionID, ToolCallID: row.ToolCallID}),
	}, nil
}

func (s *SQL) toRecords(rows []recordRow) ([]Record, error) {
	out := make([]Record, len(rows))
	for i := range rows {
		var err error
		if out[i], err = s.toRecord(&rows[i]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// jsonParam is the placeholder of a JSON value: Postgres casts the text to jsonb.
func (s *SQL) jsonParam() string {
	if s.pg {
		return "CAST(? AS jsonb)"
	}
	return "?"
}

// Get implements Backend.
func (s *SQL) Get(ctx context.Context, store, key string) (Record, error) {
	var rows []recordRow
	err := s.db.WithContext(ctx).Raw("SELECT "+columns+" FROM store_records WHERE agent_id = ? AND store = ? AND record_key = ?",
		s.agentID, store, key).Scan(&rows).Error
	if err != nil {
		return Record{}, fmt.Errorf("get %s/%s: %w", store, key, err)
	}
	if len(rows) == 0 {
		return Record{}, ErrNotFound
	}
	return s.toRecord(&rows[0])
}

// errRace is a compare-and-set that found another version than the one it read.
var errRace = errors.New("stores: the record changed during the write")

// Set implements Backend.
func (s *SQL) Set(ctx context.Context, store, key string, value json.RawMessage, w Write) (Record, error) {
	for attempt := 1; ; attempt++ {
		rec, err := s.setOnce(ctx, store, key, value, w)
		if err == nil {
			return rec, nil
		}
		if (errors.Is(err, gorm.ErrDuplicatedKey) || errors.Is(err, errRace)) && attempt < maxSetAttempts && ctx.Err() == nil {
			continue // another set created or changed the key first: read it again
		}
		return Record{}, fmt.Errorf("set %s/%s: %w", store, key, err)
	}
}

func (s *SQL) setOnce(ctx context.Context, store, key string, value json.RawMessage, w Write) (Record, error) {
	rec := Record{Key: key, Value: value, UpdatedAt: w.At.UTC(), Trace: traceOf(w.Trace)}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		pk := []any{s.agentID, store, key}
		lock := ""
		if s.pg {
			lock = " FOR UPDATE"
		}
		var cur []int64
		if err := tx.Raw("SELECT version FROM store_records WHERE agent_id = ? AND store = ? AND record_key = ?"+lock, pk...).Scan(&cur).Error; err != nil {
			return err
		}
		if len(cur) == 0 {
			// A new key starts clean: nothing of a deleted namesake may stay.
			if err := tx.Exec("DELETE FROM store_versions WHERE agent_id = ? AND store = ? AND record_key = ?", pk...).Error; err != nil {
				return err
			}
			rec.Version = 1
			return tx.Exec("INSERT INTO store_records (agent_id, store, record_key, version, value, updated_at, session_id, tool_call_id) VALUES (?, ?, ?, ?, "+s.jsonParam()+", ?, ?, ?)",
				s.agentID, store, key, rec.Version, string(value), rec.UpdatedAt, w.Trace.SessionID, w.Trace.ToolCallID).Error
		}
		prev := cur[0]
		rec.Version = prev + 1
		if w.Keep > 0 {
			if err := tx.Exec("INSERT INTO store_versions (agent_id, store, "+columns+") SELECT agent_id, store, "+columns+
				" FROM store_records WHERE agent_id = ? AND store = ? AND record_key = ?", pk...).Error; err != nil {
				return err
			}
		}
		res := tx.Exec("UPDATE store_records SET version = ?, value = "+s.jsonParam()+", updated_at = ?, session_id = ?, tool_call_id = ? WHERE agent_id = ? AND store = ? AND record_key = ? AND version = ?",
			rec.Version, string(value), rec.UpdatedAt, w.Trace.SessionID, w.Trace.ToolCallID, s.agentID, store, key, prev)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected != 1 {
			return errRace
		}
		// Keep the versions prev-Keep+1 .. prev.
		return tx.Exec("DELETE FROM store_versions WHERE agent_id = ? AND store = ? AND record_key = ? AND version <= ?", s.agentID, store, key, prev-int64(w.Keep)).Error
	})
	if err != nil {
		return Record{}, err
	}
	rec.Value = append(json.RawMessage(nil), value...)
	return rec, nil
}

// Query implements Backend.
func (s *SQL) Query(ctx context.Context, store string, m Match) ([]Record, error) {
	var where strings.Builder
	args := []any{s.agentID, store}
	where.WriteString("agent_id = ? AND store = ?")
	for _, f := range m.Filters {
		cond, fargs, err := s.filter(f)
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", store, err)
		}
		where.WriteString(" AND ")
		where.WriteString(cond)
		args = append(args, fargs...)
	}
	args = append(args, m.Limit)
	var rows []recordRow
	err := s.db.WithContext(ctx).Raw("SELECT "+columns+" FROM store_records r WHERE "+where.String()+
		" ORDER BY updated_at DESC, record_key LIMIT ?", args...).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", store, err)
	}
	return s.toRecords(rows)
}

// filter is the condition of one filter and its arguments. Postgres compares jsonb values
// (numbers by value, and a string never equals a number). SQLite reads the field with
// json_each, whose key column is the field's name as written, so no name needs quoting in a
// JSON path, and checks the JSON type as well as the value.
func (s *SQL) filter(f Filter) (string, []any, error) {
	if s.pg {
		enc, err := json.Marshal(f.Value)
		if err != nil {
			return "", nil, fmt.Errorf("filter %q: %w", f.Field, err)
		}
		return "r.value -> ? = CAST(? AS jsonb)", []any{f.Field, string(enc)}, nil
	}
	const each = "EXISTS (SELECT 1 FROM json_each(r.value) AS f WHERE f.key = ? AND "
	switch v := f.Value.(type) {
	case string:
		return each + "f.type = 'text' AND f.atom = ?)", []any{f.Field, v}, nil
	case bool:
		t := "false"
		if v {
			t = "true"
		}
		return each + "f.type = '" + t + "')", []any{f.Field}, nil
	case int64, float64:
		return each + "f.type IN ('integer', 'real') AND f.atom = ?)", []any{f.Field, v}, nil
	}
	return "", nil, fmt.Errorf("filter %q: cannot compare a %T", f.Field, f.Value)
}

// Delete implements Backend. The current row goes first: on Postgres that waits for a set of
// the key that holds its lock, so the earlier versions that set adds are deleted next.
func (s *SQL) Delete(ctx context.Context, store, key string) (bool, error) {
	var n int64
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		res := tx.Exec("DELETE FROM store_records WHERE agent_id = ? AND store = ? AND record_key = ?", s.agentID, store, key)
		if res.Error != nil {
			return res.Error
		}
		n = res.RowsAffected
		return tx.Exec("DELETE FROM store_versions WHERE agent_id = ? AND store = ? AND record_key = ?", s.agentID, store, key).Error
	})
	if err != nil {
		return false, fmt.Errorf("delete %s/%s: %w", store, key, err)
	}
	return n > 0, nil
}

// History implements Backend: the current row and the earlier ones in one statement, so one
// snapshot.
func (s *SQL) History(ctx context.Context, store, key string, keep int) ([]Record, error) {
	var rows []recordRow
	err := s.db.WithContext(ctx).Raw("SELECT "+columns+" FROM store_records WHERE agent_id = ? AND store = ? AND record_key = ?"+
		" UNION ALL SELECT "+columns+" FROM store_versions WHERE agent_id = ? AND store = ? AND record_key = ?"+
		" ORDER BY version DESC LIMIT ?", s.agentID, store, key, s.agentID, store, key, keep+1).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("history %s/%s: %w", store, key, err)
	}
	return s.toRecords(rows)
}

// Close implements Backend: it closes the database only when Open opened it.
func (s *SQL) Close() error {
	if !s.owned {
		return nil
	}
	sqlDB, err := s.db.DB()
	if err != nil {
		return fmt.Errorf("close stores database: %w", err)
	}
	return sqlDB.Close()
}
