package slo

import (
	"fmt"
	"math"
	"slices"
	"time"
)

// Operate-phase arithmetic (Google SRE workbook, "Alerting on SLOs").
// Error budget B = 1 − target: the share of events allowed to be bad over
// the SLO window. Burn rate = observed error ratio / B: 1 spends exactly
// the budget over the window. A burn rate f held for a time d spends
// f · d / window of the budget.

// ErrorBudget is 1 − target.
func ErrorBudget(target float64) float64 { return 1 - target }

// BurnRate is the observed error ratio over the budget (0 budget: +Inf
// for any error, 0 without).
func BurnRate(errorRatio, budget float64) float64 {
	if budget <= 0 {
		if errorRatio > 0 {
			return inf
		}
		return 0
	}
	return errorRatio / budget
}

var inf = math.Inf(1)

// BudgetConsumed is the fraction of the window's budget that burn rate f
// held for d spends.
func BudgetConsumed(burnRate float64, d, window time.Duration) float64 {
	return burnRate * d.Hours() / window.Hours()
}

// BudgetRemaining is the fraction of the budget left after bad of total
// events: 1 − (bad/total)/budget (negative once overspent; 1 with no events).
func BudgetRemaining(bad, total uint64, budget float64) float64 {
	if total == 0 {
		return 1
	}
	return 1 - BurnRate(float64(bad)/float64(total), budget)
}

// BurnRateTier is one row of a multiwindow, multi-burn-rate alert policy:
// alert when the long and the short window both burn faster than a factor
// that would spend BudgetPercent of the budget within Long.
type BurnRateTier struct {
	Severity      string        `json:"severity"` // "page" or "ticket"
	BudgetPercent float64       `json:"budget_percent"`
	Long          time.Duration `json:"long"`
	Short         time.Duration `json:"short"` // 1/12 of Long in the workbook
}

// slothTiersTable are Sloth's google-30d windows: the SRE workbook's recommended
// parameters (table "Recommended parameters for an SLO-based alert": page at
// 2% in 1h and 5% in 6h, ticket at 10% in 3d; for a 30-day window burn
// factors 14.4, 6 and 1) and Sloth's ticket tier at 10% in 1d (factor 3).
var slothTiersTable = []BurnRateTier{
	{"page", 2, time.Hour, 5 * time.Minute},
	{"page", 5, 6 * time.Hour, 30 * time.Minute},
	{"ticket", 10, 24 * time.Hour, 2 * time.Hour},
	{"ticket", 10, 72 * time.Hour, 6 * time.Hour},
}

// burnRateWindowsTable are SlothTiers' windows, shortest first (5m, 30m, 1h, 2h,
// 6h, 1d, 3d): SlothTiers is the one table of burn-rate windows, and the
// generated rules (slo/rules), the canary's rolling windows and the
// exported window label values all derive from it.
var burnRateWindowsTable = TierWindows(slothTiersTable)

// TierWindows are the short and long windows of tiers, shortest first,
// without repeats.
func TierWindows(tiers []BurnRateTier) []time.Duration {
	var ws []time.Duration
	for _, t := range tiers {
		ws = append(ws, t.Short, t.Long)
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// BurnRateAlert is a tier resolved for one SLO: its burn factor and the
// error-ratio threshold both windows must exceed.
type BurnRateAlert struct {
	BurnRateTier
	Factor float64 `json:"factor"`
	// ErrorRatio is Factor × budget: the alert condition on each window's
	// observed error ratio.
	ErrorRatio float64 `json:"error_ratio"`
}

// BurnFactor is budgetPercent/100 × window / long (Sloth's
// getBurnRateFactor): 2% of 30 days within 1 hour is 14.4. It multiplies
// before it divides, so whole percents and hours give the nearest float to
// the exact factor (13.44, not 13.440000000000001), which rule files print.
func BurnFactor(budgetPercent float64, window, long time.Duration) float64 {
	return budgetPercent * window.Hours() / (100 * long.Hours())
}

// Alerts resolves tiers for an SLO window and error budget.
func Alerts(window time.Duration, budget float64, tiers []BurnRateTier) []BurnRateAlert {
	out := make([]BurnRateAlert, len(tiers))
	for i, t := range tiers {
		f := BurnFactor(t.BudgetPercent, window, t.Long)
		out[i] = BurnRateAlert{BurnRateTier: t, Factor: f, ErrorRatio: f * budget}
	}
	return out
}

// Firing reports whether the alert fires for the observed error ratios of
// its short and long windows: both must exceed ErrorRatio.
func (a BurnRateAlert) Firing(shortRatio, longRatio float64) bool {
	return shortRatio > a.ErrorRatio && longRatio > a.ErrorRatio
}

func (a BurnRateAlert) String() string {
	return fmt.Sprintf("%s: burn %.4g× over %s and %s (error ratio > %.4g)", a.Severity, a.Factor, a.Long, a.Short, a.ErrorRatio)
}
