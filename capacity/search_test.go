package capacity

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// A synthetic latency curve with a known boundary: score = s(λ)/X with
// s = D0/(1 − λ/cap), the shape of the simulator's step time. The search
// ends with the boundary in [SLO-max, SLO-max·(1+precision)) and runs
// fewer levels than bisection would.
func TestSearchBracketsTheBoundary(t *testing.T) {
	const capRate, d0, x = 125.0, 2.0, 10.0 // boundary where s = X: λ = cap·(1 − D0/X) = 100
	boundary := capRate * (1 - d0/x)
	f := func(_ context.Context, l Level, _ int) (Outcome, error) {
		if l.Rate >= capRate {
			return Outcome{Saturated: true, Score: 100}, nil
		}
		sc := d0 / (1 - l.Rate/capRate) / x
		return Outcome{Pass: sc <= 1, Score: sc}, nil
	}
	for _, r := range [][2]float64{{10, 1000}, {50, 200}, {99, 101}, {20, 110}} {
		runs := 0
		counted := func(ctx context.Context, l Level, a int) (Outcome, error) { runs++; return f(ctx, l, a) }
		s := Search{From: Level{Rate: r[0]}, To: Level{Rate: r[1]}, Precision: 0.05}
		best, ok, _, err := s.run(context.Background(), counted)
		if err != nil || !ok {
			t.Fatalf("%v: %v %v", r, ok, err)
		}
		if best.Rate > boundary || best.Rate*1.05 < boundary {
			t.Errorf("%v: SLO-max %g, boundary %g not in [max, max·1.05)", r, best.Rate, boundary)
		}
		// Bisection's count, and the confirmation rerun.
		bisect := 3 + int(max(0, math.Ceil(math.Log2(math.Log(r[1]/r[0])/math.Log(1.05)))))
		if runs > bisect {
			t.Errorf("%v: %d levels, bisection needs %d", r, runs, bisect)
		}
	}
	// Below the range: none; above it: the top.
	if _, ok, _, _ := (Search{From: Level{Rate: 110}, To: Level{Rate: 200}}).run(context.Background(), f); ok {
		t.Error("range above the boundary gave an SLO-max")
	}
	if best, ok, _, _ := (Search{From: Level{Rate: 10}, To: Level{Rate: 90}}).run(context.Background(), f); !ok || best.Rate != 90 {
		t.Errorf("range below the boundary: %v %v, want the top", best, ok)
	}
	// Concurrencies end at neighbours.
	g := func(_ context.Context, l Level, _ int) (Outcome, error) {
		return Outcome{Pass: l.Concurrency <= 37}, nil
	}
	if best, _, _, _ := (Search{From: Level{Concurrency: 4}, To: Level{Concurrency: 256}, Precision: 0.001}).run(context.Background(), g); best.Concurrency != 37 {
		t.Errorf("concurrency search found c%d, want c37", best.Concurrency)
	}
	// A list runs ascending and stops at saturation.
	var ran []float64
	h := func(ctx context.Context, l Level, a int) (Outcome, error) {
		ran = append(ran, l.Rate)
		return f(ctx, l, a)
	}
	ls, _ := ParseLevels("130,50,90,105,150")
	best, _, _, _ := Search{Levels: ls}.run(context.Background(), h)
	if best.Rate != 90 || len(ran) != 4 || ran[3] != 130 {
		t.Errorf("list: best %v, ran %v; want 90, stopping at the saturated 130", best, ran)
	}
}

// A level slowed once by the machine fails once: its rerun passes and the
// search goes on above it, to the true boundary.
func TestSearchConfirmsTheFailureAboveTheSLOMax(t *testing.T) {
	var runs []string
	f := func(_ context.Context, l Level, attempt int) (Outcome, error) {
		runs = append(runs, fmt.Sprintf("%s#%d", l.Name(), attempt))
		pass := l.Concurrency <= 20
		if l.Concurrency == 16 && attempt == 1 {
			pass = false // noise
		}
		return Outcome{Pass: pass}, nil
	}
	best, ok, _, _ := Search{From: Level{Concurrency: 4}, To: Level{Concurrency: 64}}.run(context.Background(), f)
	if !ok || best.Concurrency != 20 {
		t.Errorf("found c%d (%v), want c20; ran %v", best.Concurrency, ok, runs)
	}
	if !slices.Contains(runs, "c16#2") || !slices.Contains(runs, "c21#2") {
		t.Errorf("ran %v: want c16 rerun (it passes) and then c21 (it fails again)", runs)
	}
}

func TestGrowthAndHeadroom(t *testing.T) {
	g, err := ParseGrowth("8%/month")
	if err != nil || math.Abs(g.PerMonth-0.08) > 1e-12 {
		t.Fatalf("8%%/month: %v %v", g, err)
	}
	y, _ := ParseGrowth("100%/year")
	if math.Abs(math.Pow(1+y.PerMonth, 12)-2) > 1e-9 {
		t.Errorf("100%%/year is %v a month", y.PerMonth)
	}
	for _, bad := range []string{"8%", "-1%/month", "8%/fortnight", "x/month"} {
		if _, err := ParseGrowth(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	// 50 → 100 req/s at 8%/month: ln 2 / ln 1.08 = 9.006 months.
	h := headroom(50, 100, g, now, false)
	if h.HeadroomPct != 100 || math.Abs(*h.MonthsToSLOMax-9.006) > 0.001 {
		t.Errorf("headroom %+v", h)
	}
	// A lower bound: the same figures, said as at least them.
	b := headroom(50, 100, g, now, true)
	if !b.LowerBound || !strings.HasPrefix(b.Note, "at least 100% headroom") || !strings.Contains(b.Note, "SLO-max ≥ 100 req/s") ||
		!strings.Contains(b.Note, "in at least 9.0 months (not before 2026-10") {
		t.Errorf("lower-bound headroom: %q", b.Note)
	}
	if p := headroom(200, 100, g, now, true); !strings.Contains(p.Note, "true headroom is unknown") || strings.Contains(p.Note, "already at or past") {
		t.Errorf("demand past a lower bound: %q", p.Note)
	}
	if h.ReachesAt.Format("2006-01") != "2026-10" {
		t.Errorf("reaches at %v", h.ReachesAt)
	}
	if h := headroom(120, 100, g, now, false); *h.MonthsToSLOMax != 0 || h.HeadroomPct > -16 {
		t.Errorf("past the SLO-max: %+v", h)
	}
}

func TestKnee(t *testing.T) {
	lv := func(name string, rate, e2e float64) results.SweepLevel {
		return results.SweepLevel{Name: name, RatePerS: rate, AchievedPerS: rate, LatencyMs: map[string]schema.Hist{"e2e": {P50: e2e}}}
	}
	// E2E = 32 ms / (1 − λ/125): elasticity λ/(125 − λ) passes 1 at 62.5.
	var ls []results.SweepLevel
	for _, r := range []float64{20, 40, 60, 80, 100} {
		ls = append(ls, lv("r", r, 32/(1-r/125)))
	}
	k := knee(ls)
	if k == nil || k.RatePerS != 60 {
		t.Fatalf("knee %+v, want the level at 60 (elasticity crosses 1 at 62.5)", k)
	}
	if knee(ls[:3]) != nil {
		t.Error("a knee below 62.5 req/s")
	}
}

// Levels a few percent apart read the slope against the next level at least
// 10% above: a 2% wobble of the median between 68 and 70 req/s is noise,
// not a knee.
func TestKneeIgnoresCloseLevelsNoise(t *testing.T) {
	lv := func(rate, e2e float64) results.SweepLevel {
		return results.SweepLevel{Name: fmt.Sprintf("r%g", rate), RatePerS: rate, AchievedPerS: rate, LatencyMs: map[string]schema.Hist{"e2e": {P50: e2e}}}
	}
	// E2E grows slower than load everywhere (elasticity 0.5), but the
	// median at 70 is 3% high: against 68 that is an elasticity over 1.
	ls := []results.SweepLevel{lv(50, 100), lv(68, 100*math.Sqrt(68.0/50)), lv(70, 1.03*100*math.Sqrt(70.0/50)), lv(90, 100*math.Sqrt(90.0/50))}
	if k := knee(ls); k != nil {
		t.Errorf("knee %+v from a 3%% wobble between levels 3%% apart", k)
	}
	// A real knee among close levels is still found, against the level
	// 10% above.
	ls[3] = lv(90, 100*math.Sqrt(70.0/50)*math.Pow(90.0/70, 3))
	if k := knee(ls); k == nil || k.RatePerS != 68 {
		t.Errorf("knee %+v, want r68 (E2E grows 2.7× as fast as load from 68 to 90)", k)
	}
}
