package canary

import (
	"time"

	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
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
	minuteWidth = time.Minute
	hourWidth   = time.Hour
)

// longestWindow is the longest burn-rate window: the minute ring's span.
var longestWindow = slo.BurnRateWindows()[len(slo.BurnRateWindows())-1]

// burnWindow is one burn-rate window with its label (prom.BurnRateWindows).
type burnWindow struct {
	label string
	d     time.Duration
}

// burnWindows are slo.BurnRateWindows, by their label.
var burnWindows = func() []burnWindow {
	out := make([]burnWindow, len(slo.BurnRateWindows()))
	for i, d := range slo.BurnRateWindows() {
		out[i] = burnWindow{rules.PromDuration(d), d}
	}
	return out
}()

// ring counts events in len(slots) consecutive buckets of width, the
// newest being bucket number head (time since the Unix epoch / width).
type ring struct {
	width time.Duration
	slots []slo.Events
	// seen marks the buckets during which the canary was running: a
	// window's coverage is the share of it that they span.
	seen []bool
	head int64
	used bool
}

func newRing(width, span time.Duration) *ring {
	n := max(int((span+width-1)/width), 1)
	return &ring{width: width, slots: make([]slo.Events, n), seen: make([]bool, n)}
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
		clear(r.seen)
	} else {
		for i := r.head + 1; i <= b; i++ {
			r.slots[i%n] = slo.Events{}
			r.seen[i%n] = false
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

// mark notes that the canary ran during the buckets from from to to.
func (r *ring) mark(from, to time.Time) {
	b0, b1 := r.bucket(from), r.bucket(to)
	r.advance(b1)
	n := int64(len(r.slots))
	for b := max(b0, b1-n+1, r.head-n+1); b <= b1; b++ {
		r.seen[((b%n)+n)%n] = true
	}
}

// covered is how much of the span up to now the marked buckets cover,
// counting nothing before since (the first bucket's part before the
// canary began) and nothing after now.
func (r *ring) covered(now time.Time, span time.Duration, since time.Time) time.Duration {
	if !r.used {
		return 0
	}
	r.advance(r.bucket(now))
	from := now.Add(-span)
	if since.After(from) {
		from = since
	}
	n := int64(len(r.slots))
	var d time.Duration
	for b := max(r.bucket(from), r.head-n+1); b <= r.head; b++ {
		if !r.seen[((b%n)+n)%n] {
			continue
		}
		start, end := time.Unix(0, b*int64(r.width)), time.Unix(0, (b+1)*int64(r.width))
		if start.Before(from) {
			start = from
		}
		if end.After(now) {
			end = now
		}
		if end.After(start) {
			d += end.Sub(start)
		}
	}
	return min(d, span)
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
	// since is when counting began (this process's start, or the start
	// its state file recorded); marked is the last time mark ran.
	since, marked time.Time
}

func newWindows(sloWindow time.Duration, since time.Time) *windows {
	return &windows{minutes: newRing(minuteWidth, longestWindow), hours: newRing(hourWidth, sloWindow),
		sloSpan: sloWindow, since: since}
}

func (w *windows) add(at time.Time, e slo.Events) {
	w.minutes.add(at, e)
	w.hours.add(at, e)
}

// mark notes that the canary has been running from the last mark (or
// since, the first time) until now.
func (w *windows) mark(now time.Time) {
	from := w.marked
	if from.IsZero() {
		from = w.since
	}
	if now.Before(from) {
		return
	}
	w.minutes.mark(from, now)
	w.hours.mark(from, now)
	w.marked = now
}

// coverage is the share of the last span (a burn-rate window, or the SLO
// window when span is the SLO window) that the canary ran through.
func (w *windows) coverage(now time.Time, span time.Duration) float64 {
	if span <= 0 {
		return 0
	}
	w.mark(now)
	r := w.minutes
	if span > longestWindow {
		r = w.hours
	}
	return float64(r.covered(now, span, w.since)) / float64(span)
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
		at := time.Unix(0, b*int64(hourWidth))
		if e := old.slots[((b%n)+n)%n]; e.Total() > 0 {
			w.hours.add(at, e)
		}
		if old.seen[((b%n)+n)%n] {
			w.hours.mark(at, at)
		}
	}
}

// slots is the number of buckets held: constant for the windows' life.
func (w *windows) slots() int { return len(w.minutes.slots) + len(w.hours.slots) }

// ringState is a ring as the state file keeps it: the buckets with events
// and the runs of buckets the canary ran through, by bucket number.
type ringState struct {
	WidthS  float64     `json:"width_s"`
	Buckets [][3]uint64 `json:"buckets,omitempty"` // [bucket, good, bad]
	Seen    [][2]int64  `json:"seen,omitempty"`    // [first, last] bucket
}

func (r *ring) state() ringState {
	s := ringState{WidthS: r.width.Seconds()}
	if !r.used {
		return s
	}
	n := int64(len(r.slots))
	for b := r.head - n + 1; b <= r.head; b++ {
		i := ((b % n) + n) % n
		if e := r.slots[i]; e.Total() > 0 && b >= 0 {
			s.Buckets = append(s.Buckets, [3]uint64{uint64(b), e.Good, e.Bad})
		}
		if r.seen[i] {
			if k := len(s.Seen); k > 0 && s.Seen[k-1][1] == b-1 {
				s.Seen[k-1][1] = b
			} else {
				s.Seen = append(s.Seen, [2]int64{b, b})
			}
		}
	}
	return s
}

// restore adds a saved ring's buckets (oldest first); those older than
// the ring's span fall away as in add. A ring of another width is
// ignored.
func (r *ring) restore(s ringState) {
	if time.Duration(s.WidthS*float64(time.Second)) != r.width {
		return
	}
	for _, b := range s.Buckets {
		r.add(time.Unix(0, int64(b[0])*int64(r.width)), slo.Events{Good: b[1], Bad: b[2]})
	}
	for _, sn := range s.Seen {
		r.mark(time.Unix(0, sn[0]*int64(r.width)), time.Unix(0, sn[1]*int64(r.width)))
	}
}
