package park

import "testing"

// WithoutPoller has the connections parked during t watched by a goroutine's read, as on a
// system without epoll.
func WithoutPoller(t *testing.T) {
	noPoller = true
	t.Cleanup(func() { noPoller = false })
}
