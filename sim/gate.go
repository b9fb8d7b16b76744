package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// gate implements the global stall: while a stall window is open no work
// happens, and work that was in progress when the window opened finishes
// that much later, as if the process had been frozen (a GC pause, a
// failover). Timed waits go through sleepUntil, which reads two atomics on
// its fast path and takes the lock only when a stall overlaps the wait.
type gate struct {
	epoch   time.Time
	gen     atomic.Uint64 // bumped whenever a window opens or grows
	lastEnd atomic.Int64  // end of the latest window, ns since epoch

	mu      sync.Mutex
	windows []window // disjoint, in time order; the most recent maxWindows
}

type window struct{ start, end time.Time }

const maxWindows = 64

func newGate(epoch time.Time) *gate { return &gate{epoch: epoch} }

// stall opens a window of d from now, or extends the open one.
func (g *gate) stall(d time.Duration) {
	if d <= 0 {
		return
	}
	now := time.Now()
	end := now.Add(d)
	g.mu.Lock()
	if n := len(g.windows); n > 0 && g.windows[n-1].end.After(now) {
		if end.After(g.windows[n-1].end) {
			g.windows[n-1].end = end
		}
	} else {
		if len(g.windows) == maxWindows {
			copy(g.windows, g.windows[1:])
			g.windows = g.windows[:maxWindows-1]
		}
		g.windows = append(g.windows, window{now, end})
	}
	g.lastEnd.Store(int64(g.windows[len(g.windows)-1].end.Sub(g.epoch)))
	g.gen.Add(1)
	g.mu.Unlock()
}

// stalled reports whether a stall window is open now.
func (g *gate) stalled() bool {
	return g.lastEnd.Load() > int64(time.Since(g.epoch))
}

// shifted returns due pushed back by every stall window that overlaps the
// wait from since: the part of each window after since that opens before
// the (already shifted) due.
func (g *gate) shifted(since, due time.Time) time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, w := range g.windows {
		if !w.end.After(since) || !w.start.Before(due) {
			continue
		}
		start := w.start
		if start.Before(since) {
			start = since
		}
		due = due.Add(w.end.Sub(start))
	}
	return due
}

// sleepUntil waits until due, pushed back by any stall overlapping the wait,
// and returns that effective due (use it as the base of the next deadline so
// timer lateness does not accumulate). A due in the past returns at once
// unless a stall is open. ok is false if stop or quit closed first.
func (g *gate) sleepUntil(due time.Time, stop, quit <-chan struct{}, timer **time.Timer) (eff time.Time, ok bool) {
	seen := g.gen.Load()
	since := time.Now()
	eff = due
	if g.lastEnd.Load() > int64(since.Sub(g.epoch)) {
		eff = g.shifted(since, due)
	}
	now := since
	for {
		if d := eff.Sub(now); d > 0 {
			if !wait(d, stop, quit, timer) {
				return eff, false
			}
			now = time.Now()
		}
		if gen := g.gen.Load(); gen != seen {
			// A stall opened or grew while we waited: recompute from the
			// original due against the new window list.
			seen = gen
			eff = g.shifted(since, due)
			continue
		}
		// Overdue work found inside an open window (it opened after due)
		// waits for the window to close.
		if end := g.lastEnd.Load(); end > int64(now.Sub(g.epoch)) {
			eff = g.epoch.Add(time.Duration(end))
			continue
		}
		return eff, true
	}
}

// wait sleeps for d unless stop or quit closes first. timer, if non-nil,
// holds a timer reused across calls.
func wait(d time.Duration, stop, quit <-chan struct{}, timer **time.Timer) bool {
	var t *time.Timer
	if timer != nil && *timer != nil {
		t = *timer
		t.Reset(d)
	} else {
		t = time.NewTimer(d)
		if timer != nil {
			*timer = t
		}
	}
	select {
	case <-t.C:
		return true
	case <-stop:
	case <-quit:
	}
	t.Stop()
	return false
}
