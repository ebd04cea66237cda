package runtime

import "sync"

// executions are the durable executions a runtime runs in the background (the resumes of
// answered runs): each is a goroutine that Close waits for. The handler's deadline and the
// execution's lease bound each.
type executions struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// start runs fn in a goroutine, unless the executions are stopped: then it reports false and
// runs nothing.
func (x *executions) start(fn func()) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	x.wg.Go(fn)
	return true
}

// stop refuses new executions and waits for those running.
func (x *executions) stop() {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.wg.Wait()
}
