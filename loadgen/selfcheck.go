package loadgen

import (
	"fmt"
	"math"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Self-check thresholds: when the load generator may have distorted what
// it measured. Lag matters only against the latencies it distorts, and
// only when sustained: one late send in a short run is an outlier that
// moves a small sample's p99, not a bottleneck.
const (
	// LagFloorMicros and LagRelative: a send counts as late when its
	// schedule lag exceeds 1 ms and 5% of the median TTFT (E2E where no
	// request had a token).
	LagFloorMicros = 1000
	LagRelative    = 0.05
	// LateFraction, LateZ and LateMin: lag is sustained when more than 1%
	// of sends are late with 97.5% confidence (the Wilson score interval's
	// lower bound at z = 1.96 is above 1%), and at least 2 were: one late
	// send is never sustained, two of 45 are (p99 and p95 then hold the
	// generator's delay), 5 of 500 are not.
	LateFraction = 0.01
	LateZ        = 1.96
	LateMin      = 2
	// CPUWarnRatio: the generator's process used more than 90% of the
	// CPU time its cores offer.
	CPUWarnRatio = 0.9
)

// SelfCheck says whether the load generator itself may have distorted the
// run's figures, and why. A distorted run is invalid: latencies then
// include the generator's own delay (the CLI exits 3).
type SelfCheck struct {
	Distorted bool     `json:"distorted"`
	Reasons   []string `json:"reasons"` // one line per cause; also in the summary's warnings
	// LagSamples is how many sends were judged (measured, successful
	// requests), LateRequests how many of them were later than LagLimitMs.
	LagSamples   int64   `json:"lag_samples"`
	LateRequests int64   `json:"late_requests"`
	LagLimitMs   float64 `json:"lag_limit_ms"`
	// CPUUtilization is Info.CPUUtilization, judged against CPUWarnRatio.
	CPUUtilization float64 `json:"cpu_utilization"`
}

// CheckSelf judges the generator from the run's schedule-lag histogram, its
// TTFT and E2E histograms (µs; TTFT may be empty) and its CPU use.
func CheckSelf(lag, ttft, e2e *hdrhistogram.Histogram, cpuUtilization float64) SelfCheck {
	sc := SelfCheck{Reasons: []string{}, CPUUtilization: cpuUtilization}
	ref, refName := ttft, "TTFT"
	if ref.TotalCount() == 0 {
		ref, refName = e2e, "E2E"
	}
	limit := int64(LagFloorMicros)
	if ref.TotalCount() > 0 {
		limit = max(limit, int64(LagRelative*float64(ref.ValueAtQuantile(50))))
	}
	sc.LagLimitMs = float64(limit) / 1000
	sc.LagSamples = lag.TotalCount()
	for _, b := range lag.Distribution() {
		if b.From > limit {
			sc.LateRequests += b.Count
		}
	}
	if sc.LateRequests >= LateMin && wilsonLower(sc.LateRequests, sc.LagSamples, LateZ) > LateFraction {
		sc.Distorted = true
		sc.Reasons = append(sc.Reasons, fmt.Sprintf(
			"load generator is a bottleneck: schedule lag p99 %.2f ms; %d of %d requests (%.1f%%) sent more than %.2f ms late (limit: %.0f%% of %s p50, at least %.0f ms); latencies include the generator's own delay",
			float64(lag.ValueAtQuantile(99))/1000, sc.LateRequests, sc.LagSamples,
			100*float64(sc.LateRequests)/float64(sc.LagSamples), sc.LagLimitMs, LagRelative*100, refName,
			float64(LagFloorMicros)/1000))
	}
	if cpuUtilization > CPUWarnRatio {
		sc.Distorted = true
		sc.Reasons = append(sc.Reasons, fmt.Sprintf(
			"load generator CPU saturated: %.0f%% of %d cores busy; it may be what was measured",
			cpuUtilization*100, numCPU()))
	}
	return sc
}

// wilsonLower is the lower bound of the Wilson score interval for k
// successes in n trials: the smallest rate the sample is consistent with.
func wilsonLower(k, n int64, z float64) float64 {
	if n == 0 {
		return 0
	}
	p, nf := float64(k)/float64(n), float64(n)
	z2 := z * z
	return (p + z2/(2*nf) - z*math.Sqrt(p*(1-p)/nf+z2/(4*nf*nf))) / (1 + z2/nf)
}
