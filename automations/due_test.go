package automations

import (
	"testing"
	"time"
)

func TestDue(t *testing.T) {
	base := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	hourly := Trigger{Cron: "0 * * * *", Timezone: "UTC"}
	tests := []struct {
		name       string
		trigger    Trigger
		catchup    string
		lastFire   time.Time
		now        time.Time
		wantFire   []time.Time
		wantMissed int
	}{
		{
			name: "up throughout: the one fire time fires", trigger: hourly,
			lastFire: base, now: base.Add(time.Hour),
			wantFire: []time.Time{base.Add(time.Hour)},
		},
		{
			name: "nothing due yet", trigger: hourly,
			lastFire: base, now: base.Add(59 * time.Minute),
		},
		{
			name: "3h outage, catchup 1h, back at 15:10: 15:00 fires once, 13:00 and 14:00 missed", trigger: hourly, catchup: "1h",
			lastFire: base, now: base.Add(3*time.Hour + 10*time.Minute),
			wantFire: []time.Time{base.Add(3 * time.Hour)}, wantMissed: 2,
		},
		{
			name: "3h outage of an every 15m, catchup 1h: only the latest fires", trigger: Trigger{Every: "15m"}, catchup: "1h",
			lastFire: base, now: base.Add(3 * time.Hour),
			wantFire: []time.Time{base.Add(3 * time.Hour)}, wantMissed: 11,
		},
		{
			name: "3h outage, nothing within catchup: all missed", trigger: Trigger{Cron: "0 13 * * *"}, catchup: "1h",
			lastFire: base, now: base.Add(3 * time.Hour),
			wantMissed: 1,
		},
		{
			name: "default catchup is 1h", trigger: hourly,
			lastFire: base, now: base.Add(3*time.Hour + 30*time.Minute),
			wantFire: []time.Time{base.Add(3 * time.Hour)}, wantMissed: 2,
		},
		{
			name: "catchup 24h keeps the latest of a day", trigger: hourly, catchup: "24h",
			lastFire: base, now: base.Add(48 * time.Hour),
			wantFire: []time.Time{base.Add(48 * time.Hour)}, wantMissed: 47,
		},
		{
			name: "fire time exactly at the window's edge is within", trigger: Trigger{Cron: "0 13 * * *"}, catchup: "2h",
			lastFire: base, now: base.Add(3 * time.Hour),
			wantFire: []time.Time{base.Add(time.Hour)},
		},
		{
			name: "a month down with a minute cron: the latest fires, the rest are counted", trigger: Trigger{Cron: "* * * * *"}, catchup: "1h",
			lastFire: base, now: base.Add(30 * 24 * time.Hour),
			wantFire: []time.Time{base.Add(30 * 24 * time.Hour)}, wantMissed: 30*24*60 - 1,
		},
		{
			name: "event triggers are never due", trigger: Trigger{Event: true},
			lastFire: base, now: base.Add(3 * time.Hour),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := &Automation{Trigger: tt.trigger, Catchup: tt.catchup, Created: base}
			fire, missed := Due(a, tt.lastFire, tt.now)
			if len(fire) != len(tt.wantFire) || (len(fire) == 1 && !fire[0].Equal(tt.wantFire[0])) || missed != tt.wantMissed {
				t.Errorf("Due = %v, %d; want %v, %d", fire, missed, tt.wantFire, tt.wantMissed)
			}
		})
	}
}

func TestCatchupWindow(t *testing.T) {
	for in, want := range map[string]time.Duration{"": time.Hour, "30m": 30 * time.Minute, "48h": 24 * time.Hour, "bad": time.Hour} {
		if got := (&Automation{Catchup: in}).CatchupWindow(); got != want {
			t.Errorf("CatchupWindow(%q) = %v, want %v", in, got, want)
		}
	}
}
