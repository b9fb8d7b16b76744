package capacity

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

// kneeMinStep is the least throughput ratio over which the knee reads a
// slope.
const kneeMinStep = 1.1

// knee finds where latency starts to climb faster than load (see the
// package doc); nil when no pair of levels shows it.
func knee(ls []results.SweepLevel) *results.SweepPoint {
	var pts []results.SweepLevel
	for _, l := range ls {
		if !l.Saturated && l.AchievedPerS > 0 && l.LatencyMs[measure.MetricE2E].P50 > 0 {
			pts = append(pts, l)
		}
	}
	slices.SortFunc(pts, func(a, b results.SweepLevel) int { return cmpFloat(a.AchievedPerS, b.AchievedPerS) })
	for i := 0; i+1 < len(pts); i++ {
		// The slope is read against the next level at least kneeMinStep
		// above: bisection leaves levels a few percent apart near the
		// SLO-max, where a median's noise of a percent or two on a busy
		// machine reads as a large elasticity.
		j := i + 1
		for j < len(pts) && pts[j].AchievedPerS < pts[i].AchievedPerS*kneeMinStep {
			j++
		}
		if j == len(pts) {
			break
		}
		a, b := pts[i], pts[j]
		dx := math.Log(b.AchievedPerS / a.AchievedPerS)
		e := math.Log(b.LatencyMs[measure.MetricE2E].P50/a.LatencyMs[measure.MetricE2E].P50) / dx
		if e > 1 {
			return &results.SweepPoint{Level: a.Name, RatePerS: a.RatePerS, Concurrency: a.Concurrency, AchievedPerS: a.AchievedPerS,
				Elasticity: e, Note: fmt.Sprintf("E2E p50 grows %.2f× as fast as throughput from %s to %s", e, a.Name, b.Name)}
		}
	}
	return nil
}

// Growth is a demand growth rate.
type Growth struct {
	// PerMonth is the compound growth per month (0.08 = 8%).
	PerMonth float64
	// Text is as given ("8%/month").
	Text string
}

// ParseGrowth reads "8%/month", "2%/week", "50%/year" or "0.08/month".
func ParseGrowth(s string) (*Growth, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return nil, fmt.Errorf("growth %q: want RATE/PERIOD, e.g. 8%%/month", s)
	}
	num = strings.TrimSpace(num)
	pct := strings.HasSuffix(num, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(num, "%"), 64)
	if err != nil || !(v > 0) || math.IsInf(v, 0) {
		return nil, fmt.Errorf("growth %q: %q is not a positive number", s, num)
	}
	if pct {
		v /= 100
	}
	var days float64
	switch strings.TrimSpace(per) {
	case "month", "mo":
		days = daysPerMonth
	case "week", "wk":
		days = 7
	case "day", "d":
		days = 1
	case "year", "yr":
		days = 12 * daysPerMonth
	default:
		return nil, fmt.Errorf("growth %q: period %q: want day, week, month or year", s, per)
	}
	return &Growth{PerMonth: math.Pow(1+v, daysPerMonth/days) - 1, Text: s}, nil
}

// daysPerMonth is the mean Gregorian month.
const daysPerMonth = 365.2425 / 12

// headroom is the room from current to the SLO-max rate max and, with a
// growth, when demand reaches it; bound says max is only a lower bound,
// so both are at least what they say (and past it says only that demand
// is beyond what the sweep showed).
func headroom(current, max float64, g *Growth, now time.Time, bound bool) *results.SweepHeadroom {
	h := &results.SweepHeadroom{CurrentRatePerS: current, SLOMaxRatePerS: max, HeadroomPct: 100 * (max/current - 1), LowerBound: bound}
	atLeast := ""
	if bound {
		atLeast = "at least "
	}
	h.Note = fmt.Sprintf("%s%.0f%% headroom: %.3g req/s now, SLO-max %s%.3g req/s", atLeast, h.HeadroomPct, current, map[bool]string{true: "≥ ", false: ""}[bound], max)
	if bound && h.HeadroomPct < 0 {
		h.Note = fmt.Sprintf("demand (%.3g req/s) is past the highest level the sweep showed passing (%.3g req/s), a lower bound: the true headroom is unknown; sweep higher", current, max)
	}
	if g == nil {
		return h
	}
	h.Growth, h.GrowthPerMonth = g.Text, g.PerMonth
	months := 0.0
	if max > current {
		months = math.Log(max/current) / math.Log(1+g.PerMonth)
	}
	at := now.Add(time.Duration(months * daysPerMonth * 24 * float64(time.Hour))).UTC()
	h.MonthsToSLOMax, h.ReachesAt = &months, &at
	switch {
	case months == 0 && bound:
	case months == 0:
		h.Note += "; demand is already at or past the SLO-max"
	default:
		h.Note += fmt.Sprintf("; growing %s, demand reaches the SLO-max in %s%.1f months (%s%s)", g.Text, atLeast, months, map[bool]string{true: "not before ", false: ""}[bound], at.Format("2006-01-02"))
	}
	return h
}
