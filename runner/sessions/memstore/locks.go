package memstore

import (
	"context"
	"sync"

	"svc/runner/sessions"
)

// Locks is the in-process sessions.Locker: one turn at a time per session within this process.
// Its zero value is ready.
type Locks struct {
	mu   sync.Mutex
	held map[string]struct{}
}

var _ sessions.Locker = (*Locks)(nil)

// TryLock implements sessions.Locker.
func (l *Locks) TryLock(ctx context.Context, id string) (func(), error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.held[id]; ok {
		return nil, sessions.ErrLocked
	}
	if l.held == nil {
		l.held = make(map[string]struct{})
	}
	l.held[id] = struct{}{}
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.held, id)
			l.mu.Unlock()
		})
	}, nil
}
