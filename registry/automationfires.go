package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"svc/migrations"
)

// Errors of the fire methods, for callers to branch on.
var (
	// ErrFireNotFound means an automation has no fire at that fire time.
	ErrFireNotFound = errors.New("registry: automation fire not found")
	// ErrFireNotQueued means StartFire found the fire started or ended already.
	ErrFireNotQueued = errors.New("registry: automation fire is not queued")
	// ErrFireBusy means StartFire, asked to start a fire alone, found another fire of the
	// automation running.
	ErrFireBusy = errors.New("registry: another fire of the automation is running")
)

// fireKey is a fire time as the fire's key: in UTC, to the microsecond (what Postgres keeps), so
// that a time handed back from a task payload finds its row on either dialect.
func fireKey(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

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
	// Trigger is what fired it (schedule, run, event, store; "" for a fire stored before it was
	// kept) and Event the event's body or the written record, kept with the fire so that a fire
	// whose task was lost runs with them too.
	Trigger string
	Event   json.RawMessage
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
	TriggerKind  string
	Event        string
}

// TableName names the table of automationFireRow.
func (automationFireRow) TableName() string { return "automation_fires" }

func (r *automationFireRow) fire() AutomationFire {
	f := AutomationFire{AutomationID: r.AutomationID, FireTime: r.FireTime.UTC(), SessionID: r.SessionID, Status: r.Status,
		DoneReason: r.DoneReason, Error: r.Error, FiredAt: r.FiredAt.UTC(), StartedAt: utcPtr(r.StartedAt), EndedAt: utcPtr(r.EndedAt),
		Trigger: r.TriggerKind}
	if r.Event != "" {
		f.Event = json.RawMessage(r.Event)
	}
	return f
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
	out := firesOf(rows)
	// The fire time is unique within an automation: it is the whole position.
	out, next := nextCursor(out, CursorAutomationFires, automationID, q.Limit, func(f *AutomationFire) (time.Time, string) {
		return f.FireTime, f.AutomationID
	})
	return out, next, nil
}

// GetFire returns the fire of automationID at fireTime, or ErrFireNotFound.
func (s *Automations) GetFire(ctx context.Context, automationID string, fireTime time.Time) (AutomationFire, error) {
	var rows []automationFireRow
	err := s.db.WithContext(ctx).Where("automation_id = ? AND fire_time = ?", automationID, fireKey(fireTime)).Limit(1).Find(&rows).Error
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
	tx := s.db.WithContext(ctx).Model(&automationFireRow{}).Where("automation_id = ? AND fire_time = ?", automationID, fireKey(fireTime))
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

// RecordFire records a queued fire of automationID at fireTime (kept to the microsecond), fired
// now, without touching the automation's schedule: the fire of a run-now, an event or a store
// change, with its trigger kind and its event (the body, or the record; nil for none). It returns false with no error, changing nothing, when that fire exists already (of any
// number of callers with one (automation, fire time) exactly one gets true). An automation that
// does not exist is ErrAutomationNotFound.
func (s *Automations) RecordFire(ctx context.Context, automationID string, fireTime time.Time, trigger string, event json.RawMessage) (bool, error) {
	fire := automationFireRow{AutomationID: automationID, FireTime: fireKey(fireTime), Status: FireQueued, FiredAt: s.now().UTC(), TriggerKind: trigger, Event: string(event)}
	recorded := false
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var n int64
		if err := tx.Model(&automationRow{}).Where("id = ?", automationID).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return ErrAutomationNotFound
		}
		res := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&fire)
		recorded = res.RowsAffected == 1
		return res.Error
	})
	switch {
	case errors.Is(err, ErrAutomationNotFound):
		return false, err
	case err != nil:
		return false, fmt.Errorf("record fire of automation %s at %s: %w", automationID, fire.FireTime.Format(time.RFC3339Nano), err)
	}
	return recorded, nil
}

// StaleQueuedFires returns up to limit (1..500; 0 means 100) fires still queued that were fired
// before olderThan, oldest first, leaving out those of an automation with a fire running (they
// wait their turn under overlap queue, or will be skipped): the fires whose task may have been
// lost between ClaimFire (or RecordFire) and its enqueue, for the scheduler to enqueue again.
func (s *Automations) StaleQueuedFires(ctx context.Context, olderThan time.Time, limit int) ([]AutomationFire, error) {
	var rows []automationFireRow
	err := s.db.WithContext(ctx).Where("status = ? AND fired_at < ?", FireQueued, olderThan.UTC()).
		Where("NOT EXISTS (SELECT 1 FROM automation_fires r WHERE r.automation_id = automation_fires.automation_id AND r.status = ?)", FireRunning).
		Order("fired_at, automation_id, fire_time").Limit(pageLimit(limit)).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("stale queued fires: %w", err)
	}
	return firesOf(rows), nil
}

// RunningFires returns the fires of automationID that are running, oldest fire time first.
func (s *Automations) RunningFires(ctx context.Context, automationID string) ([]AutomationFire, error) {
	var rows []automationFireRow
	err := s.db.WithContext(ctx).Where("automation_id = ? AND status = ?", automationID, FireRunning).Order("fire_time").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("running fires of automation %s: %w", automationID, err)
	}
	return firesOf(rows), nil
}

func firesOf(rows []automationFireRow) []AutomationFire {
	out := make([]AutomationFire, 0, len(rows))
	for i := range rows {
		out = append(out, rows[i].fire())
	}
	return out
}

// StartFire moves the fire of automationID at fireTime from queued to running, started at
// startedAt. It is the one step that lets a fire run, so that a fire delivered twice (its task
// retried, or enqueued again as stale) runs once: of any number of callers exactly one gets nil.
// With alone (overlap skip and queue), it starts the fire only when no other fire of the
// automation is running, deciding under a lock of the automation's row, so two fires racing to
// start alone do not both start; otherwise it returns ErrFireBusy and changes nothing. A fire
// that is not queued is ErrFireNotQueued; a missing one ErrFireNotFound.
func (s *Automations) StartFire(ctx context.Context, automationID string, fireTime, startedAt time.Time, alone bool) error {
	key := fireKey(fireTime)
	if migrations.DialectOf(s.db) == migrations.SQLite {
		return s.startFireSQLite(ctx, automationID, key, startedAt, alone)
	}
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if alone {
			// The automation's row first, as ClaimFire does: a racing start waits here.
			res := tx.Model(&automationRow{}).Where("id = ?", automationID).Update("updated_at", gorm.Expr("updated_at"))
			if res.Error != nil {
				return res.Error
			}
			if res.RowsAffected == 0 {
				return ErrFireNotFound
			}
			var n int64
			err := tx.Model(&automationFireRow{}).Where("automation_id = ? AND status = ? AND fire_time <> ?", automationID, FireRunning, key).
				Count(&n).Error
			if err != nil {
				return err
			}
			if n > 0 {
				return ErrFireBusy
			}
		}
		res := tx.Model(&automationFireRow{}).Where("automation_id = ? AND fire_time = ? AND status = ?", automationID, key, FireQueued).
			Updates(map[string]any{"status": FireRunning, "started_at": startedAt.UTC()})
		if res.Error != nil {
			return res.Error
		}
		if res.RowsAffected == 1 {
			return nil
		}
		var n int64
		if err := tx.Model(&automationFireRow{}).Where("automation_id = ? AND fire_time = ?", automationID, key).Count(&n).Error; err != nil {
			return err
		}
		if n == 0 {
			return ErrFireNotFound
		}
		return ErrFireNotQueued
	})
	switch {
	case err == nil, errors.Is(err, ErrFireBusy), errors.Is(err, ErrFireNotQueued), errors.Is(err, ErrFireNotFound):
		return err
	}
	return fmt.Errorf("start fire of automation %s at %s: %w", automationID, key.Format(time.RFC3339Nano), err)
}

// startFireSQLite is StartFire on SQLite in one statement: SQLite runs one writer at a time, so
// the check of the running fires and the start cannot interleave with another start (Postgres
// needs the automation's row lock for that). Only a start that changed nothing reads why.
func (s *Automations) startFireSQLite(ctx context.Context, automationID string, key, startedAt time.Time, alone bool) error {
	busy := ""
	args := []any{string(FireRunning), startedAt.UTC(), automationID, key, string(FireQueued)}
	if alone {
		busy = ` AND NOT EXISTS (SELECT 1 FROM automation_fires r WHERE r.automation_id = ? AND r.status = ? AND r.fire_time <> ?)`
		args = append(args, automationID, string(FireRunning), key)
	}
	res := s.db.WithContext(ctx).Exec(`UPDATE automation_fires SET status = ?, started_at = ?
		WHERE automation_id = ? AND fire_time = ? AND status = ?`+busy, args...)
	if res.Error != nil {
		return fmt.Errorf("start fire of automation %s at %s: %w", automationID, key.Format(time.RFC3339Nano), res.Error)
	}
	if res.RowsAffected == 1 {
		return nil
	}
	f, err := s.GetFire(ctx, automationID, key)
	switch {
	case err != nil:
		return err // ErrFireNotFound, or the read's error
	case f.Status != FireQueued:
		return ErrFireNotQueued
	}
	return ErrFireBusy
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
