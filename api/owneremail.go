package api

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"svc/registry"
	"svc/runner/access"
)

// ownerEmails returns the e-mail to show as owner_email for each of userIDs (the owners of a page
// of sessions, or the users of a page of feedback) on agentID; a user without one is not in the
// map, and the field is then absent (CONTRACT §8).
//
// The platform knows a user's e-mail only from the agent's identity provider: the latest browser
// session of that user on the agent (ended and expired ones included) holds the e-mail, whether
// the provider verified it, the org and the groups the provider stated at that sign-in. The e-mail
// shows only while the agent's access settings, read now, admit that user as of that sign-in
// (the allow rules or the collaborators, access.Settings.ShowsEmail): change the settings and it
// is gone from the next list. A user known only from a runtime token or an IdP bearer token has no
// browser session and so no e-mail; so does every user of an agent without access settings.
//
// One settings read and one browser session query per call, whatever the page's size.
func (a *API) ownerEmails(ctx context.Context, agentID string, userIDs []string) (map[string]string, error) {
	ids := make([]string, 0, len(userIDs))
	for _, id := range userIDs {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	doc, _, err := a.deps.Stores.Access.Get(ctx, agentID)
	if errors.Is(err, registry.ErrNoAccessSettings) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("owner e-mails: %w", err)
	}
	settings, err := access.ParseSettings(doc)
	if err != nil {
		// Stored settings were validated by PUT; a document a newer rule refuses admits nobody,
		// as on the agent's runtime, and the list still answers.
		a.deps.Logger.WarnContext(ctx, "owner e-mails: the agent's access settings do not parse", "agent", agentID, "err", err)
		return nil, nil
	}
	latest, err := a.deps.Stores.BrowserSessions.Latest(ctx, agentID, ids)
	if err != nil {
		return nil, fmt.Errorf("owner e-mails: %w", err)
	}
	emails := make(map[string]string, len(latest))
	for id, bs := range latest {
		u := access.User{ID: id, Email: bs.Email, EmailVerified: bs.EmailVerified, OrgID: bs.OrgID, Groups: bs.Groups}
		if settings.ShowsEmail(u) {
			emails[id] = bs.Email
		}
	}
	return emails, nil
}
