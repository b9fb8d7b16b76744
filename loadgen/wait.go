package loadgen

import (
	"context"
	"runtime"
	"time"
)

// spinWindow is how close to a due time the dispatcher, while its timer
// wakes late, stops sleeping on the timer and yields in a loop instead:
// Go's timers sleep in the netpoller, whose wait rounds to whole
// milliseconds when no thread is awake, which alone would add a fraction
// of a millisecond of schedule lag to every request of an idle generator.
const spinWindow = 1500 * time.Microsecond

// napMargin is the part of a spun-for wait that is yielded through: the
// rest, where the system allows it, the waiter sleeps in a system call
// (nap), which wakes more precisely than a timer and costs no processor
// meanwhile: a dispatcher yielding through its whole spinWindow keeps a
// core busy at high send rates (bench-peers' lag step, TestWaiterNaps).
const napMargin = 250 * time.Microsecond

// lateBound is the lateness that switches the waiter's mode: a timer that
// wakes later than this is sleeping in the netpoller (an idle process), a
// yield that takes longer than this came back through a long run queue.
const lateBound = 200 * time.Microsecond

// waiter waits for the dispatcher's due times. It yields in a loop only
// while that is what keeps it on time. With thousands of streams in flight
// the run queues hold thousands of goroutines, and runtime.Gosched puts the
// dispatcher at the back of the global one, behind all of them, so a
// single yield can take longer than any lag the goals allow
// (docs/design/dispatcher.md, BenchmarkScheduleLag). A busy process runs due
// timers at every scheduling pass and puts the woken goroutine next on its
// processor, so there the timer alone is on time.
type waiter struct {
	timer *time.Timer
	spin  bool // the timer woke late: yield through the last spinWindow

	// now, sleep, yield and nap are the clock, the timer, runtime.Gosched
	// and a sleeping system call (nil where there is none); tests replace
	// them.
	now   func() time.Time
	sleep func(ctx context.Context, d time.Duration) bool
	yield func()
	nap   func(d time.Duration)
}

func newWaiter(timer *time.Timer) *waiter {
	w := &waiter{timer: timer, now: time.Now, yield: runtime.Gosched, nap: nap}
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
		if d := due.Sub(t) - napMargin; w.nap != nil && d > 0 {
			w.nap(d)
			t = t.Add(d) // what the nap overslept is its lateness
		} else {
			w.yield()
		}
		if w.now().Sub(t) > lateBound {
			// A long run queue (behind it a yield, or a nap's thread
			// waiting for a processor): timers are on time now, yields
			// are not.
			w.spin = false
			if wait := due.Sub(w.now()); wait > 0 && !w.sleep(ctx, wait) {
				return false
			}
			break
		}
	}
	return ctx.Err() == nil
}
