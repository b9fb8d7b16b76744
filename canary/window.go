package canary

import (
	"time"

	"github.com/tailgate-llm/tailgate/slo"
)

// Rolling windows. Each objective of each target keeps its good and bad
// events in two rings of fixed-width time buckets, sized once: per-minute
// buckets over the longest burn-rate window (3 days: 4320 buckets) and
// per-hour buckets over the SLO window (30 days: 720). A bucket is two
// counters, so an objective costs (4320 + 720) × 16 bytes ≈ 80 KiB however
// many events arrive: memory is flat over days, nothing grows per request.
// A window's figure is the sum of the buckets it spans, the current
// (partial) one included, so a window is exact to one bucket width.

// Ring geometry.
const (
	minuteWidth   = time.Minute
	hourWidth     = time.Hour
	longestWindow = 72 * time.Hour
)

// burnWindows are the burn-rate windows, by their label.
var burnWindows = []struct {
	label string
	d     time.Duration
}{
	{"5m", 5 * time.Minute}, {"30m", 30 * time.Minute}, {"1h", time.Hour}, {"2h", 2 * time.Hour},
	{"6h", 6 * time.Hour}, {"1d", 24 * time.Hour}, {"3d", 72 * time.Hour},
}

// ring counts events in len(slots) consecutive buckets of width, the
// newest being bucket number head (time since the Unix epoch / width).
type ring struct {
	width time.Duration
	slots []slo.Events
	head  int64
	used  bool
}

func newRing(width, span time.Duration) *ring {
	n := int((span + width - 1) / width)
	return &ring{width: width, slots: make([]slo.Events, max(n, 1))}
}

func (r *ring) bucket(t time.Time) int64 { return t.UnixNano() / int64(r.width) }

// advance moves head to b, clearing the buckets it passes: their time
// has come round again.
func (r *ring) advance(b int64) {
	n := int64(len(r.slots))
	if !r.used {
		r.head, r.used = b, true
		return
	}
	if b <= r.head {
		return
	}
	if b-r.head >= n {
		clear(r.slots)
	} else {
		for i := r.head + 1; i <= b; i++ {
			r.slots[i%n] = slo.Events{}
		}
	}
	r.head = b
}

// add counts e at t; events older than the ring's span are dropped.
func (r *ring) add(t time.Time, e slo.Events) {
	b := r.bucket(t)
	r.advance(b)
	if b <= r.head-int64(len(r.slots)) {
		return
	}
	s := &r.slots[b%int64(len(r.slots))]
	s.Good += e.Good
	s.Bad += e.Bad
}

// sum totals the buckets of the last span up to now (at most the ring).
func (r *ring) sum(now time.Time, span time.Duration) slo.Events {
	var out slo.Events
	if !r.used {
		return out
	}
	r.advance(r.bucket(now))
	k := min(int64((span+r.width-1)/r.width), int64(len(r.slots)))
	n := int64(len(r.slots))
	for b := r.head - k + 1; b <= r.head; b++ {
		s := r.slots[((b%n)+n)%n]
		out.Good += s.Good
		out.Bad += s.Bad
	}
	return out
}

// windows are one objective's rolling windows for one target.
type windows struct {
	minutes *ring // burn-rate windows, up to 3 days
	hours   *ring // the SLO window, for the remaining budget
	sloSpan time.Duration
	since   time.Time // when the process began counting them
}

func newWindows(sloWindow time.Duration, since time.Time) *windows {
	return &windows{minutes: newRing(minuteWidth, longestWindow), hours: newRing(hourWidth, sloWindow),
		sloSpan: sloWindow, since: since}
}

func (w *windows) add(at time.Time, e slo.Events) {
	w.minutes.add(at, e)
	w.hours.add(at, e)
}

// resize keeps the counts of a window whose SLO window changed.
func (w *windows) resize(sloWindow time.Duration) {
	if sloWindow == w.sloSpan {
		return
	}
	old := w.hours
	w.hours, w.sloSpan = newRing(hourWidth, sloWindow), sloWindow
	if !old.used {
		return
	}
	n := int64(len(old.slots))
	for b := old.head - n + 1; b <= old.head; b++ {
		if e := old.slots[((b%n)+n)%n]; e.Total() > 0 {
			w.hours.add(time.Unix(0, b*int64(hourWidth)), e)
		}
	}
}

// slots is the number of buckets held: constant for the windows' life.
func (w *windows) slots() int { return len(w.minutes.slots) + len(w.hours.slots) }
