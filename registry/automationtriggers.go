package registry

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
)

// eventSecretBinding binds a sealed event secret to its automation: a sealed value copied to
// another row does not open.
func eventSecretBinding(id string) string { return "svc/automation-event\x00" + id }

// EventSecret returns the event trigger's secret of automation id (opened with the platform's
// secrets key), "" when it has none, or ErrAutomationNotFound.
func (s *Automations) EventSecret(ctx context.Context, id string) (string, error) {
	var rows []automationRow
	if err := s.db.WithContext(ctx).Select("id", "event_secret").Where("id = ?", id).Limit(1).Find(&rows).Error; err != nil {
		return "", fmt.Errorf("read event secret: %w", err)
	}
	if len(rows) == 0 {
		return "", ErrAutomationNotFound
	}
	if rows[0].EventSecret == "" {
		return "", nil
	}
	if s.cipher == nil {
		return "", errors.New("read event secret: no secrets key")
	}
	sealed, err := base64.StdEncoding.DecodeString(rows[0].EventSecret)
	if err != nil {
		return "", fmt.Errorf("read event secret of automation %s: %w", id, err)
	}
	plain, err := s.cipher.Open(sealed, eventSecretBinding(id))
	if err != nil {
		return "", fmt.Errorf("read event secret of automation %s: %w", id, err)
	}
	return string(plain), nil
}

// withCipher gives s the platform's secrets key, for event triggers' secrets.
func withCipher(s *Automations, c *Cipher) *Automations {
	s.cipher = c
	return s
}

// Triggered returns agentID's enabled automations that no schedule fires (next_fire_at nil:
// event and store triggers, and finished schedules), for the runtime to match a store write
// against their triggers.
func (s *Automations) Triggered(ctx context.Context, agentID string) ([]Automation, error) {
	var rows []automationRow
	err := s.db.WithContext(ctx).Where("agent_id = ? AND enabled = ? AND next_fire_at IS NULL", agentID, true).
		Order("created_at, id").Limit(maxTriggered).Find(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("triggered automations of agent %s: %w", agentID, err)
	}
	return automationsOf(rows)
}

// maxTriggered bounds the automations Triggered reads for one store write.
const maxTriggered = 1000
