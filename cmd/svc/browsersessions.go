package main

import (
	"context"
	"errors"
	"time"

	"svc/registry"
	"svc/runner/access"
)

// browserSessions is registry.BrowserSessions as an access.Sessions: the registry cannot import
// the runner (arch_test), so the wiring converts between the two records. The stored id is the
// hash of the cookie (access.SessionID), never the cookie.
type browserSessions struct {
	store *registry.BrowserSessions
}

var _ access.Sessions = browserSessions{}

// Create implements access.Sessions.
func (b browserSessions) Create(ctx context.Context, s access.BrowserSession) error {
	return b.store.Create(ctx, registry.BrowserSession{
		IDHash: s.ID, AgentID: s.AgentID, UserID: s.UserID, Email: s.Email, EmailVerified: s.EmailOK,
		OrgID: s.OrgID, Groups: s.Groups, ScopeID: s.Scope, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt,
	})
}

// Get implements access.Sessions.
func (b browserSessions) Get(ctx context.Context, id string) (access.BrowserSession, error) {
	s, err := b.store.Get(ctx, id)
	if errors.Is(err, registry.ErrBrowserSessionNotFound) {
		return access.BrowserSession{}, access.ErrSessionNotFound
	}
	if err != nil {
		return access.BrowserSession{}, err
	}
	out := access.BrowserSession{
		ID: s.IDHash, AgentID: s.AgentID, UserID: s.UserID, Email: s.Email, EmailOK: s.EmailVerified,
		OrgID: s.OrgID, Groups: s.Groups, Scope: s.ScopeID, CreatedAt: s.CreatedAt, ExpiresAt: s.ExpiresAt,
	}
	if s.EndedAt != nil {
		out.EndedAt = *s.EndedAt
	}
	return out, nil
}

// End implements access.Sessions.
func (b browserSessions) End(ctx context.Context, id string, at time.Time) error {
	err := b.store.End(ctx, id, at)
	if errors.Is(err, registry.ErrBrowserSessionNotFound) {
		return access.ErrSessionNotFound
	}
	return err
}
