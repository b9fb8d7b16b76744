package slo

import (
	"math"
	"slices"
	"strconv"
	"testing"
	"time"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestBurnFactors(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, c := range []struct {
		window time.Duration
		tiers  []BurnRateTier
		want   []float64
	}{
		{30 * day, slothTiersTable, []float64{14.4, 6, 3, 1}},
		{28 * day, slothTiersTable, []float64{13.44, 5.6, 2.8, 0.9333333333333333}},
	} {
		for i, a := range Alerts(c.window, 0.001, c.tiers) {
			// Exactly the nearest float: rule files print it with %g.
			if got := strconv.FormatFloat(a.Factor, 'g', -1, 64); got != strconv.FormatFloat(c.want[i], 'g', -1, 64) {
				t.Errorf("%v tier %d: factor prints %s, want %v", c.window, i, got, c.want[i])
			}
			if !near(a.Factor, c.want[i]) || !near(a.ErrorRatio, c.want[i]*0.001) {
				t.Errorf("%v tier %d: factor %v, want %v", c.window, i, a.Factor, c.want[i])
			}
			if a.Short*12 != a.Long {
				t.Errorf("tier %d: short %v is not 1/12 of long %v", i, a.Short, a.Long)
			}
		}
	}
}

func TestBudgetMath(t *testing.T) {
	t.Parallel()
	if b := ErrorBudget(0.999); !near(b, 0.001) {
		t.Fatalf("budget %v", b)
	}
	if f := BurnRate(0.0144, 0.001); !near(f, 14.4) {
		t.Fatalf("burn %v", f)
	}
	// 14.4× for 1 hour of a 30-day window spends 2% of the budget.
	if c := BudgetConsumed(14.4, time.Hour, 30*24*time.Hour); !near(c, 0.02) {
		t.Fatalf("consumed %v", c)
	}
	if r := BudgetRemaining(5, 10000, 0.001); !near(r, 0.5) {
		t.Fatalf("remaining %v", r)
	}
	if r := BudgetRemaining(0, 0, 0.001); r != 1 {
		t.Fatalf("remaining with no events %v", r)
	}
	if !math.IsInf(BurnRate(0.1, 0), 1) || BurnRate(0, 0) != 0 {
		t.Fatal("zero budget")
	}
	page := Alerts(30*24*time.Hour, 0.001, slothTiersTable)[0]
	// Both windows must exceed 14.4 × 0.001.
	if page.Firing(0.1, 0.0083) || !page.Firing(0.1, 0.0150) || page.Firing(0.0140, 0.1) {
		t.Fatal("Firing")
	}
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: l, metric: ttft, threshold: 1s, target: 99.9%}\n  - {name: f, metric: requests_per_s, threshold: 1}\n")
	if b, ok := spec.Objectives[0].ErrorBudget(); !ok || !near(b, 0.001) {
		t.Fatalf("latency budget %v", b)
	}
	if _, ok := spec.Objectives[1].ErrorBudget(); ok {
		t.Fatal("a floor has no error budget")
	}
}

// TestBurnRateWindows: every window of the tier table, once, shortest
// first; what the canary and the exported labels derive from.
func TestBurnRateWindows(t *testing.T) {
	t.Parallel()
	h := time.Hour
	want := []time.Duration{5 * time.Minute, 30 * time.Minute, h, 2 * h, 6 * h, 24 * h, 72 * h}
	if !slices.Equal(burnRateWindowsTable, want) {
		t.Errorf("BurnRateWindows %v, want %v", burnRateWindowsTable, want)
	}
	page := slothTiersTable[:2]
	if got := TierWindows(page); !slices.Equal(got, []time.Duration{5 * time.Minute, 30 * time.Minute, h, 6 * h}) {
		t.Errorf("page windows %v", got)
	}
}
