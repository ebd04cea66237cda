package automations

import "time"

// maxDueScan bounds how many fire times Due walks between lastFire and now: a year of minutes.
const maxDueScan = 366 * 24 * 60

// Due says what to do with the fire times of a in (lastFire, now], after the platform was up
// throughout or down for a while. lastFire is the now of the previous call (or the last fire
// time handled, fired or counted as missed), and a.Created before the first call.
//
// Exactly this is fired: of the fire times in (lastFire, now], those within a's catchup window
// (now - catchup ≤ t) are due, and only the latest of them fires, once; every other fire time in
// the interval (older than the window, or superseded by that latest one) is counted in missed.
// So after a 3 h outage of an hourly automation with catchup 1h, the fire of the last hour runs
// once and the two before are missed; with nothing inside the window, nothing fires and all are
// missed. On a platform that is up, the interval holds one fire time and it fires. The caller
// then records now as the next lastFire: every schedule counts from fixed origins (the cron's
// clock, every's a.Created, at's time), never from lastFire, so nothing drifts.
//
// fire holds at most one time; missed counts at most a year of minutes before the window. An
// automation whose trigger does not compile (see Validate), or
// that has no time-based trigger, is never due.
func Due(a *Automation, lastFire, now time.Time) (fire []time.Time, missed int) {
	sched, err := a.Schedule()
	if err != nil {
		return nil, 0
	}
	window := now.Add(-a.CatchupWindow())
	t := lastFire
	// Fire times older than the window are only counted.
	if lastFire.Before(window) {
		for range maxDueScan {
			next, ok := sched.Next(t)
			if !ok || !next.Before(window) || next.After(now) {
				break
			}
			missed++
			t = next
		}
		t = window.Add(-time.Nanosecond) // Next is strictly after: the first fire at or after window
	}
	// Within the window (at most 24h of fire times, one a minute): the latest fires, the
	// others are superseded by it and counted.
	var latest time.Time
	found := false
	for range maxDueScan {
		next, ok := sched.Next(t)
		if !ok || next.After(now) {
			break
		}
		if found {
			missed++
		}
		latest, found = next, true
		t = next
	}
	if found {
		return []time.Time{latest}, missed
	}
	return nil, missed
}
