package turn

import (
	"context"
	"errors"
	"fmt"

	"svc/auth"
	"svc/runner/access"
	"svc/runner/models"
	"svc/runner/sessions"
	"svc/runner/sessions/live"
)

// The session operations besides a turn, under the same rules as Open: a session another
// caller may not see is NotFound, the same answer as a missing one (spec 4.6 rule 2), and a
// change over a shared store is made under the session's turn lock from its latest state.

// Prepare creates a session for who with set and returns its id: live here, and stored at its
// first turn (POST /sessions). An unknown agent or skill is an Invalid Error.
func (e *Engine) Prepare(who access.Identity, set Settings) (string, error) {
	s, err := e.newSession(auth.NewID("ses_"), who, set)
	if err != nil {
		return "", err
	}
	e.cfg.Cache.Insert(e.cfg.Cache.NewSession(s, false))
	return s.ID, nil
}

// Get returns a copy of session id when who may see it; a NotFound Error when it is missing,
// another agent's or hidden from who.
func (e *Engine) Get(ctx context.Context, who access.Identity, id string) (*sessions.Session, error) {
	l, err := e.find(ctx, who, id)
	if err != nil {
		return nil, err
	}
	defer e.cfg.Cache.Done(l)
	l.Lock()
	defer l.Unlock()
	return l.S.Clone(), nil
}

// find returns the live session id when who may see it, else a NotFound Error. The caller is
// done with it with Cache.Done.
func (e *Engine) find(ctx context.Context, who access.Identity, id string) (*live.Session, error) {
	l, err := e.cfg.Cache.Lookup(ctx, id)
	if errors.Is(err, sessions.ErrNotFound) || errors.Is(err, live.ErrOtherAgent) {
		return nil, errNotFound()
	}
	if err != nil {
		return nil, err
	}
	if !seenBy(l, who) {
		e.cfg.Cache.Done(l) // the caller gets nothing to be done with: no copy stays live for it
		return nil, errNotFound()
	}
	return l, nil
}

// errNotFound is the answer for a session that is missing or hidden.
func errNotFound() error { return &Error{Kind: NotFound} }

// Queue hands text, from who, to the turn that runs on session id (in this runtime), which the
// loop reads between its steps. The preInput guardrail applies first (a *BlockedError, or the
// text redacted); a session who may not see is NotFound; a message over the
// session's storage bound SessionFull; a session with no turn here accepting messages
// NoActiveTurn.
func (e *Engine) Queue(ctx context.Context, who access.Identity, id, text string) error {
	v := e.cfg.Guard.Check(text)
	if v.Blocked {
		return &BlockedError{Rule: v.Rule}
	}
	text = v.Text
	l, err := e.find(ctx, who, id)
	if err != nil {
		return err
	}
	defer e.cfg.Cache.Done(l)
	l.Lock()
	q := l.Turn
	full := e.checkSessionStorage(l.S, int64(len(text)))
	l.Unlock()
	if full != nil {
		return full
	}
	if q == nil || !q.Push(models.Message{Role: models.RoleUser, Content: text}) {
		return &Error{Kind: NoActiveTurn}
	}
	return nil
}

// Update changes session id for who with change, called under the session's mutex, saves it
// when it is stored, and returns a copy of the result. Over a shared store the change is made
// under the session's turn lock, from its latest state, or, while a turn runs here, on the live
// copy that turn will store; a turn that runs in another runtime is Busy. An error of change is
// returned as it is, and nothing is saved.
func (e *Engine) Update(ctx context.Context, who access.Identity, id string, change func(*sessions.Session) error) (*sessions.Session, error) {
	l, err := e.find(ctx, who, id)
	if err != nil {
		return nil, err
	}
	defer e.cfg.Cache.Done(l)
	if !e.cfg.Cache.Shared() {
		if err := e.checkStored(ctx, who, l); err != nil {
			return nil, err
		}
	} else {
		// Another runtime may store a turn of this session at any moment. The refresh reads the
		// latest owner: no checkStored.
		release, err := e.cfg.Locker.TryLock(ctx, l.ID)
		switch {
		case err == nil:
			defer release()
			if err := e.cfg.Cache.Refresh(ctx, l); errors.Is(err, sessions.ErrNotFound) || errors.Is(err, live.ErrOtherAgent) {
				return nil, errNotFound()
			} else if err != nil {
				return nil, err
			}
			if !seenBy(l, who) {
				return nil, errNotFound()
			}
		case errors.Is(err, sessions.ErrLocked):
			l.Lock()
			here := l.Turn != nil
			l.Unlock()
			if !here {
				return nil, errBusy()
			}
		default:
			return nil, fmt.Errorf("lock session: %w", err)
		}
	}
	// The change and its save go together (live.Cache.Update): a refresh never falls between them.
	if err := e.cfg.Cache.Update(ctx, l, change); err != nil {
		return nil, err
	}
	l.Lock()
	defer l.Unlock()
	return l.S.Clone(), nil
}

// errBusy is the answer for a session whose turn runs.
func errBusy() error { return &Error{Kind: Busy, Message: "a turn is already running in this session"} }

// Delete deletes session id for who, with its attachments: a session whose turn runs is Busy.
func (e *Engine) Delete(ctx context.Context, who access.Identity, id string) error {
	l, err := e.find(ctx, who, id)
	if err != nil {
		return err
	}
	if err := e.checkStored(ctx, who, l); err != nil {
		return err
	}
	release, err := e.cfg.Locker.TryLock(ctx, l.ID)
	if errors.Is(err, sessions.ErrLocked) {
		return errBusy()
	}
	if err != nil {
		return err
	}
	defer release()
	l.Lock()
	persisted := l.Persisted
	l.Unlock()
	e.cfg.Cache.Forget(id)
	if persisted {
		if err := e.cfg.Store.Delete(ctx, id); err != nil && !errors.Is(err, sessions.ErrNotFound) {
			return err
		}
	}
	// The session's attachments go with it. A failure leaves them behind, outside any bound: log it.
	if err := e.cfg.Blobs.Drop(ctx, id); err != nil {
		e.cfg.Logger.ErrorContext(ctx, "delete the attachments of a deleted session", "session", id, "err", err)
	}
	return nil
}

// checkStored checks who's sight of the stored record too: Update (over an unshared store) and
// Delete check both the live and the stored owner (rule 2).
func (e *Engine) checkStored(ctx context.Context, who access.Identity, l *live.Session) error {
	l.Lock()
	persisted := l.Persisted
	l.Unlock()
	if !persisted {
		return nil
	}
	stored, err := e.cfg.Store.Load(ctx, l.ID)
	if errors.Is(err, sessions.ErrNotFound) {
		return nil // deleted meanwhile; the live copy decided
	}
	if err != nil {
		return err
	}
	if !who.Sees(stored.Owner, stored.ScopeID) {
		return errNotFound()
	}
	return nil
}
