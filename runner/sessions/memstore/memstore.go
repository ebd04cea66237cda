package memstore

import (
	"cmp"
	"context"
	"slices"
	"sync"

	"svc/runner/sessions"
)

// Store is an in-memory sessions.Store. Its zero value is not ready; use New.
type Store struct {
	mu   sync.RWMutex
	recs map[string]*record
}

type record struct {
	s    sessions.Session // Messages nil
	msgs []sessions.Entry // owned by the store; handed out with clipped capacity
}

var (
	_ sessions.Store    = (*Store)(nil)
	_ sessions.InMemory = (*Store)(nil)
	_ sessions.Sizer    = (*Store)(nil)
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
func New() *Store { return &Store{recs: make(map[string]*record)} }

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
	c := s.Clone()
	c.Messages = nil
	st.mu.Lock()
	defer st.mu.Unlock()
	rec, ok := st.recs[s.ID]
	if !ok {
		rec = &record{}
		st.recs[s.ID] = rec
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
	if _, ok := st.recs[id]; !ok {
		return sessions.ErrNotFound
	}
	delete(st.recs, id)
	return nil
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
