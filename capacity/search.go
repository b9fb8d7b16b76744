package capacity

import (
	"context"
	"math"
)

// Outcome is what the search needs to know of a level that ran.
type Outcome struct {
	Pass      bool
	Saturated bool
	// Score is the worst latency objective's quantile over its threshold
	// (1 is the boundary); 0 when unknown.
	Score float64
	// FloorsOnly: the level failed on throughput floors alone. Floors
	// rise with load, so below every level that passed such a level is
	// too little demand, not too much load: the search reads it as low.
	FloorsOnly bool
}

// runFunc runs one level, for the attempt-th time (1, or 2 for a
// confirmation). A non-nil error stops the search (an interrupted or
// unwritable run).
type runFunc func(ctx context.Context, l Level, attempt int) (Outcome, error)

// Search is the plan of a sweep: a range to search or a list to run.
type Search struct {
	From, To Level   // a range (both set, same kind, From below To)
	Levels   []Level // or a list, run in ascending order
	// Precision ends a range search when hi/lo ≤ 1 + Precision (default
	// 0.05); concurrencies also end at hi − lo ≤ 1.
	Precision float64
	// MaxLevels bounds the levels run (default 16).
	MaxLevels int
}

// bracket is the search's state over a range.
type bracket struct {
	lo, hi       Level
	loOut, hiOut Outcome
}

// run searches: see the package doc. It returns the levels run, in order,
// and the highest that passed (ok false when none did).
// limited says MaxLevels stopped a range search before the precision.
func (s Search) run(ctx context.Context, f runFunc) (best Level, ok, limited bool, err error) {
	maxLevels := s.maxLevels()
	prec := s.Precision
	if prec <= 0 {
		prec = 0.05
	}
	runs := 0
	do := func(l Level) (Outcome, error) {
		runs++
		return f(ctx, l, 1)
	}
	if len(s.Levels) > 0 {
		failed := false
		for _, l := range s.Levels {
			if runs >= maxLevels || ctx.Err() != nil {
				break
			}
			o, err := do(l)
			if err != nil {
				return best, ok, false, err
			}
			if o.Pass && !failed {
				best, ok = l, true
			}
			if !o.Pass && !(o.FloorsOnly && !ok) {
				failed = true // monotone: a pass above a failure is not the SLO-max
			}
			if o.Saturated {
				break
			}
		}
		return best, ok, false, nil
	}

	b := bracket{lo: s.From, hi: s.To}
	o, err := do(b.lo)
	if err != nil || !o.Pass && !o.FloorsOnly {
		return best, false, false, err
	}
	b.loOut = o
	if o.Pass {
		best, ok = b.lo, true
	}
	o, err = do(b.hi)
	if err != nil {
		return best, ok, false, err
	}
	if o.Pass {
		return b.hi, true, false, nil
	}
	b.hiOut = o
	fails := []bracketEnd{{b.hi, o}}
	confirmed, reruns := false, 0
	// streak counts interpolations in a row that moved the same end of
	// the bracket: two, and the next step bisects.
	streak, lastEnd := 0, 0
	for runs < maxLevels && ctx.Err() == nil {
		if b.narrow(prec) {
			// The failure just above the SLO-max must repeat (a saturated
			// one need not): a loaded machine can slow one level, rarely the
			// same level twice.
			if confirmed || b.hiOut.Saturated || reruns >= 2 {
				break
			}
			runs++
			reruns++
			o, err := f(ctx, b.hi, 2)
			if err != nil {
				return best, ok, false, err
			}
			if !o.Pass {
				confirmed = true
				continue
			}
			// The first failure was noise: the level passes, and the next
			// failure above it is the bracket's top.
			b.lo, b.loOut, best, ok = b.hi, o, b.hi, true
			b.hi, b.hiOut = nextFailAbove(fails, b.lo)
			continue
		}
		next, interp := b.next(streak < 2)
		if next.Value() <= b.lo.Value() || next.Value() >= b.hi.Value() {
			break
		}
		o, err := do(next)
		if err != nil {
			return best, ok, false, err
		}
		end := -1
		switch {
		case o.Pass:
			b.lo, b.loOut = next, o
			best, ok, end = next, true, 1
		case o.FloorsOnly && !ok:
			b.lo, b.loOut, end = next, o, 1 // too little demand: look higher
		default:
			b.hi, b.hiOut = next, o
			fails = append(fails, bracketEnd{next, o})
		}
		switch {
		case !interp:
			streak = 0
		case end == lastEnd:
			streak++
		default:
			streak = 1
		}
		lastEnd = end
	}
	limited = runs >= maxLevels && !b.narrow(prec)
	return best, ok, limited, nil
}

func (s Search) maxLevels() int {
	if s.MaxLevels <= 0 {
		return 16
	}
	return s.MaxLevels
}

type bracketEnd struct {
	l Level
	o Outcome
}

// nextFailAbove is the lowest failing level above lo (the range's top
// always failed).
func nextFailAbove(fails []bracketEnd, lo Level) (Level, Outcome) {
	best := -1
	for i, f := range fails {
		if f.l.Value() > lo.Value() && (best < 0 || f.l.Value() < fails[best].l.Value()) {
			best = i
		}
	}
	return fails[best].l, fails[best].o
}

// narrow reports whether the bracket is as tight as asked.
func (b *bracket) narrow(prec float64) bool {
	if b.lo.Closed() {
		return b.hi.Concurrency-b.lo.Concurrency <= 1 ||
			float64(b.hi.Concurrency) <= float64(b.lo.Concurrency)*(1+prec)
	}
	return b.hi.Rate <= b.lo.Rate*(1+prec)
}

// next picks the next level inside the bracket, by interpolation when
// allowed and possible, else by bisection in log load. Interpolation is
// linear in load on 1/score: near saturation latency goes as
// 1/(1 − load/capacity), so 1/score falls about linearly to 0 at capacity.
func (b *bracket) next(allowInterp bool) (Level, bool) {
	lo, hi := b.lo.Value(), b.hi.Value()
	v := math.Sqrt(lo * hi)
	interp := false
	slo, shi := b.loOut.Score, b.hiOut.Score
	if allowInterp && slo > 0 && slo < 1 && shi >= 1 && !b.hiOut.Saturated {
		ilo, ihi := 1/slo, 1/shi
		t := (ilo - 1) / (ilo - ihi)
		t = min(max(t, 0.2), 0.8)
		v = lo + t*(hi-lo)
		interp = true
	}
	if b.lo.Closed() {
		c := int(math.Round(v))
		c = min(max(c, b.lo.Concurrency+1), b.hi.Concurrency-1)
		return Level{Concurrency: c}, interp
	}
	return Level{Rate: round4(v)}, interp
}
