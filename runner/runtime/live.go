package runtime

import (
	"maps"
	"time"

	"svc/auth"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
)

// isPersisted reports whether the session is in the store.
func isPersisted(l *live.Session) bool {
	l.Lock()
	defer l.Unlock()
	return l.Persisted
}

// seenBy reports whether c may see the session (spec 4.6).
func seenBy(l *live.Session, c *caller) bool {
	l.Lock()
	defer l.Unlock()
	return c.sees(l.S)
}

// newSessionID returns a fresh session id.
func newSessionID() string { return auth.NewID("ses_") }

// newFeedbackID returns a fresh feedback id.
func newFeedbackID() string { return auth.NewID("fb_") }

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
func (rt *Runtime) EvictIdle() int { return rt.cache.EvictIdle() }

// LiveSessions reports how many sessions are held in memory.
func (rt *Runtime) LiveSessions() int { return rt.cache.Len() }

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
