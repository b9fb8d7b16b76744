package capacity

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// Schema names sweep.json's contract: keys may be added, never renamed.
const Schema = "tailgate.sweep/v1"

// Rules are written into every sweep.json, so a reader knows how each
// figure was found (the package doc says the same at length).
var Rules = map[string]string{
	"min_requests": "each level measures at least ceil(10/(1-q)) requests after its warm-up, q the highest latency target (99% -> 1000), so at least 10 fall beyond the quantile judged; fewer: the level is short and cannot pass",
	"pass":         "a level passes when its SLO report (the same judge as validate) is PASS, the run is valid, it is not saturated and not short",
	"saturation":   "errors above the error-rate limit, more than 1% of requests dropped or cut at the end, or TTFT p50 of the last quarter of measured requests at least twice (and 50 ms above) the first quarter's",
	"search":       "range: bottom and top first, then the bracket [highest pass, lowest fail] is narrowed until hi/lo <= 1+precision (concurrency: hi-lo <= 1), by interpolating threshold/quantile of the worst latency objective to 1, linear in load (kept within the middle 60% of the bracket) or by bisection in log load; list: every level ascending until one saturates",
	"slo_max":      "the highest passing level; with a monotone latency curve the boundary lies in [slo_max, slo_max*(1+precision)); the failing level just above it is run again (unless saturated), and a pass then moves the bracket up: a loaded machine can slow one level, rarely the same one twice",
	"knee":         "over unsaturated levels ordered by achieved throughput, the lower level of the first neighbouring pair where the elasticity dln(E2E p50)/dln(throughput) exceeds 1: latency climbing faster than load",
	"headroom":     "slo_max rate / current rate - 1; slo_max rate is the level's rate (open loop) or its achieved throughput (closed loop); forecast months = ln(slo_max rate/current)/ln(1+monthly growth)",
}

// Result is sweep.json.
type Result struct {
	Schema  string       `json:"schema"`
	Tool    loadgen.Tool `json:"tool"`
	Started time.Time    `json:"started"`
	Ended   time.Time    `json:"ended"`
	Target  string       `json:"target"`
	Model   string       `json:"model"`
	// Mode is "open" (rates) or "closed" (concurrencies).
	Mode    string `json:"mode"`
	Arrival string `json:"arrival,omitempty"`
	SLO     string `json:"slo"`
	SLOFile string `json:"slo_file,omitempty"`
	// Plan is the range (bottom, top) or the list asked for.
	Plan        []string          `json:"plan"`
	Precision   float64           `json:"precision"`
	MinRequests int               `json:"min_requests"`
	Rules       map[string]string `json:"rules"`
	// Changes are the change-record ids given (--change).
	Changes []string `json:"changes,omitempty"`
	// Levels are in the order they ran.
	Levels      []LevelResult `json:"levels"`
	SLOMax      *Point        `json:"slo_max"`
	Knee        *Point        `json:"knee"`
	Headroom    *Headroom     `json:"headroom,omitempty"`
	Interrupted bool          `json:"interrupted"`
	Warnings    []string      `json:"warnings"`
}

// LevelResult is one level of sweep.json.
type LevelResult struct {
	Name        string  `json:"name"`
	RatePerS    float64 `json:"rate_per_s,omitempty"`
	Concurrency int     `json:"concurrency,omitempty"`
	// Order is when the level ran (1 = first); Dir its results directory,
	// relative to sweep.json.
	Order int    `json:"order"`
	Dir   string `json:"dir,omitempty"`
	// Attempt is 2 for the rerun that confirms the failure above the
	// SLO-max (its name then ends in "-2").
	Attempt int `json:"attempt"`
	// OfferedPerS is what the schedule made due (open loop; 0 in closed
	// loop, which offers what it achieves); AchievedPerS the completion
	// rate; GoodputPerS completions meeting the goodput constraints.
	OfferedPerS      float64                 `json:"offered_per_s"`
	AchievedPerS     float64                 `json:"achieved_per_s"`
	GoodputPerS      float64                 `json:"goodput_per_s"`
	OutputTokensPerS float64                 `json:"output_tokens_per_s"`
	Requests         loadgen.Counts          `json:"requests"`
	MinRequests      int                     `json:"min_requests"`
	Short            bool                    `json:"short"`
	LatencyMs        map[string]loadgen.Hist `json:"latency_ms"`
	// Status is the SLO report's: PASS, FAIL or INVALID; Pass adds
	// validity, saturation and length.
	Status   string        `json:"status"`
	Pass     bool          `json:"pass"`
	Score    float64       `json:"score"`
	Verdicts []slo.Verdict `json:"verdicts"`
	Problems []slo.Problem `json:"problems,omitempty"`
	Valid    bool          `json:"valid"`
	// InvalidReasons are the run's validity reasons.
	InvalidReasons []string `json:"invalid_reasons,omitempty"`
	Saturated      bool     `json:"saturated"`
	Saturation     string   `json:"saturation,omitempty"`
	// TTFT medians of the first and last quarter of measured requests.
	TTFTFirstQuarterP50Ms float64 `json:"ttft_first_quarter_p50_ms"`
	TTFTLastQuarterP50Ms  float64 `json:"ttft_last_quarter_p50_ms"`
	// Telemetry: GPU utilisation (0–1), the server's queue-delay
	// histogram gained over the level, and its queue depth and batch.
	GPUUtilization *telemetry.Stats            `json:"gpu_utilization,omitempty"`
	QueueDelay     *telemetry.HistogramSummary `json:"queue_delay,omitempty"`
	ServerWaiting  *telemetry.Stats            `json:"server_waiting,omitempty"`
	ServerRunning  *telemetry.Stats            `json:"server_running,omitempty"`
	// Energy is the GPUs' energy over the level's measured window beside
	// its work in that window: joules per output token and per request,
	// and the cost per million output tokens at --gpu-hour-cost (absent
	// without an energy source; EnergyUnavailable then says why).
	Energy            *results.Energy `json:"energy,omitempty"`
	EnergyUnavailable string          `json:"energy_unavailable,omitempty"`
	Warnings          []string        `json:"warnings,omitempty"`
}

func (l *LevelResult) value() float64 {
	if l.Concurrency > 0 {
		return float64(l.Concurrency)
	}
	return l.RatePerS
}

// Load is the level's load on a common axis: the offered rate in open
// loop, the achieved rate in closed loop.
func (l *LevelResult) Load() float64 {
	if l.Concurrency > 0 {
		return l.AchievedPerS
	}
	return l.RatePerS
}

func (l *LevelResult) line() string {
	verdict := "FAIL"
	switch {
	case !l.Valid:
		return "INVALID: " + strings.Join(l.InvalidReasons, "; ")
	case l.Pass:
		verdict = "PASS"
	}
	s := fmt.Sprintf("%s achieved %.1f/s, E2E p99 %.0f ms, score %.2f", verdict, l.AchievedPerS, l.LatencyMs[loadgen.MetricE2E].P99, l.Score)
	if l.Saturated {
		s += "; saturated: " + l.Saturation
	}
	if l.Short {
		s += fmt.Sprintf("; short: %d of %d requests measured", l.Requests.Sent, l.MinRequests)
	}
	return s
}

// Point is a level of note: the SLO-max or the knee.
type Point struct {
	Level        string  `json:"level"`
	RatePerS     float64 `json:"rate_per_s,omitempty"`
	Concurrency  int     `json:"concurrency,omitempty"`
	AchievedPerS float64 `json:"achieved_per_s"`
	Note         string  `json:"note,omitempty"`
	// Elasticity is the knee's: Δln(E2E p50)/Δln(throughput) above it.
	Elasticity float64 `json:"elasticity,omitempty"`
	// Energy is the level's (the SLO-max's: energy and cost per token at
	// the highest load that meets the SLO).
	Energy *results.Energy `json:"energy,omitempty"`
}

// rate is the point's rate: the level's in open loop, achieved in closed.
func (p *Point) rate() float64 {
	if p.Concurrency > 0 {
		return p.AchievedPerS
	}
	return p.RatePerS
}

func (p *Point) note(s Search, best Level, ls []LevelResult) {
	if len(s.Levels) > 0 {
		p.Note = "highest passing level of the list below the first failure"
		return
	}
	if best.Value() == s.To.Value() {
		p.Note = "the top of the range passed: the SLO-max is at least this"
		return
	}
	lowestFail := 0.0
	for _, l := range ls {
		if !l.Pass && l.value() > best.Value() && (lowestFail == 0 || l.value() < lowestFail) {
			lowestFail = l.value()
		}
	}
	unit := "req/s"
	if best.Closed() {
		unit = "concurrent"
	}
	p.Note = fmt.Sprintf("boundary between %g (pass) and %g %s (fail)", best.Value(), lowestFail, unit)
}

// passing is the passing run of level l (its rerun, when only that passed).
func (r *Result) passing(l Level) *LevelResult {
	for i := range r.Levels {
		if r.Levels[i].Pass && r.Levels[i].value() == l.Value() {
			return &r.Levels[i]
		}
	}
	return r.level(l.Name())
}

func (r *Result) level(name string) *LevelResult {
	for i := range r.Levels {
		if r.Levels[i].Name == name {
			return &r.Levels[i]
		}
	}
	return &LevelResult{}
}

// Read reads a sweep.json from dir.
func Read(dir results.Dir) (*Result, error) {
	p := dir.Path(results.SweepFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %v", p, err)
	}
	if r.Schema != Schema {
		return nil, fmt.Errorf("%s: schema %q, want %q", p, r.Schema, Schema)
	}
	return &r, nil
}

// noSLOMax says why a sweep has no SLO-max.
func (r *Result) noSLOMax() string {
	passed := false
	for _, l := range r.Levels {
		passed = passed || l.Pass
	}
	switch {
	case passed:
		return "a level passed, but not as the SLO-max (see the warnings)"
	case r.Interrupted:
		return "interrupted before a level passed"
	case len(r.Levels) > 0 && !r.Levels[0].Valid:
		return "no level passed, and " + r.Levels[0].Name + " was INVALID"
	}
	return "no level met every objective"
}
