//go:build unix

package dbqueue

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid exists on this host. An existing process
// that is not ours (EPERM) counts as alive: the pid may have been reused, and then the claim
// simply waits out its lease.
func processAlive(pid int) bool {
	if pid <= 0 {
		return true // not a pid we recorded: leave the claim alone
	}
	err := syscall.Kill(pid, 0)
	return err == nil || !errors.Is(err, syscall.ESRCH)
}
