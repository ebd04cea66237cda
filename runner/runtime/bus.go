package runtime

import (
	"sync"

	"svc/runner/sse"
)

// bus fans runtime events out to /api/events subscribers.
type bus struct {
	mu   sync.Mutex
	subs map[chan sse.Frame]struct{}
}

func newBus() *bus { return &bus{subs: make(map[chan sse.Frame]struct{})} }

func (b *bus) subscribe() chan sse.Frame {
	ch := make(chan sse.Frame, 64)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	return ch
}

func (b *bus) unsubscribe(ch chan sse.Frame) {
	b.mu.Lock()
	delete(b.subs, ch)
	b.mu.Unlock()
}

func (b *bus) publish(f *sse.Frame) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- *f:
		default: // a full subscriber misses the event
		}
	}
}
