package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"svc/runner/sessions"
)

// Store is an in-memory sessions.Store. Its zero value is not ready; use New.
//
// It is a sessions.RunRecorder that keeps of each run only its trace id, for TraceSession
// (POST /feedback checks a trace_id with it); svc dev lists no runs.
type Store struct {
	mu   sync.RWMutex
	recs map[string]*record
	// traces maps the trace id of each traced run to its session; a session's go with it.
	traces map[string]traceOf
}

type record struct {
	s      sessions.Session // Messages nil
	msgs   []sessions.Entry // owned by the store; handed out with clipped capacity
	traces []string         // the trace ids of the session's runs
}

// traceOf is the agent and session of a traced run.
type traceOf struct{ agentID, sessionID string }

var (
	_ sessions.Store       = (*Store)(nil)
	_ sessions.InMemory    = (*Store)(nil)
	_ sessions.Sizer       = (*Store)(nil)
	_ sessions.RunRecorder = (*Store)(nil)
	_ sessions.TraceFinder = (*Store)(nil)
)

// AgentStoredBytes implements sessions.Sizer.
func (st *Store) AgentStoredBytes(_ context.Context, agentID string) (int64, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var n int64
	for _, rec := range st.recs {
		if rec.s.AgentID == agentID {
			n += rec.s.StoredBytes
		}
	}
	return n, nil
}

// InMemory implements sessions.InMemory: it reports true.
func (st *Store) InMemory() bool { return true }

// New returns an empty store.
func New() *Store { return &Store{recs: make(map[string]*record), traces: make(map[string]traceOf)} }

// Load implements sessions.Store. The returned history shares its entries with the store.
func (st *Store) Load(ctx context.Context, id string) (*sessions.Session, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	rec, ok := st.recs[id]
	if !ok {
		return nil, sessions.ErrNotFound
	}
	s := rec.s.Clone()
	s.Messages = rec.msgs[:len(rec.msgs):len(rec.msgs)]
	return s, nil
}

// Save implements sessions.Store.
func (st *Store) Save(ctx context.Context, s *sessions.Session, from int) error {
	return st.SaveRun(ctx, s, from, nil)
}

// SaveRun implements sessions.RunRecorder: Save, keeping the trace id of run (when it has one).
func (st *Store) SaveRun(ctx context.Context, s *sessions.Session, from int, run *sessions.Run) error {
	c := s.Clone()
	c.Messages = nil
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, ok := st.recs[s.ID]
	if !ok {
		rec = &record{}
		st.recs[s.ID] = rec
	}
	if run != nil && run.TraceID != "" {
		if _, known := st.traces[run.TraceID]; !known {
			st.traces[run.TraceID] = traceOf{agentID: run.AgentID, sessionID: s.ID}
			rec.traces = append(rec.traces, run.TraceID)
		}
	}
	rec.s = *c
	// Sequence numbers are indices, so the entries not stored yet are exactly s.Messages[len(rec.msgs):]
	// (from only spares the database store a look-up). rec.msgs grows in place: callers hold
	// views clipped to their length, which never see what is appended after them.
	if n := len(rec.msgs); len(s.Messages) > n {
		rec.msgs = append(rec.msgs, s.Messages[n:]...)
	}
	return nil
}

// List implements sessions.Store.
func (st *Store) List(ctx context.Context, q sessions.Query) ([]*sessions.Session, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = sessions.DefaultListLimit
	}
	st.mu.RLock()
	out := make([]*sessions.Session, 0, min(limit, len(st.recs)))
	all := make([]*record, 0, len(st.recs))
	for _, rec := range st.recs {
		if rec.s.AgentID == q.AgentID && (q.ScopeID == "" || rec.s.ScopeID == q.ScopeID) && hasMetadata(rec.s.Metadata, q.Metadata) {
			all = append(all, rec)
		}
	}
	slices.SortFunc(all, func(a, b *record) int {
		if c := b.s.UpdatedAt.Compare(a.s.UpdatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.s.ID, b.s.ID)
	})
	for _, rec := range all[:min(limit, len(all))] {
		out = append(out, rec.s.Clone())
	}
	st.mu.RUnlock()
	return out, nil
}

// Delete implements sessions.Store.
func (st *Store) Delete(ctx context.Context, id string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, ok := st.recs[id]
	if !ok {
		return sessions.ErrNotFound
	}
	for _, tr := range rec.traces {
		delete(st.traces, tr)
	}
	delete(st.recs, id)
	return nil
}

// TraceSession implements sessions.TraceFinder.
func (st *Store) TraceSession(_ context.Context, agentID, traceID string) (string, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if t, ok := st.traces[traceID]; ok && t.agentID == agentID {
		return t.sessionID, nil
	}
	return "", sessions.ErrNoTrace
}

// hasMetadata reports whether have holds every key of want with its value.
func hasMetadata(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}
