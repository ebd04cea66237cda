package runtime

import (
	"time"

	"svc/auth"
	"svc/runner/sessions"
	"svc/runner/turn"
)

// settings are the settings of a session the chat request creates.
func (req *chatRequest) settings() turn.Settings {
	return turn.Settings{
		ScopeID: req.ScopeID, Agent: req.Agent, Skill: req.Skill, DeployID: req.DeployID,
		Model: req.Model.session(), MaxSessionTokens: budget(req.MaxSessionTokens),
	}
}

// settings are the settings of the session POST /sessions prepares.
func (body *prepareBody) settings() turn.Settings {
	return turn.Settings{
		ScopeID: body.ScopeID, Agent: body.Agent, Skill: body.Skill, DeployID: body.DeployID,
		Model: body.Model.session(), MaxSessionTokens: budget(body.MaxSessionTokens),
		Context: body.Context, Metadata: body.Metadata,
	}
}

// session is the model a session records for m; nil is none.
func (m *modelChoice) session() sessions.Model {
	if m == nil {
		return sessions.Model{}
	}
	return sessions.Model{Provider: m.Provider, Model: m.Model, Effort: m.Effort}
}

// budget is a request's max_session_tokens as a session records it; nil is 0, none.
func budget(maxTokens *int64) int {
	if maxTokens == nil {
		return 0
	}
	return int(*maxTokens)
}

// newFeedbackID returns a fresh feedback id.
func newFeedbackID() string { return auth.NewID("fb_") }

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
