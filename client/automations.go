package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Automation is an automation as an agent's runtime answers it (docs/runtime.md#automations):
// the record with its server-held fields. Secret is set only in the answer of the create of an
// event trigger, once.
type Automation struct {
	ID             string            `json:"id"`
	Name           string            `json:"name"`
	Trigger        AutomationTrigger `json:"trigger"`
	Action         AutomationAction  `json:"action"`
	Environment    string            `json:"environment,omitempty"`
	Context        json.RawMessage   `json:"context,omitempty"`
	Overlap        string            `json:"overlap,omitempty"`
	Catchup        string            `json:"catchup,omitempty"`
	ScopeID        string            `json:"scope_id"`
	Enabled        bool              `json:"enabled"`
	DisabledReason string            `json:"disabled_reason,omitempty"`
	Secret         string            `json:"secret,omitempty"`
	CreatedAt      time.Time         `json:"created_at"`
	UpdatedAt      time.Time         `json:"updated_at"`
	NextFireAt     *time.Time        `json:"next_fire_at"`
	LastFireAt     *time.Time        `json:"last_fire_at"`
}

// AutomationTrigger is what fires an automation: exactly one of a cron (read in Timezone), an
// every duration, an at time, an event, or a write of a Store record matching Where.
type AutomationTrigger struct {
	Cron     string          `json:"cron,omitempty"`
	Timezone string          `json:"timezone,omitempty"`
	Every    string          `json:"every,omitempty"`
	At       string          `json:"at,omitempty"`
	Event    bool            `json:"event,omitempty"`
	Store    string          `json:"store,omitempty"`
	Where    json.RawMessage `json:"where,omitempty"`
}

// AutomationAction is what a fire runs: a Message (to the named Agent, with Skill), or a call
// of Tool with Params.
type AutomationAction struct {
	Message string          `json:"message,omitempty"`
	Agent   string          `json:"agent,omitempty"`
	Skill   string          `json:"skill,omitempty"`
	Tool    string          `json:"tool,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
}

// Statuses of an automation's run.
const (
	RunQueued  = "queued"
	RunRunning = "running"
	RunDone    = "done"
	RunFailed  = "failed"
	RunSkipped = "skipped"
	RunMissed  = "missed"
)

// AutomationRun is one fire of an automation: when it was due, when it was recorded, its status
// (RunQueued...), and the session that ran it with how it ended.
type AutomationRun struct {
	FireTime   time.Time  `json:"fire_time"`
	FiredAt    time.Time  `json:"fired_at"`
	Status     string     `json:"status"`
	SessionID  string     `json:"session_id,omitempty"`
	DoneReason string     `json:"done_reason,omitempty"`
	Error      string     `json:"error,omitempty"`
	StartedAt  *time.Time `json:"started_at,omitempty"`
	EndedAt    *time.Time `json:"ended_at,omitempty"`
}

// maxPage is the largest page the runtime's list routes answer.
const maxPage = 500

// The automation methods call the runtime at agentURL with a runtime credential (a minted
// runtime token, an ak_ key, or svc dev's AUTH_TOKEN) as bearer. scope, when not empty, is the
// owner scope a trusted caller names (scope_id); empty is the caller's own. A refusal is a
// *Error: 400 invalid_request with Field naming the member at fault, 404 not_found for an id
// outside the caller's scope (or a runtime that serves no automations).

// ListAutomations lists the automations of the owner scope, newest first, following the pages.
func (c *Client) ListAutomations(ctx context.Context, agentURL, token, scope string) ([]Automation, error) {
	return agentPages[Automation](ctx, c, "list automations", agentURL, "/api/automations", token, scope, "automations", 0)
}

// CreateAutomation saves record (the JSON object of docs/runtime.md#automations) in the owner
// scope and returns it, with its secret when it is an event trigger.
func (c *Client) CreateAutomation(ctx context.Context, agentURL, token, scope string, record json.RawMessage) (Automation, error) {
	var out Automation
	err := c.agentCall(ctx, "create automation", http.MethodPost, agentURL, automationPath(scope, ""), token, record, &out)
	return out, err
}

// GetAutomation returns automation id of the owner scope.
func (c *Client) GetAutomation(ctx context.Context, agentURL, token, scope, id string) (Automation, error) {
	var out Automation
	err := c.agentCall(ctx, "get automation", http.MethodGet, agentURL, automationPath(scope, id), token, nil, &out)
	return out, err
}

// UpdateAutomation applies patch (the members to replace; null removes an optional one;
// {"enabled": false} pauses, {"enabled": true} resumes) to automation id and returns it.
func (c *Client) UpdateAutomation(ctx context.Context, agentURL, token, scope, id string, patch json.RawMessage) (Automation, error) {
	var out Automation
	err := c.agentCall(ctx, "update automation", http.MethodPatch, agentURL, automationPath(scope, id), token, patch, &out)
	return out, err
}

// DeleteAutomation deletes automation id with its runs' records (their sessions stay).
func (c *Client) DeleteAutomation(ctx context.Context, agentURL, token, scope, id string) error {
	return c.agentCall(ctx, "delete automation", http.MethodDelete, agentURL, automationPath(scope, id), token, nil, nil)
}

// RunAutomation fires automation id now, paused or not, and returns the queued fire.
func (c *Client) RunAutomation(ctx context.Context, agentURL, token, scope, id string) (AutomationRun, error) {
	var out AutomationRun
	err := c.agentCall(ctx, "run automation", http.MethodPost, agentURL, automationPath(scope, id, "run"), token, nil, &out)
	return out, err
}

// AutomationRuns returns the runs of automation id, newest first: at most limit of them, or
// every run when limit is 0 or less.
func (c *Client) AutomationRuns(ctx context.Context, agentURL, token, scope, id string, limit int) ([]AutomationRun, error) {
	path := "/api/automations/" + url.PathEscape(id) + "/runs"
	return agentPages[AutomationRun](ctx, c, "list automation runs", agentURL, path, token, scope, "runs", limit)
}

// agentPages reads the list of a runtime's list route (an object holding the items under key,
// and next_cursor) page after page, until the last page or limit items (limit 0 or less: all).
func agentPages[T any](ctx context.Context, c *Client, what, agentURL, path, token, scope, key string, limit int) ([]T, error) {
	var all []T
	seen := map[string]bool{}
	for cursor := ""; ; {
		q := url.Values{}
		if limit > 0 {
			q.Set("limit", strconv.Itoa(min(maxPage, limit-len(all))))
		}
		setIf(q, "scope_id", scope)
		setIf(q, "cursor", cursor)
		var page map[string]json.RawMessage
		if err := c.agentCall(ctx, what, http.MethodGet, agentURL, withQuery(path, q), token, nil, &page); err != nil {
			return nil, err
		}
		var items []T
		if err := json.Unmarshal(page[key], &items); err != nil && page[key] != nil {
			return nil, fmt.Errorf("%s: decode %s: %w", what, key, err)
		}
		all = append(all, items...)
		if limit > 0 && len(all) >= limit {
			return all[:limit], nil
		}
		var next string // a missing or null cursor: the last page
		if raw := page["next_cursor"]; raw != nil {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, fmt.Errorf("%s: decode next_cursor: %w", what, err)
			}
		}
		if next == "" || seen[next] {
			return all, nil
		}
		seen[next] = true
		cursor = next
	}
}

// automationPath is /api/automations[/id[/sub]] with the scope_id query when scope is set.
func automationPath(scope, id string, sub ...string) string {
	p := "/api/automations"
	if id != "" {
		p += "/" + url.PathEscape(id)
	}
	for _, s := range sub {
		p += "/" + s
	}
	q := url.Values{}
	setIf(q, "scope_id", scope)
	return withQuery(p, q)
}

// setIf sets key in q when value is not empty.
func setIf(q url.Values, key, value string) {
	if value != "" {
		q.Set(key, value)
	}
}

// withQuery is path with q's encoding as its query, when q holds any.
func withQuery(path string, q url.Values) string {
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// agentCall sends a request to agentURL+path (path may hold a query) with token as bearer and
// body, when not nil, as JSON; it decodes a 2xx answer into out (nil discards it). what names the
// call in its errors; a non-2xx answer is a *Error. Like ChatStream it connects to the platform's
// address whatever host agentURL names.
func (c *Client) agentCall(ctx context.Context, what, method, agentURL, path, token string, body, out any) error {
	base, err := url.Parse(agentURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" {
		return fmt.Errorf("%s: agent URL %q: want http(s)://host[:port]", what, agentURL)
	}
	target := strings.TrimRight(agentURL, "/") + path
	req, err := c.newRequest(ctx, method, target, body)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Authorization", "Bearer "+token) // the runtime credential, never the platform token
	resp, err := c.agents.Do(req)
	if err != nil {
		return fmt.Errorf("%s at %s: %w", what, base.Host, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s at %s: %w", what, base.Host, responseError(resp))
	}
	if err := decodeBody(resp, out); err != nil {
		return fmt.Errorf("%s at %s: %w", what, base.Host, err)
	}
	return nil
}
