package registry

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm/clause"
)

// ErrFireNotFound means an automation has no fire at that fire time.
var ErrFireNotFound = errors.New("registry: automation fire not found")

// CursorAutomationFires is the list of one automation's fires, newest fire time first. Its
// cursors carry the automation's id where other lists carry an agent's.
const CursorAutomationFires = "automation_fires"

// FireStatus is where a fire of an automation is.
type FireStatus string

// The statuses of a fire.
const (
	FireQueued  FireStatus = "queued"  // claimed, its task enqueued
	FireRunning FireStatus = "running" // its session's turn started
	FireDone    FireStatus = "done"    // the turn ended (DoneReason says how)
	FireFailed  FireStatus = "failed"  // it could not run (Error says why)
	FireSkipped FireStatus = "skipped" // overlap skip: the previous run was still going
	FireMissed  FireStatus = "missed"  // older than catchup after downtime: counted, not run
)

// AutomationFire is one fire of an automation: one per (automation, fire time), whatever the
// number of workers.
type AutomationFire struct {
	AutomationID string
	FireTime     time.Time
	SessionID    string
	Status       FireStatus
	DoneReason   string
	Error        string
	FiredAt      time.Time
	StartedAt    *time.Time
	EndedAt      *time.Time
}

// automationFireRow is a row of automation_fires.
type automationFireRow struct {
	AutomationID string    `gorm:"primaryKey"`
	FireTime     time.Time `gorm:"primaryKey"`
	SessionID    string
	Status       FireStatus
	DoneReason   string
	Error        string
	FiredAt      time.Time
	StartedAt    *time.Time
	EndedAt      *time.Time
}

// TableName names the table of automationFireRow.
func (automationFireRow) TableName() string { return "automation_fires" }

func (r *automationFireRow) fire() AutomationFire {
	return AutomationFire{AutomationID: r.AutomationID, FireTime: r.FireTime.UTC(), SessionID: r.SessionID, Status: r.Status,
		DoneReason: r.DoneReason, Error: r.Error, FiredAt: r.FiredAt.UTC(), StartedAt: utcPtr(r.StartedAt), EndedAt: utcPtr(r.EndedAt)}
}

// FireQuery selects a page of an automation's fires.
type FireQuery struct {
	Limit  int    // 1..500; 0 means 100
	Before Cursor // the page after this cursor (of CursorAutomationFires and this automation); zero for the first
}

// FireUpdate is a change to a fire; empty fields are left as they are.
type FireUpdate struct {
	Status     FireStatus
	SessionID  string
	DoneReason string
	Error      string
	StartedAt  *time.Time
	EndedAt    *time.Time
}

// ListFires returns a page of automationID's fires, newest fire time first, and the cursor of
// the next page (zero when this one is the last). A q.Before of another list or automation is
// ErrBadCursor.
func (s *Automations) ListFires(ctx context.Context, automationID string, q FireQuery) ([]AutomationFire, Cursor, error) {
	tx := s.db.WithContext(ctx).Where("automation_id = ?", automationID)
	if !q.Before.IsZero() {
		if q.Before.List != CursorAutomationFires || q.Before.AgentID != automationID {
			return nil, Cursor{}, ErrBadCursor
		}
		tx = tx.Where("fire_time < ?", q.Before.At.UTC())
	}
	n := pageLimit(q.Limit)
	var rows []automationFireRow
	if err := tx.Order("fire_time DESC").Limit(n + 1).Find(&rows).Error; err != nil {
		return nil, Cursor{}, fmt.Errorf("list fires: %w", err)
	}
	out := make([]AutomationFire, 0, len(rows))
	for i := range rows {
		out = append(out, rows[i].fire())
	}
	// The fire time is unique within an automation: it is the whole position.
	out, next := nextCursor(out, CursorAutomationFires, automationID, q.Limit, func(f *AutomationFire) (time.Time, string) {
		return f.FireTime, f.AutomationID
	})
	return out, next, nil
}

// GetFire returns the fire of automationID at fireTime, or ErrFireNotFound.
func (s *Automations) GetFire(ctx context.Context, automationID string, fireTime time.Time) (AutomationFire, error) {
	var rows []automationFireRow
	err := s.db.WithContext(ctx).Where("automation_id = ? AND fire_time = ?", automationID, fireTime.UTC()).Limit(1).Find(&rows).Error
	if err != nil {
		return AutomationFire{}, fmt.Errorf("get fire: %w", err)
	}
	if len(rows) == 0 {
		return AutomationFire{}, ErrFireNotFound
	}
	return rows[0].fire(), nil
}

// UpdateFire applies u to the fire of automationID at fireTime, or returns ErrFireNotFound.
func (s *Automations) UpdateFire(ctx context.Context, automationID string, fireTime time.Time, u FireUpdate) error {
	set := map[string]any{}
	for col, v := range map[string]string{"status": string(u.Status), "session_id": u.SessionID, "done_reason": u.DoneReason, "error": u.Error} {
		if v != "" {
			set[col] = v
		}
	}
	if u.StartedAt != nil {
		set["started_at"] = u.StartedAt.UTC()
	}
	if u.EndedAt != nil {
		set["ended_at"] = u.EndedAt.UTC()
	}
	tx := s.db.WithContext(ctx).Model(&automationFireRow{}).Where("automation_id = ? AND fire_time = ?", automationID, fireTime.UTC())
	if len(set) == 0 {
		var n int64
		if err := tx.Count(&n).Error; err != nil {
			return fmt.Errorf("update fire: %w", err)
		}
		if n == 0 {
			return ErrFireNotFound
		}
		return nil
	}
	res := tx.Updates(set)
	if res.Error != nil {
		return fmt.Errorf("update fire: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return ErrFireNotFound
	}
	return nil
}

// automationEventRow is a row of automation_events: an event id an automation accepted.
type automationEventRow struct {
	AutomationID string `gorm:"primaryKey"`
	EventID      string `gorm:"primaryKey"`
	SeenAt       time.Time
}

// TableName names the table of automationEventRow.
func (automationEventRow) TableName() string { return "automation_events" }

// SeenEvent records that automationID received the event eventID and reports whether it had
// already (a replay, to refuse): of any number of callers with one (automation, event id), by
// any process, exactly one gets false. An automation that does not exist is an error.
func (s *Automations) SeenEvent(ctx context.Context, automationID, eventID string) (duplicate bool, err error) {
	row := automationEventRow{AutomationID: automationID, EventID: eventID, SeenAt: s.now().UTC()}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return false, fmt.Errorf("record event %s of automation %s: %w", eventID, automationID, res.Error)
	}
	return res.RowsAffected == 0, nil
}

// PruneEvents forgets the event ids seen before before (older than a trigger's replay window,
// whose signatures are refused as stale anyway) and says how many.
func (s *Automations) PruneEvents(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("seen_at < ?", before.UTC()).Delete(&automationEventRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune automation events: %w", res.Error)
	}
	return res.RowsAffected, nil
}
