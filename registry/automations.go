package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"svc/auth"
)

// ErrAutomationNotFound means no automation has that id, or it belongs to another agent.
var ErrAutomationNotFound = errors.New("registry: automation not found")

// CursorAutomations is the list of an agent's automations in one owner scope, newest first.
const CursorAutomations = "automations"

// AutomationSaver is who saved an automation (CONTRACT §9): its fires run with this authority,
// and each fire re-checks the credential (CredentialKind and CredentialID: an API key, the
// platform token that minted a runtime token, a browser session) so that a revoked one disables
// the automation. A signed-in user's e-mail, organization and groups are kept so that each fire
// can ask the agent's allow rules again.
type AutomationSaver struct {
	UserID string `json:"userId,omitempty"`
	// ScopeID is the scope the runs' sessions work in: the credential's scope claim, or the
	// scope_id a trusted credential named; "" for the agent level.
	ScopeID        string   `json:"scopeId,omitempty"`
	CredentialKind string   `json:"credentialKind,omitempty"`
	CredentialID   string   `json:"credentialId,omitempty"`
	Email          string   `json:"email,omitempty"`
	EmailVerified  bool     `json:"emailVerified,omitempty"`
	OrgID          string   `json:"orgId,omitempty"`
	Groups         []string `json:"groups,omitempty"`
}

// Automation is an automation as stored. Spec is its JSON document as the API decoded it
// (package automations owns its shape and rules; the registry keeps it opaque).
type Automation struct {
	ID      string
	AgentID string
	// OwnerScope is the owner scope (spec 5.6): a scope id, a user id, or "" for the agent level.
	OwnerScope string
	Saver      AutomationSaver
	Name       string
	Spec       json.RawMessage
	Enabled    bool
	// DisabledReason says why the platform disabled it (a revoked saver); "" when a user paused it.
	DisabledReason string
	// EventSecret is an event trigger's secret; "" otherwise. Create seals it with the
	// platform's secrets key; reads leave it empty (EventSecret reads it back).
	EventSecret string
	CreatedAt   time.Time
	UpdatedAt   time.Time
	// NextFireAt is the next fire time of a schedule; nil when none is due (events, a fired at).
	NextFireAt *time.Time
	// LastFireAt is the fire time last claimed; nil before the first.
	LastFireAt *time.Time
}

// automationRow is an Automation with its saver and spec as the stored JSON text.
type automationRow struct {
	ID             string `gorm:"primaryKey"`
	AgentID        string
	OwnerScope     string
	Saver          string
	Name           string
	Spec           string
	Enabled        bool
	DisabledReason string
	EventSecret    string // sealed (Cipher), base64
	CreatedAt      time.Time
	UpdatedAt      time.Time
	NextFireAt     *time.Time
	LastFireAt     *time.Time
}

// TableName names the table of automationRow.
func (automationRow) TableName() string { return "automations" }

func (r *automationRow) automation() (Automation, error) {
	a := Automation{ID: r.ID, AgentID: r.AgentID, OwnerScope: r.OwnerScope, Name: r.Name, Spec: json.RawMessage(r.Spec),
		Enabled: r.Enabled, DisabledReason: r.DisabledReason,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), NextFireAt: utcPtr(r.NextFireAt), LastFireAt: utcPtr(r.LastFireAt)}
	if err := json.Unmarshal([]byte(r.Saver), &a.Saver); err != nil {
		return Automation{}, fmt.Errorf("read automation %s: saver: %w", r.ID, err)
	}
	return a, nil
}

// utcPtr returns t in UTC, nil for nil.
func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// AutomationQuery selects a page of automations.
type AutomationQuery struct {
	Limit  int    // 1..500; 0 means 100
	Before Cursor // the page after this cursor (of CursorAutomations and this agent); zero for the first
}

// AutomationUpdate is a change to an automation; nil fields are left as they are.
type AutomationUpdate struct {
	Name *string
	Spec json.RawMessage
	// Enabled pauses (false) or resumes (true) the automation; either clears DisabledReason.
	Enabled *bool
	// SetNextFire says to set NextFireAt, nil included (no fire due).
	SetNextFire bool
	NextFireAt  *time.Time
}

// Automations stores the automations of CONTRACT §9, their fires and the event ids they saw.
// Every method is safe for concurrent use, by any number of processes on one database:
// ClaimFire and SeenEvent are decided by a primary key, not by the caller.
type Automations struct {
	db     *gorm.DB
	cipher *Cipher // seals event secrets; nil refuses them
	now    func() time.Time
}

// NewAutomations returns the automation store over db, without a secrets key: event triggers'
// secrets are refused (NewStores gives its store the platform's key).
func NewAutomations(db *gorm.DB) *Automations {
	return &Automations{db: db, now: func() time.Time { return time.Now().UTC() }}
}

// Create stores a with a new id (au…) and its creation time, and returns it as stored.
// a.ID, a.CreatedAt and a.UpdatedAt are ignored; an agent that does not exist is ErrAgentNotFound.
func (s *Automations) Create(ctx context.Context, a Automation) (Automation, error) {
	saver, err := json.Marshal(a.Saver)
	if err != nil {
		return Automation{}, fmt.Errorf("create automation: saver: %w", err)
	}
	if len(a.Spec) == 0 {
		a.Spec = json.RawMessage("{}")
	}
	now := s.now().UTC()
	id := auth.NewID("au")
	var sealed string
	if a.EventSecret != "" {
		if s.cipher == nil {
			return Automation{}, errors.New("create automation: an event trigger's secret needs the platform's secrets key")
		}
		sealed = base64.StdEncoding.EncodeToString(s.cipher.Seal([]byte(a.EventSecret), eventSecretBinding(id)))
	}
	row := automationRow{ID: id, AgentID: a.AgentID, OwnerScope: a.OwnerScope, Saver: string(saver), Name: a.Name,
		Spec: string(a.Spec), Enabled: a.Enabled, DisabledReason: a.DisabledReason, EventSecret: sealed,
		CreatedAt: now, UpdatedAt: now, NextFireAt: utcPtr(a.NextFireAt), LastFireAt: utcPtr(a.LastFireAt)}
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Table("agents").Where("id = ?", a.AgentID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return ErrAgentNotFound
		}
		return tx.Create(&row).Error
	})
	if errors.Is(err, ErrAgentNotFound) {
		return Automation{}, err
	}
	if err != nil {
		return Automation{}, fmt.Errorf("create automation: %w", err)
	}
	return row.automation()
}

// WithClock returns a copy of s that reads the time from now: the fired and started times of
// fires, and the update times of automations. The scheduler and the handler of fires on a fake
// clock (tests) give it theirs, so that a fire's age is measured on one clock.
func (s *Automations) WithClock(now func() time.Time) *Automations {
	return &Automations{db: s.db, now: now}
}

// Get returns the automation id of agentID, or ErrAutomationNotFound.
func (s *Automations) Get(ctx context.Context, agentID, id string) (Automation, error) {
	return s.get(s.db.WithContext(ctx).Where("id = ? AND agent_id = ?", id, agentID))
}

// ByID returns the automation id whatever its agent, or ErrAutomationNotFound: for the worker
// that fires it and the event trigger, which know only the id.
func (s *Automations) ByID(ctx context.Context, id string) (Automation, error) {
	return s.get(s.db.WithContext(ctx).Where("id = ?", id))
}

func (s *Automations) get(tx *gorm.DB) (Automation, error) {
	var rows []automationRow
	if err := tx.Limit(1).Find(&rows).Error; err != nil {
		return Automation{}, fmt.Errorf("get automation: %w", err)
	}
	if len(rows) == 0 {
		return Automation{}, ErrAutomationNotFound
	}
	return rows[0].automation()
}

// List returns a page of agentID's automations in ownerScope only (another scope's are never
// listed), newest first, and the cursor of the next page (zero when this one is the last). A
// q.Before of another list or agent is ErrBadCursor.
func (s *Automations) List(ctx context.Context, agentID, ownerScope string, q AutomationQuery) ([]Automation, Cursor, error) {
	tx := s.db.WithContext(ctx).Model(&automationRow{}).Where("agent_id = ? AND owner_scope = ?", agentID, ownerScope)
	tx, err := wherePage(tx, CursorAutomations, agentID, "created_at", q.Before, q.Limit)
	if err != nil {
		return nil, Cursor{}, err
	}
	var rows []automationRow
	if err := tx.Find(&rows).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list automations: %w", err)
	}
	out, err := automationsOf(rows)
	if err != nil {
		return nil, Cursor{}, err
	}
	out, next := nextCursor(out, CursorAutomations, agentID, q.Limit, func(a *Automation) (time.Time, string) { return a.CreatedAt, a.ID })
	return out, next, nil
}

func automationsOf(rows []automationRow) ([]Automation, error) {
	out := make([]Automation, 0, len(rows))
	for i := range rows {
		a, err := rows[i].automation()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Update applies u to the automation id of agentID and returns it as stored, or
// ErrAutomationNotFound.
func (s *Automations) Update(ctx context.Context, agentID, id string, u AutomationUpdate) (Automation, error) {
	set := map[string]any{"updated_at": s.now().UTC()}
	if u.Name != nil {
		set["name"] = *u.Name
	}
	if u.Spec != nil {
		set["spec"] = string(u.Spec)
	}
	if u.Enabled != nil {
		set["enabled"], set["disabled_reason"] = *u.Enabled, ""
	}
	if u.SetNextFire {
		set["next_fire_at"] = utcPtr(u.NextFireAt)
	}
	res := s.db.WithContext(ctx).Model(&automationRow{}).Where("id = ? AND agent_id = ?", id, agentID).Updates(set)
	if res.Error != nil {
		return Automation{}, fmt.Errorf("update automation: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return Automation{}, ErrAutomationNotFound
	}
	return s.Get(ctx, agentID, id)
}

// Delete removes the automation id of agentID with its fires and seen events, or returns
// ErrAutomationNotFound.
func (s *Automations) Delete(ctx context.Context, agentID, id string) error {
	res := s.db.WithContext(ctx).Where("id = ? AND agent_id = ?", id, agentID).Delete(&automationRow{})
	if res.Error != nil {
		return fmt.Errorf("delete automation: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrAutomationNotFound
	}
	return nil
}

// Disable turns the automation id off with reason (shown to its owner: "the saver's API key was
// revoked"), or returns ErrAutomationNotFound. Disabling a disabled automation replaces its reason.
func (s *Automations) Disable(ctx context.Context, id, reason string) error {
	res := s.db.WithContext(ctx).Model(&automationRow{}).Where("id = ?", id).
		Updates(map[string]any{"enabled": false, "disabled_reason": reason, "updated_at": s.now().UTC()})
	if res.Error != nil {
		return fmt.Errorf("disable automation: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrAutomationNotFound
	}
	return nil
}

// Due returns up to limit (1..500; 0 means 100) enabled automations whose next fire time is at
// or before now, the oldest next fire first (then by id): the scheduler's scan, served by the
// (enabled, next_fire_at) index. Being due is no claim: each fire is claimed with ClaimFire.
func (s *Automations) Due(ctx context.Context, now time.Time, limit int) ([]Automation, error) {
	return s.DueAfter(ctx, now, nil, limit)
}

// DueAfter is Due from after on: the page of the automations that come after after (the last of
// the previous page) in Due's order; nil after is Due. A scan that pages this way reaches every
// due automation once even when some of them stay due (a fire it could not claim).
func (s *Automations) DueAfter(ctx context.Context, now time.Time, after *Automation, limit int) ([]Automation, error) {
	tx := s.db.WithContext(ctx).Where("enabled = ? AND next_fire_at IS NOT NULL AND next_fire_at <= ?", true, now.UTC())
	if after != nil && after.NextFireAt != nil {
		at := after.NextFireAt.UTC()
		tx = tx.Where("next_fire_at > ? OR (next_fire_at = ? AND id > ?)", at, at, after.ID)
	}
	var rows []automationRow
	if err := tx.Order("next_fire_at, id").Limit(pageLimit(limit)).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("due automations: %w", err)
	}
	return automationsOf(rows)
}

// NextFireAfter returns the earliest next fire time after after among the enabled automations
// (false when there is none), served by the (enabled, next_fire_at) index: how long the
// scheduler may sleep before the next fire is due.
func (s *Automations) NextFireAfter(ctx context.Context, after time.Time) (time.Time, bool, error) {
	var rows []automationRow
	err := s.db.WithContext(ctx).Select("next_fire_at").Where("enabled = ? AND next_fire_at > ?", true, after.UTC()).
		Order("next_fire_at").Limit(1).Find(&rows).Error
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next fire time: %w", err)
	}
	if len(rows) == 0 || rows[0].NextFireAt == nil {
		return time.Time{}, false, nil
	}
	return *rows[0].NextFireAt, true, nil
}

// AdvanceNext moves the next fire time of the automation id from from to to (nil: none due),
// only if it is still from: a compare-and-set for the scan that fires nothing (the fire times it
// passed were all missed, or its schedule ended). It returns false with no error, changing
// nothing, when the next fire time is no longer from (another scheduler moved it first, or the
// automation was deleted).
func (s *Automations) AdvanceNext(ctx context.Context, id string, from, to *time.Time) (bool, error) {
	tx := s.db.WithContext(ctx).Model(&automationRow{}).Where("id = ?", id)
	if from == nil {
		tx = tx.Where("next_fire_at IS NULL")
	} else {
		tx = tx.Where("next_fire_at = ?", from.UTC())
	}
	res := tx.Updates(map[string]any{"next_fire_at": utcPtr(to), "updated_at": s.now().UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("advance next fire of automation %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// ClaimFire claims the fire of automationID at fireTime: in one transaction it records the fire
// (queued, fired now) and moves the automation's next fire time to nextFire (nil: none) and its
// last fire time to fireTime. It returns true when this call claimed the fire, and false with no
// error, changing nothing, when the fire was claimed already (by this process or another, before
// or concurrently): of any number of callers racing on one (automation, fire time), exactly one
// gets true. An automation that does not exist is ErrAutomationNotFound.
func (s *Automations) ClaimFire(ctx context.Context, automationID string, fireTime time.Time, nextFire *time.Time) (bool, error) {
	now := s.now().UTC()
	fireTime = fireKey(fireTime)
	fire := automationFireRow{AutomationID: automationID, FireTime: fireTime, Status: FireQueued, FiredAt: now, TriggerKind: "schedule"}
	claimed := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		// 1. The automation's row first: on Postgres a racing claim waits here for the winner.
		res := tx.Model(&automationRow{}).Where("id = ?", automationID).
			Updates(map[string]any{"next_fire_at": utcPtr(nextFire), "last_fire_at": fireTime.UTC(), "updated_at": now})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return ErrAutomationNotFound
		}
		// 2. The fire: the primary key refuses a second claim, which rolls back step 1.
		res = tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&fire)
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 0 {
			return errFireClaimed
		}
		claimed = true
		return nil
	})
	switch {
	case errors.Is(err, errFireClaimed):
		return false, nil
	case errors.Is(err, ErrAutomationNotFound):
		return false, err
	case err != nil:
		return false, fmt.Errorf("claim fire of automation %s at %s: %w", automationID, fireTime.UTC().Format(time.RFC3339), err)
	}
	return claimed, nil
}

// errFireClaimed rolls back a ClaimFire that lost; ClaimFire returns false for it.
var errFireClaimed = errors.New("registry: fire claimed already")

// FireClaim is one claim of ClaimFires: the fire of AutomationID at FireTime, and the
// automation's next fire time after it (nil: none).
type FireClaim struct {
	AutomationID string
	FireTime     time.Time
	NextFire     *time.Time
}

// ClaimFires is ClaimFire for many fires in one transaction (the scheduler's page): won[i] says
// whether claims[i] was claimed by this call, with ClaimFire's guarantee for each (of any number
// of callers racing on one fire, exactly one wins it). A claim of an automation that no longer
// exists is not won. Each fire is inserted first, then only the winner moves its automation's
// next fire time; the claims go in the order of their automation ids, so that two racing calls
// wait on each other instead of deadlocking. An error claims nothing.
func (s *Automations) ClaimFires(ctx context.Context, claims []FireClaim) (won []bool, err error) {
	won = make([]bool, len(claims))
	if len(claims) == 0 {
		return won, nil
	}
	now := s.now().UTC()
	order := make([]int, len(claims))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := strings.Compare(claims[a].AutomationID, claims[b].AutomationID); c != 0 {
			return c
		}
		return claims[a].FireTime.Compare(claims[b].FireTime)
	})
	err = s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, i := range order {
			c := claims[i]
			key := fireKey(c.FireTime)
			// The fire's primary key decides: a racing insert waits for this one and then does
			// nothing. WHERE EXISTS: no foreign key error for an automation deleted since the scan.
			res := tx.Exec(`INSERT INTO automation_fires (automation_id, fire_time, session_id, status, done_reason, error, fired_at, trigger_kind, event)
				SELECT ?, ?, '', ?, '', '', ?, 'schedule', '' WHERE EXISTS (SELECT 1 FROM automations WHERE id = ?)
				ON CONFLICT DO NOTHING`, c.AutomationID, key, string(FireQueued), now, c.AutomationID)
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				continue
			}
			res = tx.Exec(`UPDATE automations SET next_fire_at = ?, last_fire_at = ?, updated_at = ? WHERE id = ?`,
				utcPtr(c.NextFire), key, now, c.AutomationID)
			if res.Error != nil {
				return res.Error
			}
			won[i] = res.RowsAffected == 1
		}
		return nil
	})
	if err != nil {
		return make([]bool, len(claims)), fmt.Errorf("claim %d fires: %w", len(claims), err)
	}
	return won, nil
}
