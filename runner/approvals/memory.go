package approvals

import (
	"context"
	"sync"
	"time"
)

// Memory is a Store in this process's memory. The zero value is ready to use.
type Memory struct {
	mu sync.Mutex
	m  map[string]Approval
}

var _ Store = (*Memory)(nil)

// Create implements Store.
func (s *Memory) Create(_ context.Context, a Approval) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = make(map[string]Approval)
	}
	s.m[a.ID] = a
	return nil
}

// Get implements Store.
func (s *Memory) Get(_ context.Context, id string) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok {
		return Approval{}, ErrNotFound
	}
	return a, nil
}

// Decide implements Store.
func (s *Memory) Decide(_ context.Context, agentID, sessionID, id, status string, at time.Time) (Approval, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, ok := s.m[id]
	if !ok || a.AgentID != agentID || a.SessionID != sessionID {
		return Approval{}, ErrNotFound
	}
	if a.Status != Pending {
		return a, ErrDecided
	}
	a.Status, a.DecidedAt = status, at
	s.m[id] = a
	return a, nil
}
