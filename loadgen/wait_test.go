package loadgen

import (
	"context"
	"testing"
	"time"
)

// fakeWait is a waiter on a fake clock: a sleep wakes timerLate after its
// end, a yield takes yieldCost.
type fakeWait struct {
	now                  time.Time
	timerLate, yieldCost time.Duration
	sleeps, yields       int

	napLate time.Duration // with a nap: it wakes this late
	naps    int
}

func (f *fakeWait) waiter() *waiter {
	return &waiter{
		now: func() time.Time { return f.now },
		sleep: func(_ context.Context, d time.Duration) bool {
			f.sleeps++
			f.now = f.now.Add(d + f.timerLate)
			return true
		},
		yield: func() { f.yields++; f.now = f.now.Add(f.yieldCost) },
	}
}

func TestWaiterModes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeWait{now: time.Unix(1000, 0), timerLate: 800 * time.Microsecond, yieldCost: 10 * time.Microsecond}
	w := f.waiter()

	// Idle: the timer wakes late, so the next wait yields through its
	// last spinWindow and returns on time.
	due := f.now.Add(10 * time.Millisecond)
	if !w.until(ctx, due) || !w.spin {
		t.Fatalf("late timer: spin %v", w.spin)
	}
	due = f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields = 0, 0
	w.until(ctx, due)
	if late := f.now.Sub(due); f.sleeps != 1 || f.yields == 0 || late < 0 || late > f.yieldCost {
		t.Errorf("spinning: %d sleeps, %d yields, %v late", f.sleeps, f.yields, late)
	}

	// Busy: a yield comes back through a long run queue; the waiter
	// sleeps the rest on the (now punctual) timer and stops spinning.
	f.timerLate, f.yieldCost = 5*time.Microsecond, 400*time.Microsecond
	due = f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields = 0, 0
	w.until(ctx, due)
	if w.spin || f.yields != 1 || f.sleeps != 2 {
		t.Errorf("slow yield: spin %v, %d yields, %d sleeps", w.spin, f.yields, f.sleeps)
	}
	due = f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields = 0, 0
	w.until(ctx, due)
	if late := f.now.Sub(due); f.yields != 0 || f.sleeps != 1 || late != f.timerLate {
		t.Errorf("busy: %d yields, %d sleeps, %v late", f.yields, f.sleeps, late)
	}

	// Behind schedule: nothing to wait for.
	f.sleeps, f.yields = 0, 0
	if !w.until(ctx, f.now.Add(-time.Millisecond)) || f.sleeps+f.yields != 0 {
		t.Errorf("past due: %d sleeps, %d yields", f.sleeps, f.yields)
	}
}

// Where the system has a sleeping call, a spun-for wait sleeps in it and
// yields only through the last napMargin; a nap that comes back late (its
// thread waited for a processor) ends the spinning as a slow yield does.
func TestWaiterNaps(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeWait{now: time.Unix(1000, 0), timerLate: 800 * time.Microsecond, yieldCost: 10 * time.Microsecond, napLate: 100 * time.Microsecond}
	w := f.waiter()
	w.nap = func(d time.Duration) { f.naps++; f.now = f.now.Add(d + f.napLate) }
	w.until(ctx, f.now.Add(10*time.Millisecond)) // the late timer: spin
	due := f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields, f.naps = 0, 0, 0
	w.until(ctx, due)
	wantYields := int((napMargin - f.napLate + f.yieldCost - 1) / f.yieldCost)
	if late := f.now.Sub(due); !w.spin || f.sleeps != 1 || f.naps != 1 || f.yields != wantYields || late < 0 || late > f.yieldCost {
		t.Errorf("idle: spin %v, %d sleeps, %d naps, %d yields (want 1, 1, %d), %v late", w.spin, f.sleeps, f.naps, f.yields, wantYields, late)
	}

	f.napLate = 2 * time.Millisecond
	due = f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields, f.naps = 0, 0, 0
	w.until(ctx, due)
	if w.spin || f.naps != 1 || f.yields != 0 {
		t.Errorf("late nap: spin %v, %d naps, %d yields", w.spin, f.naps, f.yields)
	}
	due = f.now.Add(10 * time.Millisecond)
	f.sleeps, f.yields, f.naps = 0, 0, 0
	w.until(ctx, due)
	if f.naps != 0 || f.yields != 0 || f.sleeps != 1 {
		t.Errorf("busy: %d naps, %d yields, %d sleeps", f.naps, f.yields, f.sleeps)
	}
}

// Once naps have been timed, a spun-for wait naps until their oversleep
// and napPad short of the due time, not napMargin: it yields only through
// what the naps leave, is still on time, and a nap that oversleeps more
// than the margin widens it for the next wait.
func TestWaiterNapMargin(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := &fakeWait{now: time.Unix(1000, 0), timerLate: 800 * time.Microsecond, yieldCost: 5 * time.Microsecond, napLate: 60 * time.Microsecond}
	w := f.waiter()
	w.nap = func(d time.Duration) { f.naps++; f.now = f.now.Add(d + f.napLate) }
	w.until(ctx, f.now.Add(10*time.Millisecond)) // the late timer: spin
	for i := 0; i < 3; i++ {
		due := f.now.Add(10 * time.Millisecond)
		f.sleeps, f.yields, f.naps = 0, 0, 0
		w.until(ctx, due)
		if i == 0 {
			continue // the first timed nap
		}
		wantYields := int((napPad + f.yieldCost - 1) / f.yieldCost)
		if late := f.now.Sub(due); !w.spin || f.naps != 1 || f.yields != wantYields || late < 0 || late > f.yieldCost {
			t.Errorf("wait %d: spin %v, %d naps, %d yields (want 1, %d), %v late", i, w.spin, f.naps, f.yields, wantYields, late)
		}
	}
	// A nap 40µs later than those before: this wait is that much late at
	// most, and the next one's margin covers it.
	f.napLate += 40 * time.Microsecond
	due := f.now.Add(10 * time.Millisecond)
	w.until(ctx, due)
	if late := f.now.Sub(due); late <= 0 || late > 40*time.Microsecond-napPad+f.yieldCost {
		t.Errorf("longer nap: %v late", late)
	}
	due = f.now.Add(10 * time.Millisecond)
	f.yields = 0
	w.until(ctx, due)
	if late := f.now.Sub(due); late < 0 || late > f.yieldCost || f.yields == 0 {
		t.Errorf("after the longer nap: %v late, %d yields", late, f.yields)
	}
}

func TestWaiterCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	w := newWaiter(time.NewTimer(time.Hour))
	if w.until(ctx, time.Now().Add(time.Hour)) {
		t.Error("until returned true on a cancelled context")
	}
}
