package registry

import "time"

// SetNow replaces the clock of s (tests of creation order under clocks that stall or go back).
func SetNow(s *Deployments, now func() time.Time) { s.now = now }
