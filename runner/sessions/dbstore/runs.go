package dbstore

import (
	"context"
	"fmt"
	"strings"

	"gorm.io/gorm"

	"svc/migrations"
	"svc/registry"
	"svc/runner/sessions"
)

func toRunRow(r *sessions.Run) (*registry.RunRow, error) {
	meta, err := marshalMap(r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("record run %s: metadata: %w", r.ID, err)
	}
	kind := r.Kind
	if kind == "" {
		kind = sessions.RunChat
	}
	return &registry.RunRow{
		ID: r.ID, AgentID: r.AgentID, DeployID: r.DeployID, SessionID: r.SessionID, Kind: kind, Reason: r.Reason,
		Provider: r.Provider, Model: r.Model, Steps: r.Steps,
		InputTokens: int64(r.Usage.InputTokens), OutputTokens: int64(r.Usage.OutputTokens), CachedTokens: int64(r.Usage.CachedTokens),
		TraceID: r.TraceID, UserID: r.UserID, AuthMethod: r.AuthMethod,
		UserKey: r.Metadata["userId"], Screen: r.Metadata["screen"], Metadata: meta,
		StartedAt: r.StartedAt.UTC(), EndedAt: r.EndedAt.UTC(),
	}, nil
}

// TraceSession implements sessions.TraceFinder: the session of the agent's run traced as
// traceID (index runs_agent_trace, migration 00015).
func (st *Store) TraceSession(ctx context.Context, agentID, traceID string) (string, error) {
	if traceID == "" {
		return "", sessions.ErrNoTrace
	}
	var ids []string
	err := st.db.WithContext(ctx).Model(&registry.RunRow{}).Where("agent_id = ? AND trace_id = ?", agentID, traceID).Limit(1).Pluck("session_id", &ids).Error
	if err != nil {
		return "", fmt.Errorf("find the run of trace %s: %w", traceID, err)
	}
	if len(ids) == 0 {
		return "", sessions.ErrNoTrace
	}
	return ids[0], nil
}

// messageBatch is how many history entries one insert carries.
const messageBatch = 200

// unsaved is what insertRunWithMessages left for the caller to insert: a run (nil when none) and
// entries (nil when none).
type unsaved struct {
	run  *registry.RunRow
	msgs []messageRow
}

// insertRunWithMessages inserts, on Postgres, the run rr and the first batch of msgs in one
// statement: the run's insert is a data-modifying CTE of the entries' insert, so that recording
// a run costs the save at a turn's end no round trip of its own (a turn's end stores its answer:
// there are entries). It returns what it did not insert: everything on SQLite (no
// data-modifying CTEs there, and no network round trip to save), or when rr or msgs is empty.
// Both inserts keep what is stored already (ON CONFLICT DO NOTHING), as the separate ones do.
func insertRunWithMessages(tx *gorm.DB, rr *registry.RunRow, msgs []messageRow) (unsaved, error) {
	if rr == nil || len(msgs) == 0 || migrations.DialectOf(tx) != migrations.Postgres {
		return unsaved{run: rr, msgs: nilIfEmpty(msgs)}, nil
	}
	first := msgs[:min(len(msgs), messageBatch)]
	run, args := rr.InsertSQL(make([]any, 0, 20+5*len(first)))
	var q strings.Builder
	q.WriteString("WITH run AS (" + run + ") INSERT INTO session_messages (session_id, seq, role, payload, created_at) VALUES ")
	for i := range first {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		m := &first[i]
		args = append(args, m.SessionID, m.Seq, m.Role, m.Payload, m.CreatedAt)
	}
	q.WriteString(" ON CONFLICT DO NOTHING")
	if err := tx.Exec(q.String(), args...).Error; err != nil {
		return unsaved{}, fmt.Errorf("record run %s: %w", rr.ID, err)
	}
	return unsaved{msgs: nilIfEmpty(msgs[len(first):])}, nil
}

func nilIfEmpty(msgs []messageRow) []messageRow {
	if len(msgs) == 0 {
		return nil
	}
	return msgs
}
