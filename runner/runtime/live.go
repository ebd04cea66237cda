package runtime

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"sync"

	"svc/auth"
	"svc/runner/loop"
	"svc/runner/sessions"
)

// liveSession is a session held in memory between requests. Lock order: Runtime.mu before
// liveSession.mu; saveMu before mu.
type liveSession struct {
	id        string // s.ID, which never changes: readable without mu
	mu        sync.Mutex
	s         *sessions.Session
	stored    int         // entries of s.Messages already in the store
	persisted bool        // the record exists in the store
	queue     *loop.Queue // non-nil while a turn runs
	lastUsed  time.Time

	saveMu sync.Mutex // orders the saves of this session, so a later state is never overwritten by an earlier one
}

// newLive returns a live session holding s.
func (rt *Runtime) newLive(s *sessions.Session, persisted bool) *liveSession {
	l := &liveSession{id: s.ID, s: s, persisted: persisted, lastUsed: rt.now()}
	if persisted {
		l.stored = len(s.Messages)
	}
	return l
}

// isPersisted reports whether the session is in the store.
func (l *liveSession) isPersisted() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.persisted
}

// seenBy reports whether c may see the session (spec 4.6).
func (l *liveSession) seenBy(c *caller) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return c.sees(l.s)
}

// errOtherAgent is lookup's answer for an id taken by another agent's session in a shared
// store: hidden like a session of another user, and never to be overwritten.
var errOtherAgent = errors.New("runtime: session belongs to another agent")

// newSessionID returns a fresh session id.
func newSessionID() string { return auth.NewID("ses_") }

// lookup returns the live session id, loading it from the store when it is not in memory.
// A session that does not exist is sessions.ErrNotFound.
func (rt *Runtime) lookup(ctx context.Context, id string) (*liveSession, error) {
	l, _, err := rt.cached(ctx, id)
	return l, err
}

// cached is lookup; loaded reports a session read from the store just now.
func (rt *Runtime) cached(ctx context.Context, id string) (l *liveSession, loaded bool, err error) {
	rt.mu.Lock()
	l, ok := rt.live[id]
	rt.mu.Unlock()
	if ok {
		return l, false, nil
	}
	s, err := rt.store.Load(ctx, id)
	if err != nil {
		if errors.Is(err, sessions.ErrNotFound) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("load session %s: %w", id, err)
	}
	if s.AgentID != rt.opts.AgentID {
		return nil, false, errOtherAgent
	}
	return rt.insert(rt.newLive(s, true)), true, nil
}

// refresh brings the live copy of an idle stored session up to date with a shared store, where
// other runtimes may have run turns on it or changed or deleted it: with one read of the record
// and one of the newer entries when the store is a sessions.Refresher, else a whole Load. It
// holds saveMu throughout, so that no save of this runtime (a PATCH, which changes the copy and
// saves it under saveMu) falls between its read and its install. A session whose turn runs
// here is current already. A deleted session is forgotten and sessions.ErrNotFound.
func (rt *Runtime) refresh(ctx context.Context, l *liveSession) error {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	l.mu.Lock()
	if l.queue != nil || !l.persisted {
		l.mu.Unlock()
		return nil
	}
	have := l.s.Clone()
	have.Messages = have.Messages[:min(l.stored, len(have.Messages))]
	l.mu.Unlock()
	var fresh *sessions.Session
	var err error
	if r, ok := rt.store.(sessions.Refresher); ok {
		fresh, err = r.Refresh(ctx, have)
	} else {
		fresh, err = rt.store.Load(ctx, have.ID)
	}
	if err == nil && fresh.AgentID != rt.opts.AgentID {
		err = errOtherAgent
	}
	if errors.Is(err, sessions.ErrNotFound) || errors.Is(err, errOtherAgent) {
		rt.forgetLive(l)
		return err
	}
	if err != nil {
		return fmt.Errorf("refresh session %s: %w", have.ID, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queue == nil { // a turn that began meanwhile holds the newer state
		l.s, l.stored = fresh, len(fresh.Messages)
	}
	return nil
}

// insert adds l unless a live session of that id exists already, which it returns instead.
func (rt *Runtime) insert(l *liveSession) *liveSession {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if cur, ok := rt.live[l.id]; ok {
		return cur
	}
	rt.live[l.id] = l
	return l
}

// forget drops a live session from memory.
func (rt *Runtime) forget(id string) {
	rt.mu.Lock()
	delete(rt.live, id)
	rt.mu.Unlock()
}

// forgetLive drops l from memory unless another live session took its id meanwhile.
func (rt *Runtime) forgetLive(l *liveSession) {
	rt.mu.Lock()
	if rt.live[l.id] == l {
		delete(rt.live, l.id)
	}
	rt.mu.Unlock()
}

// doneWith is called when a request is done with l: over an in-memory store, an idle stored
// session is not kept live (the store holds it already); over a shared store it must not be, since
// another runtime may run the session's next turn.
func (rt *Runtime) doneWith(l *liveSession) {
	if rt.inMemory || rt.opts.SharedStore {
		rt.dropIdle(l)
	}
}

// dropIdle forgets l when it is stored and no turn runs.
func (rt *Runtime) dropIdle(l *liveSession) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	l.mu.Lock()
	idle := l.queue == nil && l.persisted
	id := l.s.ID
	l.mu.Unlock()
	if idle && rt.live[id] == l {
		delete(rt.live, id)
	}
}

// persist saves the session record and its entries not stored yet.
func (rt *Runtime) persist(ctx context.Context, l *liveSession) error {
	l.saveMu.Lock()
	defer l.saveMu.Unlock()
	return rt.persistLocked(ctx, l)
}

// persistLocked is persist for a caller holding l.saveMu.
func (rt *Runtime) persistLocked(ctx context.Context, l *liveSession) error {
	l.mu.Lock()
	snap := l.s.Clone()
	from := l.stored
	l.mu.Unlock()
	if err := rt.store.Save(ctx, snap, from); err != nil {
		return err
	}
	l.mu.Lock()
	l.stored = max(l.stored, len(snap.Messages))
	l.persisted = true
	l.mu.Unlock()
	return nil
}

// sessionFields are the settings a session takes at creation (chat or POST /sessions).
type sessionFields struct {
	scopeID   string
	agent     string
	skill     string
	deployID  string
	model     *modelChoice
	maxTokens *int64
	context   map[string]string
	metadata  map[string]string
}

// newSession builds a session that is not stored yet.
func (rt *Runtime) newSession(id string, c *caller, f sessionFields) *sessions.Session {
	now := rt.now()
	s := &sessions.Session{
		ID: id, AgentID: rt.opts.AgentID, Owner: c.userID, ScopeID: c.scopeFor(f.scopeID),
		Agent: f.agent, Skill: f.skill, DeployID: f.deployID, Status: sessions.StatusIdle,
		Context: maps.Clone(f.context), Metadata: maps.Clone(f.metadata), CreatedAt: now, UpdatedAt: now,
	}
	if s.DeployID == "" {
		s.DeployID = rt.opts.DeployID
	}
	if f.model != nil {
		s.Model = sessions.Model{Provider: f.model.Provider, Model: f.model.Model, Effort: f.model.Effort}
	}
	if f.maxTokens != nil {
		s.MaxSessionTokens = int(*f.maxTokens)
	}
	if f.skill != "" {
		s.State.ActiveSkills = []string{f.skill}
	}
	return s
}

// EvictIdle drops from memory the live sessions idle for longer than the idle timeout and not
// running a turn, and reports how many it dropped. Stored sessions are reloaded on their next
// request; prepared sessions that were never used expire. It runs periodically on its own.
func (rt *Runtime) EvictIdle() int {
	cutoff := rt.now().Add(-rt.idle)
	rt.mu.Lock()
	defer rt.mu.Unlock()
	n := 0
	for id, l := range rt.live {
		l.mu.Lock()
		idle := l.queue == nil && l.lastUsed.Before(cutoff)
		l.mu.Unlock()
		if idle {
			delete(rt.live, id)
			n++
		}
	}
	return n
}

// LiveSessions reports how many sessions are held in memory.
func (rt *Runtime) LiveSessions() int {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return len(rt.live)
}

// evictLoop runs EvictIdle until Close.
func (rt *Runtime) evictLoop() {
	defer rt.wg.Done()
	every := min(max(rt.idle/4, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-rt.done:
			return
		case <-t.C:
			if n := rt.EvictIdle(); n > 0 {
				rt.log.Debug("evicted idle sessions", "count", n)
			}
		}
	}
}
