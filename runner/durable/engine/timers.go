package engine

import (
	"sync"
	"time"
)

// timers are the wake-ups of an engine without a Schedule (svc dev): in-process timers by key,
// stopped by Shutdown. Runs they would wake are lost with the process, as the README says.
type timers struct {
	mu     sync.Mutex
	closed bool
	set    map[string]*time.Timer
	wg     sync.WaitGroup
}

// after runs fn after d, unless the timers are stopped or the key's timer is replaced or
// cancelled first.
func (t *timers) after(key string, d time.Duration, fn func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return
	}
	if t.set == nil {
		t.set = map[string]*time.Timer{}
	}
	t.cancelLocked(key)
	var tm *time.Timer
	t.wg.Add(1)
	tm = time.AfterFunc(max(d, 0), func() {
		defer t.wg.Done()
		t.mu.Lock()
		live := t.set[key] == tm
		if live {
			delete(t.set, key)
		}
		t.mu.Unlock()
		if live {
			fn()
		}
	})
	t.set[key] = tm
}

// cancel stops the key's timer, if it has not fired.
func (t *timers) cancel(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cancelLocked(key)
}

func (t *timers) cancelLocked(key string) {
	if tm := t.set[key]; tm != nil {
		if tm.Stop() {
			t.wg.Done()
		}
		delete(t.set, key)
	}
}

// stop stops every timer not yet fired and waits for those running.
func (t *timers) stop() {
	t.mu.Lock()
	t.closed = true
	for key := range t.set {
		t.cancelLocked(key)
	}
	t.mu.Unlock()
	t.wg.Wait()
}
