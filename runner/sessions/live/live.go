// Package live keeps the sessions a runtime holds in memory between requests: looked up in the
// store on first use, refreshed from a store that other runtimes share, saved in order, dropped
// when idle. It knows no HTTP and no caller: who may see a session is package turn's business.
//
// Lock order: a session's turn lock (sessions.Locker, taken by package turn, which acquires
// every session a turn or a change uses) before anything here; then the Cache's lock before a
// Session's lock, and a Session's save lock (taken by Persist, Refresh and Update) before its
// lock. Nothing here holds a Session's lock while it talks to the store.
package live

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"svc/runner/loop"
	"svc/runner/sessions"
)

// ErrOtherAgent is Get's and Refresh's answer for an id taken by another agent's session in a
// shared store: to be hidden like a missing session, and never overwritten.
var ErrOtherAgent = errors.New("live: session belongs to another agent")

// Session is a session held in memory. Its lock guards the fields after it; ID never changes.
type Session struct {
	ID string

	sync.Mutex
	// S is the session; the caller changes it under the lock.
	S *sessions.Session
	// Stored counts the entries of S.Messages already in the store.
	Stored int
	// Persisted reports that the record exists in the store.
	Persisted bool
	// Turn is the queue of the turn that runs on the session, nil when none runs.
	Turn *loop.Queue
	// LastUsed is when a request last used the session (idle eviction).
	LastUsed time.Time

	save sync.Mutex // orders the saves of the session, so a later state is never overwritten by an earlier one
}

// Config is what a Cache works on. Zero values are documented defaults.
type Config struct {
	// Store keeps the sessions. Required.
	Store sessions.Store
	// AgentID is the agent whose sessions the cache holds; a stored session of another agent is
	// ErrOtherAgent. "" under svc dev.
	AgentID string
	// Shared says that other runtimes use the same store: an idle session is not kept between
	// requests, since another runtime may run its next turn.
	Shared bool
	// Idle is how long an unused session stays in memory (EvictIdle).
	Idle time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Cache holds live sessions by id. It is safe for concurrent use.
type Cache struct {
	cfg      Config
	inMemory bool // the store keeps sessions in memory: idle stored sessions are not kept twice

	mu   sync.Mutex
	live map[string]*Session
}

// New returns an empty cache over cfg.Store.
func New(cfg Config) *Cache {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	c := &Cache{cfg: cfg, live: map[string]*Session{}}
	if m, ok := cfg.Store.(sessions.InMemory); ok {
		c.inMemory = m.InMemory()
	}
	return c
}

// Shared reports whether other runtimes use the same store (Config.Shared).
func (c *Cache) Shared() bool { return c.cfg.Shared }

// NewSession returns a live session holding s (not in the cache until Insert); persisted says
// that s, with all its entries, is in the store already.
func (c *Cache) NewSession(s *sessions.Session, persisted bool) *Session {
	l := &Session{ID: s.ID, S: s, Persisted: persisted, LastUsed: c.cfg.Now()}
	if persisted {
		l.Stored = len(s.Messages)
	}
	return l
}

// Lookup is Get without its loaded report.
func (c *Cache) Lookup(ctx context.Context, id string) (*Session, error) {
	l, _, err := c.Get(ctx, id)
	return l, err
}

// Get returns the live session id, loading it from the store when it is not in memory (loaded
// is then true). A session that does not exist is sessions.ErrNotFound; one of another agent
// ErrOtherAgent.
func (c *Cache) Get(ctx context.Context, id string) (l *Session, loaded bool, err error) {
	c.mu.Lock()
	l, ok := c.live[id]
	c.mu.Unlock()
	if ok {
		return l, false, nil
	}
	s, err := c.cfg.Store.Load(ctx, id)
	if err != nil {
		if errors.Is(err, sessions.ErrNotFound) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("load session %s: %w", id, err)
	}
	if s.AgentID != c.cfg.AgentID {
		return nil, false, ErrOtherAgent
	}
	return c.Insert(c.NewSession(s, true)), true, nil
}

// Latest is Get for a caller that holds session id's turn lock (package turn takes it), over
// a store that other runtimes may share: a copy that was live here already (another request of
// this runtime holds it) is refreshed (Refresh), and a copy that is not stored (prepared here,
// or left by a first turn that failed to store it) gives way to a session of that id that
// another runtime stored since: the stored session wins. Over an unshared store it is Get.
func (c *Cache) Latest(ctx context.Context, id string) (*Session, error) {
	l, loaded, err := c.Get(ctx, id)
	if err != nil || !c.cfg.Shared || loaded {
		return l, err
	}
	if err := c.Refresh(ctx, l); err != nil {
		return nil, err
	}
	l.Lock()
	persisted := l.Persisted
	l.Unlock()
	if persisted {
		return l, nil
	}
	prepared := l
	c.Drop(prepared)
	l, _, err = c.Get(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) {
		return c.Insert(prepared), nil
	}
	return l, err
}

// Insert adds l unless a live session of that id exists already, which it returns instead.
func (c *Cache) Insert(l *Session) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cur, ok := c.live[l.ID]; ok {
		return cur
	}
	c.live[l.ID] = l
	return l
}

// Forget drops the live session id, whichever it is.
func (c *Cache) Forget(id string) {
	c.mu.Lock()
	delete(c.live, id)
	c.mu.Unlock()
}

// Drop drops l unless another live session took its id meanwhile.
func (c *Cache) Drop(l *Session) {
	c.mu.Lock()
	if c.live[l.ID] == l {
		delete(c.live, l.ID)
	}
	c.mu.Unlock()
}

// Done is called when a request is done with l: over an in-memory store, an idle stored session
// is not kept live (the store holds it already); over a shared store it must not be, since
// another runtime may run the session's next turn.
func (c *Cache) Done(l *Session) {
	if !c.inMemory && !c.cfg.Shared {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	l.Lock()
	idle := l.Turn == nil && l.Persisted
	l.Unlock()
	if idle && c.live[l.ID] == l {
		delete(c.live, l.ID)
	}
}

// Refresh brings the live copy of an idle stored session up to date with a shared store, where
// other runtimes may have run turns on it or changed or deleted it: with one read of the record
// and one of the newer entries when the store is a sessions.Refresher, else a whole Load. It
// holds l's save lock throughout, so that no save of this process (Update changes and saves
// under it) falls between its read and its install. A session whose turn runs here is current
// already. A deleted session is dropped and sessions.ErrNotFound.
func (c *Cache) Refresh(ctx context.Context, l *Session) error {
	l.save.Lock()
	defer l.save.Unlock()
	l.Lock()
	if l.Turn != nil || !l.Persisted {
		l.Unlock()
		return nil
	}
	have := l.S.Clone()
	have.Messages = have.Messages[:min(l.Stored, len(have.Messages))]
	l.Unlock()
	var fresh *sessions.Session
	var err error
	if r, ok := c.cfg.Store.(sessions.Refresher); ok {
		fresh, err = r.Refresh(ctx, have)
	} else {
		fresh, err = c.cfg.Store.Load(ctx, have.ID)
	}
	if err == nil && fresh.AgentID != c.cfg.AgentID {
		err = ErrOtherAgent
	}
	if errors.Is(err, sessions.ErrNotFound) || errors.Is(err, ErrOtherAgent) {
		c.Drop(l)
		return err
	}
	if err != nil {
		return fmt.Errorf("refresh session %s: %w", have.ID, err)
	}
	l.Lock()
	defer l.Unlock()
	if l.Turn == nil { // a turn that began meanwhile holds the newer state
		l.S, l.Stored = fresh, len(fresh.Messages)
	}
	return nil
}

// Persist saves the session record and its entries not stored yet.
func (c *Cache) Persist(ctx context.Context, l *Session) error {
	return c.PersistRun(ctx, l, nil)
}

// PersistRun is Persist that records run (a turn that ended) with the save, in the same
// transaction when the store is a sessions.RunRecorder (sessions.SaveRun); nil records nothing.
func (c *Cache) PersistRun(ctx context.Context, l *Session, run *sessions.Run) error {
	l.save.Lock()
	defer l.save.Unlock()
	return c.persist(ctx, l, run)
}

// persist is PersistRun for a caller holding l's save lock.
func (c *Cache) persist(ctx context.Context, l *Session, run *sessions.Run) error {
	l.Lock()
	snap := l.S.Clone()
	from := l.Stored
	l.Unlock()
	if err := sessions.SaveRun(ctx, c.cfg.Store, snap, from, run); err != nil {
		return err
	}
	l.Lock()
	l.Stored = max(l.Stored, len(snap.Messages))
	l.Persisted = true
	l.Unlock()
	return nil
}

// Update changes l with change, called under l's lock, and saves it when it is stored (a
// prepared session is saved at its first turn, with the change). The change and its save hold
// the save lock together, so a Refresh never falls between them and puts back the stored state
// without the change. An error of change is returned as it is, and nothing is saved.
func (c *Cache) Update(ctx context.Context, l *Session, change func(s *sessions.Session) error) error {
	l.save.Lock()
	defer l.save.Unlock()
	l.Lock()
	err := change(l.S)
	l.LastUsed = c.cfg.Now()
	persisted := l.Persisted
	l.Unlock()
	if err != nil || !persisted {
		return err
	}
	return c.persist(ctx, l, nil)
}

// EvictIdle drops the live sessions idle for longer than Config.Idle and not running a turn,
// and reports how many it dropped. Stored sessions are loaded again on their next request;
// prepared sessions that were never used are gone.
func (c *Cache) EvictIdle() int {
	cutoff := c.cfg.Now().Add(-c.cfg.Idle)
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for id, l := range c.live {
		l.Lock()
		idle := l.Turn == nil && l.LastUsed.Before(cutoff)
		l.Unlock()
		if idle {
			delete(c.live, id)
			n++
		}
	}
	return n
}

// Len reports how many sessions are held in memory.
func (c *Cache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.live)
}
