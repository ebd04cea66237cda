package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"svc/auth"
	"svc/migrations"
)

// ErrOutboxNotFound means no outbox entry has that id.
var ErrOutboxNotFound = errors.New("registry: channel outbox entry not found")

// OutboxStatus is where an outbox entry is.
type OutboxStatus string

// The statuses of an outbox entry.
const (
	OutboxPending OutboxStatus = "pending" // not sent yet (maybe tried: Attempts, LastError)
	// OutboxSending is an entry a sender claimed (ClaimOutbox) until NextAttemptAt: no other
	// sender takes it meanwhile; one whose claim ran out is pending again for the sweep.
	OutboxSending OutboxStatus = "sending"
	OutboxSent    OutboxStatus = "sent"   // the platform accepted it: never sent again
	OutboxFailed  OutboxStatus = "failed" // the platform refused it for good (LastError says why)
)

// OutboxEntry is one call of a messaging platform's API that a reply needs (a message, a prompt
// with buttons, the acknowledgement of a press), stored before it is sent.
type OutboxEntry struct {
	ID      string
	AgentID string
	Channel string
	// IdempotencyKey names the call across re-runs of what made it: a second entry of the same
	// key is the first one.
	IdempotencyKey string
	// Request is the call as the channel's Render made it (a channels.Request).
	Request       json.RawMessage
	Status        OutboxStatus
	Attempts      int
	NextAttemptAt time.Time
	LastError     string
	CreatedAt     time.Time
}

// outboxRow is a row of channel_outbox.
type outboxRow struct {
	ID             string `gorm:"primaryKey"`
	AgentID        string
	Channel        string
	IdempotencyKey string
	Request        string
	Status         OutboxStatus
	Attempts       int
	NextAttemptAt  time.Time
	LastError      string
	CreatedAt      time.Time
}

// TableName names the table of outboxRow.
func (outboxRow) TableName() string { return "channel_outbox" }

func (r outboxRow) entry() OutboxEntry {
	return OutboxEntry{ID: r.ID, AgentID: r.AgentID, Channel: r.Channel, IdempotencyKey: r.IdempotencyKey, Request: json.RawMessage(r.Request),
		Status: r.Status, Attempts: r.Attempts, NextAttemptAt: r.NextAttemptAt, LastError: r.LastError, CreatedAt: r.CreatedAt}
}

// deliveryRow is a row of channel_deliveries.
type deliveryRow struct {
	AgentID    string `gorm:"primaryKey"`
	Channel    string `gorm:"primaryKey"`
	DeliveryID string `gorm:"primaryKey"`
	SeenAt     time.Time
}

// TableName names the table of deliveryRow.
func (deliveryRow) TableName() string { return "channel_deliveries" }

// Channels stores what the messaging channels keep: the deliveries seen (their dedupe) and the
// outbox of replies. Every method is safe for concurrent use by any number of processes on one
// database: a duplicate delivery and a duplicate outbox entry are refused by a key of the table,
// not by the caller.
type Channels struct {
	db  *gorm.DB
	now func() time.Time
}

// NewChannels returns the channel store over db.
func NewChannels(db *gorm.DB) *Channels {
	return &Channels{db: db, now: func() time.Time { return time.Now().UTC() }}
}

// SeeDelivery records delivery id of an agent's channel and reports whether it was recorded
// already (a duplicate: the platform's retry, or another runner's copy).
func (s *Channels) SeeDelivery(ctx context.Context, agentID, channel, id string) (duplicate bool, err error) {
	row := deliveryRow{AgentID: agentID, Channel: channel, DeliveryID: id, SeenAt: s.now()}
	res := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row)
	if res.Error != nil {
		return false, fmt.Errorf("record %s delivery %s: %w", channel, id, res.Error)
	}
	return res.RowsAffected == 0, nil
}

// ForgetDelivery removes a recorded delivery, so that the platform's retry of it is taken (its
// work could not be queued).
func (s *Channels) ForgetDelivery(ctx context.Context, agentID, channel, id string) error {
	err := s.db.WithContext(ctx).Where("agent_id = ? AND channel = ? AND delivery_id = ?", agentID, channel, id).Delete(&deliveryRow{}).Error
	if err != nil {
		return fmt.Errorf("forget %s delivery %s: %w", channel, id, err)
	}
	return nil
}

// PruneDeliveries forgets the deliveries seen before before and says how many.
func (s *Channels) PruneDeliveries(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("seen_at < ?", before.UTC()).Delete(&deliveryRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune channel deliveries: %w", res.Error)
	}
	return res.RowsAffected, nil
}

// AddOutbox stores entries as pending (ID, Status, Attempts, NextAttemptAt and CreatedAt are
// set here) and returns them as stored, in order: an entry whose IdempotencyKey is stored
// already is returned as it is, whatever its status, and not added again.
func (s *Channels) AddOutbox(ctx context.Context, entries []OutboxEntry) ([]OutboxEntry, error) {
	now := s.now()
	out := make([]OutboxEntry, 0, len(entries))
	err := s.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		for _, e := range entries {
			row := outboxRow{ID: auth.NewID("obx"), AgentID: e.AgentID, Channel: e.Channel, IdempotencyKey: e.IdempotencyKey,
				Request: string(e.Request), Status: OutboxPending, NextAttemptAt: now, CreatedAt: now}
			if err := tx.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "idempotency_key"}}, DoNothing: true}).Create(&row).Error; err != nil {
				return err
			}
			var got outboxRow
			if err := tx.Where("idempotency_key = ?", e.IdempotencyKey).Take(&got).Error; err != nil {
				return err
			}
			out = append(out, got.entry())
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("add to the channel outbox: %w", err)
	}
	return out, nil
}

// Outbox returns the outbox entry id, or ErrOutboxNotFound.
func (s *Channels) Outbox(ctx context.Context, id string) (OutboxEntry, error) {
	var row outboxRow
	err := s.db.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return OutboxEntry{}, ErrOutboxNotFound
	case err != nil:
		return OutboxEntry{}, fmt.Errorf("get outbox entry %s: %w", id, err)
	}
	return row.entry(), nil
}

// OutboxWithPrefix returns the outbox entries whose idempotency key starts with prefix, in the
// order of their keys.
func (s *Channels) OutboxWithPrefix(ctx context.Context, prefix string) ([]OutboxEntry, error) {
	var rows []outboxRow
	like := strings.NewReplacer(`\`, `\\`, "%", `\%`, "_", `\_`).Replace(prefix) + "%"
	err := s.db.WithContext(ctx).Where(`idempotency_key LIKE ? ESCAPE '\'`, like).Order("idempotency_key").Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list outbox entries %s*: %w", prefix, err)
	}
	out := make([]OutboxEntry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, nil
}

// ClaimOutbox claims pending entry id for a sender until until, and reports whether it did: an
// entry another sender claimed (sending), sent or failed is not claimed. MarkSent, MarkFailed
// and Postpone end the claim.
func (s *Channels) ClaimOutbox(ctx context.Context, id string, until time.Time) (bool, error) {
	res := s.db.WithContext(ctx).Model(&outboxRow{}).Where("id = ? AND status = ?", id, OutboxPending).
		Updates(map[string]any{"status": OutboxSending, "next_attempt_at": until.UTC()})
	if res.Error != nil {
		return false, fmt.Errorf("claim outbox entry %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// StaleOutbox returns up to limit entries that should have been sent before before and are
// neither sent nor failed: pending since before (their sending was never enqueued, or its task
// was lost), or claimed by a sender whose claim ran out before now (it died mid-send); oldest
// first, the parts of a reply in the order of their keys.
func (s *Channels) StaleOutbox(ctx context.Context, before time.Time, limit int) ([]OutboxEntry, error) {
	var rows []outboxRow
	err := s.db.WithContext(ctx).Where("(status = ? AND next_attempt_at < ?) OR (status = ? AND next_attempt_at < ?)",
		OutboxPending, before.UTC(), OutboxSending, s.now()).Order("created_at, idempotency_key").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("list stale outbox entries: %w", err)
	}
	out := make([]OutboxEntry, len(rows))
	for i, r := range rows {
		out[i] = r.entry()
	}
	return out, nil
}

// Requeue makes entry id pending from now if it is still stale as StaleOutbox(before) says,
// and reports whether it did: false when it changed meanwhile (sent, claimed, or requeued by
// another sweep), so that one sweep enqueues its sending.
func (s *Channels) Requeue(ctx context.Context, id string, before time.Time) (bool, error) {
	now := s.now()
	res := s.db.WithContext(ctx).Model(&outboxRow{}).
		Where("id = ? AND ((status = ? AND next_attempt_at < ?) OR (status = ? AND next_attempt_at < ?))", id, OutboxPending, before.UTC(), OutboxSending, now).
		Updates(map[string]any{"status": OutboxPending, "next_attempt_at": now})
	if res.Error != nil {
		return false, fmt.Errorf("requeue outbox entry %s: %w", id, res.Error)
	}
	return res.RowsAffected == 1, nil
}

// MarkSent records that entry id was sent. Only a pending or claimed entry changes.
func (s *Channels) MarkSent(ctx context.Context, id string) error {
	return s.updatePending(ctx, id, map[string]any{"status": OutboxSent, "attempts": gorm.Expr("attempts + 1"), "last_error": ""})
}

// MarkFailed records that entry id was refused for good, with the reason.
func (s *Channels) MarkFailed(ctx context.Context, id, reason string) error {
	return s.updatePending(ctx, id, map[string]any{"status": OutboxFailed, "attempts": gorm.Expr("attempts + 1"), "last_error": reason})
}

// Postpone records a failed attempt of entry id, pending again, to be tried again at at.
func (s *Channels) Postpone(ctx context.Context, id string, at time.Time, reason string) error {
	return s.updatePending(ctx, id, map[string]any{"status": OutboxPending, "attempts": gorm.Expr("attempts + 1"), "next_attempt_at": at.UTC(), "last_error": reason})
}

func (s *Channels) updatePending(ctx context.Context, id string, set map[string]any) error {
	res := s.db.WithContext(ctx).Model(&outboxRow{}).Where("id = ? AND status IN ?", id, []OutboxStatus{OutboxPending, OutboxSending}).Updates(set)
	if res.Error != nil {
		return fmt.Errorf("update outbox entry %s: %w", id, res.Error)
	}
	return nil
}

// DeliveryKey names a delivery of an agent's channel.
type DeliveryKey struct {
	AgentID, Channel, DeliveryID string
}

// SeeDeliveries records deliveries in one statement of one transaction (one commit for all:
// the group commit of a channel intake under load) and reports for each whether it was recorded
// already, a delivery twice in keys being a duplicate the second time. within, when not nil,
// is called in the transaction with the indexes in keys of the deliveries recorded now (when
// there are any): what it writes commits with them (the embedded queue enqueues their turns
// so). An error of within, or of the transaction, records nothing.
func (s *Channels) SeeDeliveries(ctx context.Context, keys []DeliveryKey, within func(tx *gorm.DB, recorded []int) error) (duplicate []bool, err error) {
	dup := make([]bool, len(keys))
	first := make(map[DeliveryKey]int, len(keys)) // the index of each key's first occurrence
	// The keys go as one JSON array of [agent, channel, delivery] triples, so that every batch
	// is the same statement, whatever its size: a VALUES list of its own length made each size
	// a statement of its own, which Postgres parsed and planned, and pgx prepared, at its first
	// use on each connection (the first bursts after a start paid tens of milliseconds for it).
	rows := make([][3]string, 0, len(keys))
	for i, k := range keys {
		if _, ok := first[k]; ok {
			dup[i] = true
			continue
		}
		first[k] = i
		rows = append(rows, [3]string{k.AgentID, k.Channel, k.DeliveryID})
	}
	if len(rows) == 0 {
		return dup, nil
	}
	triples, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("record %d channel deliveries: %w", len(rows), err)
	}
	at, each := "?", "json_each(?)"
	if migrations.DialectOf(s.db) == migrations.Postgres {
		at, each = "CAST(? AS timestamptz)", "jsonb_array_elements(CAST(? AS jsonb))"
	}
	// SQLite reads an upsert's SELECT up to a WHERE: without one, ON CONFLICT would be a join's.
	sql := `INSERT INTO channel_deliveries (agent_id, channel, delivery_id, seen_at)
	        SELECT value ->> 0, value ->> 1, value ->> 2, ` + at + ` FROM ` + each + ` WHERE true
	        ON CONFLICT DO NOTHING RETURNING agent_id, channel, delivery_id`
	args := []any{s.now(), string(triples)}
	record := func(tx *gorm.DB) error {
		var added []DeliveryKey
		if err := tx.Raw(sql, args...).Scan(&added).Error; err != nil {
			return fmt.Errorf("record %d channel deliveries: %w", len(first), err)
		}
		recorded := make(map[DeliveryKey]bool, len(added))
		for _, k := range added {
			recorded[k] = true
		}
		for k, i := range first {
			dup[i] = !recorded[k]
		}
		if within == nil {
			return nil
		}
		var recordedNow []int
		for i := range keys {
			if !dup[i] {
				recordedNow = append(recordedNow, i)
			}
		}
		if len(recordedNow) == 0 {
			return nil
		}
		return within(tx, recordedNow)
	}
	if within == nil {
		// One statement commits by itself: no BEGIN and COMMIT round trips.
		err = record(s.db.WithContext(ctx))
	} else {
		err = s.db.WithContext(ctx).Transaction(record)
	}
	if err != nil {
		return nil, err
	}
	return dup, nil
}

// ErrQuestionNotFound means no question of the agent has that ask id.
var ErrQuestionNotFound = errors.New("registry: channel question not found")

// questionRow is a row of channel_questions.
type questionRow struct {
	AgentID   string `gorm:"primaryKey"`
	AskID     string `gorm:"primaryKey"`
	Options   string
	CreatedAt time.Time
}

// TableName names the table of questionRow.
func (questionRow) TableName() string { return "channel_questions" }

// AddQuestion stores the values of the options of question askID of an agent, in the order of
// its buttons. A question stored already keeps its values.
func (s *Channels) AddQuestion(ctx context.Context, agentID, askID string, values []string) error {
	b, err := json.Marshal(values)
	if err != nil {
		return fmt.Errorf("encode the options of question %s: %w", askID, err)
	}
	row := questionRow{AgentID: agentID, AskID: askID, Options: string(b), CreatedAt: s.now()}
	if err := s.db.WithContext(ctx).Clauses(clause.OnConflict{DoNothing: true}).Create(&row).Error; err != nil {
		return fmt.Errorf("store question %s: %w", askID, err)
	}
	return nil
}

// Question returns the option values of question askID of an agent, or ErrQuestionNotFound.
func (s *Channels) Question(ctx context.Context, agentID, askID string) ([]string, error) {
	var row questionRow
	err := s.db.WithContext(ctx).Where("agent_id = ? AND ask_id = ?", agentID, askID).Take(&row).Error
	switch {
	case errors.Is(err, gorm.ErrRecordNotFound):
		return nil, ErrQuestionNotFound
	case err != nil:
		return nil, fmt.Errorf("get question %s: %w", askID, err)
	}
	var values []string
	if err := json.Unmarshal([]byte(row.Options), &values); err != nil {
		return nil, fmt.Errorf("question %s: stored options: %w", askID, err)
	}
	return values, nil
}

// PruneQuestions forgets the questions asked before before and says how many.
func (s *Channels) PruneQuestions(ctx context.Context, before time.Time) (int64, error) {
	res := s.db.WithContext(ctx).Where("created_at < ?", before.UTC()).Delete(&questionRow{})
	if res.Error != nil {
		return 0, fmt.Errorf("prune channel questions: %w", res.Error)
	}
	return res.RowsAffected, nil
}
