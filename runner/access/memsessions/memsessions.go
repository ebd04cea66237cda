// Package memsessions keeps browser sessions in memory: for svc dev, where one process is every
// runner, and for tests. Sessions are lost on restart.
package memsessions

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"svc/runner/access"
)

// Store is an access.Sessions in memory. Safe for concurrent use.
type Store struct {
	mu       sync.Mutex
	sessions map[string]access.BrowserSession
	reads    int
}

var _ access.Sessions = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{sessions: map[string]access.BrowserSession{}} }

// Create stores s; an id already held is an error.
func (st *Store) Create(ctx context.Context, s access.BrowserSession) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if _, ok := st.sessions[s.ID]; ok {
		return fmt.Errorf("memsessions: session %s exists", s.ID)
	}
	s.Groups = slices.Clone(s.Groups)
	st.sessions[s.ID] = s
	return nil
}

// Get returns the session with id, or access.ErrSessionNotFound.
func (st *Store) Get(ctx context.Context, id string) (access.BrowserSession, error) {
	if err := ctx.Err(); err != nil {
		return access.BrowserSession{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	st.reads++
	s, ok := st.sessions[id]
	if !ok {
		return access.BrowserSession{}, access.ErrSessionNotFound
	}
	s.Groups = slices.Clone(s.Groups)
	return s, nil
}

// End records the end of the session with id; the first end wins.
func (st *Store) End(ctx context.Context, id string, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	s, ok := st.sessions[id]
	if !ok {
		return access.ErrSessionNotFound
	}
	if s.EndedAt.IsZero() {
		s.EndedAt = at
		st.sessions[id] = s
	}
	return nil
}

// Reads is how many times Get was called: tests use it to see what a cache spared the store.
func (st *Store) Reads() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.reads
}
