package turn

import (
	"context"
	"errors"
	"maps"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
)

// Settings are what a session created for a caller starts with.
type Settings struct {
	// ScopeID is the requested scope, as access.Identity.ScopeFor decides it.
	ScopeID string
	// Agent and Skill name the session's agent and skill (Profiles.Resolve); an unknown one is
	// an Invalid Error.
	Agent string
	Skill string
	// DeployID pins the session to a deployment; "" is the Engine's.
	DeployID string
	// Model is the session's model; zero is the agent's (Engine.ModelRef).
	Model sessions.Model
	// MaxSessionTokens bounds the session's tokens; 0 is the deployment's own limit.
	MaxSessionTokens int
	// Context and Metadata are the session's from its creation. (A turn's Start sets them when
	// the turn begins instead.)
	Context  map[string]string
	Metadata map[string]string
	// Title is the session's title; "" takes it from the first message.
	Title string
}

// Open is the way into a turn for every entry point (chat, queued turns, automations, channels,
// MCP): it applies the preInput guardrail to st.Text (a *BlockedError, or the text redacted, of
// which the client is told), checks the agent's storage bound, acquires st's session for
// st.Caller and begins the turn, storing the user's message so that history shows it even if the
// process dies. Acquiring follows spec 4.6: a named session is locked before it is read, so that
// over a shared store no other runtime's turn falls between the read and the lock, and its live
// copy is brought up to date under the lock, the stored session winning (live.Cache.Latest); a
// name that no session has creates one of that name with st.New; a session the caller may not
// see is never resumed: the caller gets a new session instead (rules 5, 6). Every refusal comes
// before anything is stored. On success the Turn holds the session's turn Lock until Run or
// Abandon.
func (e *Engine) Open(ctx context.Context, st Start) (*Turn, error) {
	v := e.cfg.Guard.Check(st.Text)
	if v.Blocked {
		return nil, &BlockedError{Rule: v.Rule}
	}
	st.Text = v.Text
	size := EntrySize(&models.Message{Content: st.Text, Parts: st.Parts})
	if err := e.checkAgentStorage(ctx, size); err != nil {
		return nil, err
	}
	l, lk, err := e.acquire(ctx, st)
	if err != nil {
		return nil, err
	}
	return e.begin(ctx, l, lk, size, v.Redacted, &st)
}

// acquire resolves the session of st and takes its turn lock (Open).
func (e *Engine) acquire(ctx context.Context, st Start) (*live.Session, Lock, error) {
	if id := st.SessionID; id != "" {
		lk, err := e.Lock(ctx, id)
		if err != nil {
			return nil, Lock{}, err
		}
		l, err := e.resume(ctx, st.Caller, st.New, id)
		switch {
		case err != nil:
			lk.Release()
			return nil, Lock{}, err
		case l != nil:
			return l, lk, nil
		}
		lk.Release() // not the caller's: a new session instead
	}
	l, err := e.create(st.Caller, st.New, auth.NewID("ses_"))
	if err != nil {
		return nil, Lock{}, err
	}
	if l == nil {
		return nil, Lock{}, errors.New("turn: new session id already taken") // 80 random bits: not in practice
	}
	lk, err := e.Lock(ctx, l.ID)
	if err != nil {
		e.cfg.Cache.Drop(l)
		return nil, Lock{}, err
	}
	return l, lk, nil
}

// resume returns session id for a caller that holds its turn lock: the latest stored or live
// session, or a new one of that id when none exists; nil when who may not see it or it belongs
// to another agent.
func (e *Engine) resume(ctx context.Context, who access.Identity, set Settings, id string) (*live.Session, error) {
	l, err := e.cfg.Cache.Latest(ctx, id)
	switch {
	case errors.Is(err, sessions.ErrNotFound):
		return e.create(who, set, id)
	case errors.Is(err, live.ErrOtherAgent):
		return nil, nil
	case err != nil:
		return nil, err
	case !seenBy(l, who):
		return nil, nil
	}
	return l, nil
}

// create makes a live session of id for who (stored at its first turn). When a live session of
// that id appeared meanwhile it is returned instead if who may see it, else nil.
func (e *Engine) create(who access.Identity, set Settings, id string) (*live.Session, error) {
	s, err := e.newSession(id, who, set)
	if err != nil {
		return nil, err
	}
	mine := e.cfg.Cache.NewSession(s, false)
	l := e.cfg.Cache.Insert(mine)
	if l != mine && !seenBy(l, who) {
		return nil, nil
	}
	return l, nil
}

// newSession builds session id of who with set, not stored yet.
func (e *Engine) newSession(id string, who access.Identity, set Settings) (*sessions.Session, error) {
	agentName, _, err := e.cfg.Profiles.Resolve(set.Agent, set.Skill)
	if err != nil {
		return nil, err
	}
	scope, err := who.ScopeFor(set.ScopeID)
	if err != nil {
		return nil, err
	}
	now := e.cfg.Now()
	s := &sessions.Session{
		ID: id, AgentID: e.cfg.AgentID, Owner: who.UserID, ScopeID: scope,
		Agent: agentName, Skill: set.Skill, DeployID: set.DeployID, Status: sessions.StatusIdle,
		Model: set.Model, MaxSessionTokens: set.MaxSessionTokens,
		Context: maps.Clone(set.Context), Metadata: maps.Clone(set.Metadata), Title: set.Title, CreatedAt: now, UpdatedAt: now,
	}
	if s.DeployID == "" {
		s.DeployID = e.cfg.DeployID
	}
	if set.Skill != "" {
		s.State.ActiveSkills = []string{set.Skill}
	}
	return s, nil
}

// seenBy reports whether who may see the live session (spec 4.6).
func seenBy(l *live.Session, who access.Identity) bool {
	l.Lock()
	defer l.Unlock()
	return who.Sees(l.S.Owner, l.S.ScopeID)
}
