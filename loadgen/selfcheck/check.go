// Package selfcheck judges whether the load generator itself distorted a
// run's figures (schedule lag, a saturated CPU, a busy machine) and reads
// the host counters (/proc/stat, /proc/pressure/cpu, getrusage) that name
// the cause. It knows histograms and metric names, not loadgen's types:
// loadgen samples the host through it and hands it the histograms.
package selfcheck

import (
	"fmt"
	"math"
	"strings"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The self-check judges the generator's lateness against what it
// distorts. Every open-loop latency measured from the intended start
// (TTFT, TTFAT, E2E) includes the request's schedule lag (send − intended
// start) by design; loadgen's Metrics.LagCorrected keeps the same figures less that
// lag. A figure is distorted when the lag moved it by more than the stated
// share (DefaultMaxShift), by more than ShiftFloorMicros, and past the
// 95% sampling interval of the lag-corrected figure (so the sample
// resolves the shift: on-time sends could not plausibly have given the
// reported value; a p90 of 100 requests is uncertain by more than a few
// late sends move it, a p90 of 5000 is not); the verdicts
// an SLO gives are judged the same way by the slo package's lag-flip rule.
// A generator whose own CPU was saturated while sending distorts every
// timestamp it takes, not only its sends: that is invalid by itself. The
// cause of the lag is named from the generator's CPU and the machine's
// (Cause).
const (
	// DefaultMaxShift is the share of a figure the generator may move
	// before the run is distorted (Judge's maxShift 0).
	DefaultMaxShift = 0.10
	// ShiftFloorMicros: a shift of 1 ms or less never distorts: a busy
	// machine's timer and scheduling granularity, not a bottleneck.
	ShiftFloorMicros = 1000
	// TailEvents: a quantile is judged when at least this many events lie
	// beyond it (p50 from 20 events, p90 from 100, p99 from 1000): a
	// quantile with fewer is a few events, its shift their noise.
	TailEvents = 10
	// CPUSaturated: the generator's process used this share of its cores
	// while sending.
	CPUSaturated = 0.9
	// BusyPressure: some task waited for a CPU this share of the sending
	// window (PSI "some"), or other processes kept half the cores busy:
	// the machine's run queue can delay the generator's timers.
	BusyPressure = 0.2
	BusyOthers   = 0.5
)

// quantilesTable are the quantiles judged (those summary.json
// reports that a run of ordinary length can resolve).
var quantilesTable = []float64{50, 90, 99}

// Causes of schedule lag (Result.Cause).
const (
	CauseGeneratorCPU = "generator_cpu" // the generator's own CPU
	CauseRunQueue     = "run_queue"     // other processes on the machine
	CauseInFlightCap  = "in_flight_cap" // requests waited for a free slot (--max-inflight)
	CauseUnknown      = "unknown"       // neither was high
)

// Result says whether the load generator itself may have distorted the
// run's figures, and why. Distorted means a reported figure (or, judged by
// slo, a verdict) could move by more than MaxShift because of the
// generator: the CLI exits 3.
type Result struct {
	Distorted bool     `json:"distorted"`
	Reasons   []string `json:"reasons"` // one line per cause; also in the summary's warnings
	// Warnings are notable lag that did not distort: a busy machine.
	Warnings []string `json:"warnings,omitempty"`
	// MaxShift is the stated share a figure may move.
	MaxShift float64 `json:"max_shift"`
	// LagSamples is how many sends were judged (measured, successful
	// requests); LagP50Ms and LagP99Ms their schedule lag.
	LagSamples int64   `json:"lag_samples"`
	LagP50Ms   float64 `json:"lag_p50_ms"`
	LagP99Ms   float64 `json:"lag_p99_ms"`
	// Shifts are the figures judged, each with its lag-corrected value.
	Shifts []Shift `json:"shifts,omitempty"`
	// Cause names what made sends late (Cause*), CauseText in words; empty
	// when nothing was late enough to matter.
	Cause     string `json:"cause,omitempty"`
	CauseText string `json:"cause_text,omitempty"`
	// CPUUtilization is loadgen's Info.CPUUtilization (the whole run, drain
	// included); Host the load over the sending window.
	CPUUtilization float64  `json:"cpu_utilization"`
	Host           HostLoad `json:"host"`
}

// Shift is one reported figure and what it would be had every
// request been sent on time.
type Shift struct {
	Figure      string  `json:"figure"` // "TTFT p90"
	ValueMs     float64 `json:"value_ms"`
	CorrectedMs float64 `json:"corrected_ms"`
	ShiftMs     float64 `json:"shift_ms"`
	Share       float64 `json:"share"` // ShiftMs / ValueMs
	// CorrectedHighMs is the upper end of the lag-corrected figure's 95%
	// sampling interval (distribution-free, from order statistics): a
	// reported value at or under it is a shift the sample cannot tell from
	// the server's own spread.
	CorrectedHighMs float64 `json:"corrected_high_ms"`
	// Resolved: ValueMs is above CorrectedHighMs.
	Resolved bool `json:"resolved"`
}

// quantileHigh is the value at the upper end of the 95% interval of the
// q-th percentile of h's n values: the rank n·p + 1.96·√(n·p·(1−p)) (the
// normal approximation of the binomial count below the quantile).
func quantileHigh(h *hdrhistogram.Histogram, q float64) int64 {
	n := float64(h.TotalCount())
	p := q / 100
	rank := n*p + 1.96*math.Sqrt(n*p*(1-p))
	if rank >= n {
		return h.Max()
	}
	return h.ValueAtQuantile(100 * rank / n)
}

// Input is what Judge judges.
type Input struct {
	Lag *hdrhistogram.Histogram // schedule lag, µs
	// Metrics are the lag-measured metrics' names, in the order judged.
	Metrics []string
	// Figures and Corrected are their histograms as reported and less each
	// request's lag, by metric name; a metric missing from Corrected is not
	// judged.
	Figures, Corrected map[string]*hdrhistogram.Histogram
	CPUUtilization     float64
	Host               HostLoad
	Dropped            int64
}

// Judge judges the generator (see the rule above); maxShift is the
// stated share a figure may move (0: DefaultMaxShift).
func Judge(in Input, maxShift float64) Result {
	if maxShift <= 0 {
		maxShift = DefaultMaxShift
	}
	sc := Result{Reasons: []string{}, MaxShift: maxShift, CPUUtilization: in.CPUUtilization, Host: in.Host}
	if in.Lag != nil && in.Lag.TotalCount() > 0 {
		sc.LagSamples = in.Lag.TotalCount()
		sc.LagP50Ms = float64(in.Lag.ValueAtQuantile(50)) / 1000
		sc.LagP99Ms = float64(in.Lag.ValueAtQuantile(99)) / 1000
	}
	var worst *Shift
	var distorting []string
	for _, name := range in.Metrics {
		fig, cor := in.Figures[name], in.Corrected[name]
		if fig == nil || cor == nil || fig.TotalCount() == 0 {
			continue
		}
		n := fig.TotalCount()
		for _, q := range quantilesTable {
			if float64(n)*(100-q)/100 < TailEvents {
				continue
			}
			v, c, hi := fig.ValueAtQuantile(q), cor.ValueAtQuantile(q), quantileHigh(cor, q)
			fs := Shift{Figure: fmt.Sprintf("%s p%g", strings.ToUpper(name), q), ValueMs: float64(v) / 1000, CorrectedMs: float64(c) / 1000,
				CorrectedHighMs: float64(hi) / 1000, Resolved: v > hi}
			fs.ShiftMs = max(fs.ValueMs-fs.CorrectedMs, 0)
			if v > 0 {
				fs.Share = fs.ShiftMs / fs.ValueMs
			}
			sc.Shifts = append(sc.Shifts, fs)
			if worst == nil || fs.Share > worst.Share {
				worst = &sc.Shifts[len(sc.Shifts)-1]
			}
			if fs.Share > maxShift && fs.ShiftMs*1000 > ShiftFloorMicros && fs.Resolved {
				distorting = append(distorting, fmt.Sprintf("%s %.2f ms would be %.2f ms had every request been sent on time (moved %.2f ms, %.0f%%, past the corrected figure's 95%% sampling interval, up to %.2f ms)",
					fs.Figure, fs.ValueMs, fs.CorrectedMs, fs.ShiftMs, 100*fs.Share, fs.CorrectedHighMs))
			}
		}
	}
	notable := worst != nil && worst.ShiftMs*1000 > ShiftFloorMicros
	saturated := ownShare(in) >= CPUSaturated
	if len(distorting) > 0 || notable || saturated {
		sc.Cause, sc.CauseText = Cause(in.CPUUtilization, in.Host, in.Dropped)
	}
	if len(distorting) > 0 {
		sc.Distorted = true
		sc.Reasons = append(sc.Reasons, fmt.Sprintf("schedule lag moved reported figures by more than %.0f%%: %s; cause: %s",
			100*maxShift, strings.Join(distorting, "; "), sc.CauseText))
	}
	if saturated {
		sc.Distorted = true
		sc.Reasons = append(sc.Reasons, fmt.Sprintf(
			"load generator CPU saturated: %.0f%% of %d cores busy while sending; every timestamp it took may be late, not only its sends",
			100*ownShare(in), cores(in)))
	}
	if !sc.Distorted && notable {
		sc.Warnings = append(sc.Warnings, fmt.Sprintf(
			"requests were sent late (schedule lag p50 %.2f ms, p99 %.2f ms): the largest figure moved is %s, by %.2f ms (%.1f%%; %s); cause: %s",
			sc.LagP50Ms, sc.LagP99Ms, worst.Figure, worst.ShiftMs, 100*worst.Share, inBound(worst, maxShift), sc.CauseText))
	}
	return sc
}

// inBound says why a notable shift did not distort.
func inBound(fs *Shift, maxShift float64) string {
	if fs.Share <= maxShift {
		return fmt.Sprintf("within the %.0f%% bound", 100*maxShift)
	}
	return fmt.Sprintf("within the corrected figure's 95%% sampling interval, up to %.2f ms: the sample cannot tell the shift from the server's own spread", fs.CorrectedHighMs)
}

// ownShare is the generator's CPU over the sending window as a share of
// its cores (the whole run's when the window was not measured).
func ownShare(in Input) float64 {
	if in.Host.WindowS > 0 && in.Host.Cores > 0 {
		return in.Host.OwnCores / float64(in.Host.Cores)
	}
	return in.CPUUtilization
}

func cores(in Input) int {
	if in.Host.Cores > 0 {
		return in.Host.Cores
	}
	return numCPU()
}

// Cause names what made sends late, from the generator's CPU and the
// machine's over the sending window (h), the whole run's CPU use
// (cpuUtilization, 0–1, used when h was not measured) and the requests
// dropped at the in-flight cap. It returns a Cause* constant and a
// sentence naming the readings it used.
func Cause(cpuUtilization float64, h HostLoad, dropped int64) (kind, text string) {
	n := h.Cores
	if n <= 0 {
		n = numCPU()
	}
	own := h.OwnCores
	if h.WindowS <= 0 {
		own = cpuUtilization * float64(n)
	}
	readings := fmt.Sprintf("the generator used %.2f of %d cores", own, n)
	if h.OtherCores >= 0 {
		readings += fmt.Sprintf(", other processes %.2f", h.OtherCores)
	}
	if h.CPUPressure >= 0 {
		readings += fmt.Sprintf(", some task waited for a CPU %.0f%% of the time (PSI)", 100*h.CPUPressure)
	}
	if h.Source != "" {
		readings += " [" + h.Source + "]"
	}
	othersBusy := h.OtherCores >= BusyOthers*float64(n) || h.CPUPressure >= BusyPressure
	switch {
	case own >= CPUSaturated*float64(n):
		return CauseGeneratorCPU, "the generator's own CPU: " + readings
	case dropped > 0:
		return CauseInFlightCap, fmt.Sprintf("the in-flight cap (--max-inflight): requests waited for a free slot and %d were dropped; %s", dropped, readings)
	case othersBusy && h.OtherCores > own:
		return CauseRunQueue, "the machine's run queue (other processes): " + readings
	case othersBusy:
		return CauseGeneratorCPU, "the generator's own CPU, on a busy machine: " + readings
	}
	return CauseUnknown, "neither the generator's CPU nor other processes were high: " + readings
}
