package loadgen

import (
	"context"
	"runtime"
	"time"
)

// spinWindow is how close to a due time the dispatcher, while its timer
// wakes late, stops sleeping on the timer and yields in a loop instead:
// Go's timers sleep in the netpoller, whose wait rounds to whole
// milliseconds when no thread is awake, which alone would add ~0.5 ms of
// schedule lag to every request of an idle generator.
const spinWindow = 1500 * time.Microsecond

// lateBound is the lateness that switches the waiter's mode: a timer that
// wakes later than this is sleeping in the netpoller (an idle process), a
// yield that takes longer than this came back through a long run queue.
const lateBound = 200 * time.Microsecond

// waiter waits for the dispatcher's due times. It yields in a loop only
// while that is what keeps it on time. With thousands of streams in flight
// the run queues hold thousands of goroutines, and runtime.Gosched puts the
// dispatcher at the back of the global one: the execution trace of 4096
// streams on two cores showed single yields taking 10–50 ms, the schedule
// lag p99 going from ~1 ms at 1024 to 80–500 ms. A busy process runs due
// timers at every scheduling pass and puts the woken goroutine next on its
// processor, so there the timer alone is on time.
type waiter struct {
	timer *time.Timer
	spin  bool // the timer woke late: yield through the last spinWindow

	// now, sleep and yield are the clock, the timer and runtime.Gosched;
	// tests replace them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	yield func()
}

func newWaiter(timer *time.Timer) *waiter {
	w := &waiter{timer: timer, now: time.Now, yield: runtime.Gosched}
	w.sleep = func(ctx context.Context, d time.Duration) bool {
		w.timer.Reset(d)
		select {
		case <-w.timer.C:
			return true
		case <-ctx.Done():
			w.timer.Stop()
			return false
		}
	}
	return w
}

// until returns at due (false if ctx ended first).
func (w *waiter) until(ctx context.Context, due time.Time) bool {
	window := time.Duration(0)
	if w.spin {
		window = spinWindow
	}
	if wait := due.Sub(w.now()) - window; wait > 0 {
		if !w.sleep(ctx, wait) {
			return false
		}
		if !w.spin && w.now().Sub(due) > lateBound {
			w.spin = true // the next due time is spun for
		}
	}
	for t := w.now(); t.Before(due); t = w.now() {
		w.yield()
		if w.now().Sub(t) > lateBound {
			// A long run queue: timers are on time now, yields are not.
			w.spin = false
			if wait := due.Sub(w.now()); wait > 0 && !w.sleep(ctx, wait) {
				return false
			}
			break
		}
	}
	return ctx.Err() == nil
}
