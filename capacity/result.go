package capacity

import (
	"fmt"
	"strings"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

// rulesTable are written into every sweep.json, so a reader knows how each
// figure was found (the package doc says the same at length).
var rulesTable = map[string]string{
	"min_requests": "each level measures at least ceil(10/(1-q)) requests after its warm-up, q the highest latency target (99% -> 1000), so at least 10 fall beyond the quantile judged; fewer: the level is short and cannot pass",
	"pass":         "a level passes when its SLO report (the same judge as validate) is PASS, the run is valid, it is not saturated and not short",
	"saturation":   "errors above the error-rate limit, more than 1% of requests dropped or cut at the end, or TTFT p50 of the last quarter of measured requests at least twice (and 50 ms above) the first quarter's",
	"search":       "range: bottom and top first, then the bracket [highest pass, lowest fail] is narrowed until hi/lo <= 1+precision (concurrency: hi-lo <= 1), by interpolating threshold/quantile of the worst latency objective to 1, linear in load (kept within the middle 60% of the bracket) or by bisection in log load; list: every level ascending until one saturates",
	"floors":       "a throughput or goodput floor above what a level's offered load can reach (open loop: the rate, times the most output tokens a request asked for) is N/A there, never FAIL; a level failing only on floors below every passing level is demand, not capacity: the search looks higher and the curve is not called non-monotone",
	"lower_bound":  "with no valid level above it failing, the SLO-max is a lower bound (lower_bound: true): the capacity is at least it; headroom and forecast are then at least theirs",
	"slo_max":      "the highest passing level; with a monotone latency curve the boundary lies in [slo_max, slo_max*(1+precision)); the failing level just above it is run again (unless saturated), and a pass then moves the bracket up: a loaded machine can slow one level, rarely the same one twice",
	"knee":         "over unsaturated levels ordered by achieved throughput, the lower level of the first neighbouring pair where the elasticity dln(E2E p50)/dln(throughput) exceeds 1: latency climbing faster than load",
	"headroom":     "slo_max rate / current rate - 1; slo_max rate is the level's rate (open loop) or its achieved throughput (closed loop); forecast months = ln(slo_max rate/current)/ln(1+monthly growth)",
}

// levelLine is a level's one-line outcome, for the log.
func levelLine(l *results.SweepLevel) string {
	verdict := "FAIL"
	switch {
	case !l.Valid:
		return "INVALID: " + strings.Join(l.InvalidReasons, "; ")
	case l.Pass:
		verdict = "PASS"
	}
	s := fmt.Sprintf("%s achieved %.1f/s, E2E p99 %.0f ms, score %.2f", verdict, l.AchievedPerS, l.LatencyMs[measure.MetricE2E].P99, l.Score)
	if l.Saturated {
		s += "; saturated: " + l.Saturation
	}
	if l.Short {
		s += fmt.Sprintf("; short: %d of %d requests measured", l.Requests.Sent, l.MinRequests)
	}
	return s
}

// notePoint says where the SLO-max p lies: between it and the failure
// above, or, as a lower bound, why the search found nothing above it.
func notePoint(p *results.SweepPoint, s Search, best Level, ls []results.SweepLevel, interrupted bool) {
	if p.LowerBound {
		var invalid []string
		for _, l := range ls {
			if l.Value() > best.Value() && !l.Valid {
				invalid = append(invalid, l.Name)
			}
		}
		switch {
		case interrupted:
			p.Note = "no level above it failed before the sweep was interrupted: the SLO-max is at least this"
		case len(invalid) > 0:
			p.Note = fmt.Sprintf("no valid level above it failed (%s INVALID): the SLO-max is at least this", strings.Join(invalid, ", "))
		case len(s.Levels) > 0 && best.Value() == s.Levels[len(s.Levels)-1].Value():
			p.Note = "every level of the list passed up to its highest: the SLO-max is at least this; add higher levels to find it"
		case len(s.Levels) > 0:
			p.Note = "no level above it failed before the level limit stopped the sweep: the SLO-max is at least this"
		default:
			p.Note = "the search went up to the top of the range and no level failed: the SLO-max is at least this; a higher top would find it"
		}
		return
	}
	if len(s.Levels) > 0 {
		p.Note = "highest passing level of the list below the first failure"
		return
	}
	lowestFail := 0.0
	for _, l := range ls {
		if !l.Pass && l.Valid && l.Value() > best.Value() && (lowestFail == 0 || l.Value() < lowestFail) {
			lowestFail = l.Value()
		}
	}
	unit := "req/s"
	if best.Closed() {
		unit = "concurrent"
	}
	p.Note = fmt.Sprintf("boundary between %g (pass) and %g %s (fail)", best.Value(), lowestFail, unit)
}

// passing is the passing run of level l (its rerun, when only that passed).
func passing(r *results.Sweep, l Level) *results.SweepLevel {
	for i := range r.Levels {
		if r.Levels[i].Pass && r.Levels[i].Value() == l.Value() {
			return &r.Levels[i]
		}
	}
	return levelNamed(r, l.Name())
}

func levelNamed(r *results.Sweep, name string) *results.SweepLevel {
	for i := range r.Levels {
		if r.Levels[i].Name == name {
			return &r.Levels[i]
		}
	}
	return &results.SweepLevel{}
}

// noSLOMax says why a sweep has no SLO-max.
func noSLOMax(r *results.Sweep) string {
	passed := false
	for _, l := range r.Levels {
		passed = passed || l.Pass
	}
	switch {
	case passed:
		return "a level passed, but not as the SLO-max (see the warnings)"
	case r.Interrupted:
		return "interrupted before a level passed"
	case r.Broken != "":
		return "the target failed every request at the lowest load"
	case len(r.Levels) > 0 && lowest(r.Levels).FloorsOnly:
		return "the lowest level failed only on throughput floors (too little demand) and none above passed"
	case len(r.Levels) > 0 && !r.Levels[0].Valid:
		return "no level passed, and " + r.Levels[0].Name + " was INVALID"
	}
	return "no level met every objective"
}
