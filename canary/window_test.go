package canary

import (
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/slo"
)

// Memory stays flat: the windows' size is fixed at creation, whatever the
// number of events or how long they span, and adding allocates nothing.
func TestWindowsAreBounded(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := newWindows(30*24*time.Hour, t0)
	size := w.slots()
	if size != 4320+720 {
		t.Fatalf("%d buckets, want 4320 per-minute + 720 per-hour", size)
	}
	// Ten days of events, one every 5 seconds: 172800 events.
	at := t0
	for i := 0; i < 10*24*720; i++ {
		w.add(at, slo.Events{Good: 1})
		at = at.Add(5 * time.Second)
	}
	if w.slots() != size || cap(w.minutes.slots) != 4320 || cap(w.hours.slots) != 720 {
		t.Fatalf("windows grew to %d buckets", w.slots())
	}
	bad := uint64(0)
	if a := testing.AllocsPerRun(1000, func() { w.add(at, slo.Events{Bad: 1}); bad++ }); a != 0 {
		t.Errorf("add allocates %v times", a)
	}
	now := at
	// The 1h window holds 12 events a minute for 60 minutes (the current
	// bucket also holds the bad ones), the 3d window 72 hours' worth.
	if e := w.minutes.sum(now, time.Hour); e.Bad != bad || e.Good < 59*12 || e.Good > 60*12 {
		t.Errorf("1h window %+v", e)
	}
	if e := w.minutes.sum(now, 72*time.Hour); e.Good < (72*60-1)*12 || e.Good > 72*60*12 {
		t.Errorf("3d window %+v", e)
	}
	// The SLO window saw all ten days.
	if e := w.hours.sum(now, 30*24*time.Hour); e.Good != 10*24*720 || e.Bad != bad {
		t.Errorf("slo window %+v, want %d good %d bad", e, 10*24*720, bad)
	}
	// An hour of silence empties the 5m and 1h windows but not the 3d.
	later := now.Add(61 * time.Minute)
	if e := w.minutes.sum(later, 5*time.Minute); e.Total() != 0 {
		t.Errorf("5m window after an hour of silence: %+v", e)
	}
	if e := w.minutes.sum(later, time.Hour); e.Total() != 0 {
		t.Errorf("1h window after 61m of silence: %+v", e)
	}
	// After more than the ring's span of silence everything is gone.
	if e := w.minutes.sum(now.Add(80*time.Hour), 72*time.Hour); e.Total() != 0 {
		t.Errorf("3d window after 80h: %+v", e)
	}
	// Events older than the span are dropped, not wrapped into the present.
	w.add(now.Add(80*time.Hour), slo.Events{Good: 1})
	w.add(now, slo.Events{Bad: 7})
	if e := w.minutes.sum(now.Add(80*time.Hour), 72*time.Hour); e.Bad != 0 || e.Good != 1 {
		t.Errorf("an event 80h old counted: %+v", e)
	}
}

// A reload that changes the SLO window keeps the hourly counts.
func TestWindowsResize(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	w := newWindows(30*24*time.Hour, t0)
	for h := 0; h < 48; h++ {
		w.add(t0.Add(time.Duration(h)*time.Hour), slo.Events{Good: 2, Bad: 1})
	}
	now := t0.Add(47 * time.Hour)
	w.resize(24 * time.Hour)
	if len(w.hours.slots) != 24 {
		t.Fatalf("%d hourly buckets, want 24", len(w.hours.slots))
	}
	if e := w.hours.sum(now, 24*time.Hour); e.Good != 48 || e.Bad != 24 {
		t.Errorf("after resize: %+v, want the last 24 hours (48 good, 24 bad)", e)
	}
}
