package access

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// DefaultSettingsCacheTTL is how long a SettingsCache trusts an agent's settings before it reads
// them again: a PUT /api/agents/{id}/access reaches every runtime within it, without a restart.
const DefaultSettingsCacheTTL = 5 * time.Second

// SettingsSource loads an agent's stored access settings document: (nil, nil) when the agent has
// none. Implementations are safe for concurrent use and honour ctx.
type SettingsSource interface {
	LoadAccessSettings(ctx context.Context, agentID string) ([]byte, error)
}

// SettingsCache reads agents' access settings through a SettingsSource at most once per TTL and
// agent, decoded with ParseSettings; concurrent misses of one agent share one read. Safe for
// concurrent use.
type SettingsCache struct {
	src    SettingsSource
	ttl    time.Duration
	now    func() time.Time
	mu     sync.Mutex
	byID   map[string]settingsEntry
	flight singleflight.Group
}

// settingsEntry is an agent's decoded settings (nil: none) and when they were read.
type settingsEntry struct {
	settings  *Settings
	fetchedAt time.Time
}

// NewSettingsCache returns a cache over src trusting what it read for ttl (0:
// DefaultSettingsCacheTTL); now is the clock (nil: time.Now).
func NewSettingsCache(src SettingsSource, ttl time.Duration, now func() time.Time) *SettingsCache {
	if ttl <= 0 {
		ttl = DefaultSettingsCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	return &SettingsCache{src: src, ttl: ttl, now: now, byID: map[string]settingsEntry{}}
}

// Settings returns agentID's access settings, nil (and no error) when it has none. A stored
// document that no longer parses is an error naming the agent (the API refuses such documents,
// so it means the store was written another way).
func (c *SettingsCache) Settings(ctx context.Context, agentID string) (*Settings, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.byID[agentID]
	c.mu.Unlock()
	if ok && now.Sub(e.fetchedAt) < c.ttl {
		return e.settings, nil
	}
	v, err, _ := c.flight.Do(agentID, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		doc, err := c.src.LoadAccessSettings(rctx, agentID)
		if err != nil {
			return nil, fmt.Errorf("load access settings of agent %s: %w", agentID, err)
		}
		var s *Settings
		if doc != nil {
			if s, err = ParseSettings(doc); err != nil {
				return nil, fmt.Errorf("access settings of agent %s: %w", agentID, err)
			}
		}
		c.mu.Lock()
		c.byID[agentID] = settingsEntry{settings: s, fetchedAt: c.now()}
		c.mu.Unlock()
		return s, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Settings), nil
}
