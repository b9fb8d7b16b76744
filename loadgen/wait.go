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

// napMargin is the most of a spun-for wait that is yielded through: the
// rest, where the system allows it, the waiter sleeps in a system call
// (nap), which wakes more precisely than a timer and costs no processor
// meanwhile: a dispatcher yielding through its whole spinWindow keeps a
// core busy at high send rates (bench-peers' lag step, TestWaiterNaps).
// Once naps have been timed the margin is how late they wake plus napPad:
// a nap oversleeps by the kernel's timer slack and a wake-up, a small part
// of napMargin, and every yield is a pass through the scheduler.
const napMargin = 250 * time.Microsecond

// napPad is what the learnt margin keeps beyond the naps' recent
// oversleep, for one that oversleeps a little more than those did.
const napPad = 30 * time.Microsecond

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

	// napLate is how late naps wake: the highest recent oversleep, which
	// decays towards lower ones; zero before the first nap.
	napLate time.Duration

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
	slept := false // one nap a wait: what it leaves is yielded through
	for t := w.now(); t.Before(due); t = w.now() {
		if d := due.Sub(t) - w.margin(); w.nap != nil && !slept && d > 0 {
			slept = true
			w.nap(d)
			t = t.Add(d) // what the nap overslept is its lateness
			w.napped(w.now().Sub(t))
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

// margin is how far short of the due time the waiter naps: napMargin until
// naps have been timed, then their oversleep and napPad.
func (w *waiter) margin() time.Duration {
	if w.napLate == 0 {
		return napMargin
	}
	return min(napMargin, w.napLate+napPad)
}

// napped learns a nap's oversleep: a higher one is taken at once, a lower
// one moves the estimate a sixteenth of the way down, so that one quick
// wake-up does not shrink the margin below what most naps need.
func (w *waiter) napped(late time.Duration) {
	late = min(max(late, time.Nanosecond), napMargin)
	if late >= w.napLate {
		w.napLate = late
	} else {
		w.napLate -= (w.napLate - late) / 16
	}
}
