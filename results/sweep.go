package results

import (
	"encoding/json"
	"fmt"
	"github.com/tailgate-llm/tailgate/internal/version"
	"os"
	"time"

	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// SweepSchema names sweep.json's contract: keys may be added, never
// renamed.
const SweepSchema = "tailgate.sweep/v1"

// Sweep is sweep.json, a capacity sweep's result (package capacity
// runs it; report, compare and the periodic review read it).
type Sweep struct {
	Schema  string       `json:"schema"`
	Tool    version.Tool `json:"tool"`
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
	Levels []SweepLevel `json:"levels"`
	SLOMax *SweepPoint  `json:"slo_max"`
	// LowerBound says the SLO-max is only a lower bound: no valid level
	// above it failed, so the capacity may lie anywhere above it.
	LowerBound  bool           `json:"lower_bound"`
	Knee        *SweepPoint    `json:"knee"`
	Headroom    *SweepHeadroom `json:"headroom,omitempty"`
	Interrupted bool           `json:"interrupted"`
	// Broken says why the sweep measured no capacity at all: the target
	// failed every request at the lowest load, which no SLO-max can be
	// read from (a down or misconfigured server, not saturation).
	Broken   string   `json:"broken,omitempty"`
	Warnings []string `json:"warnings"`
}

// SweepLevel is one level of sweep.json.
type SweepLevel struct {
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
	OfferedPerS      float64                `json:"offered_per_s"`
	AchievedPerS     float64                `json:"achieved_per_s"`
	GoodputPerS      *float64               `json:"goodput_per_s,omitempty"` // absent: not judged (see schema.Throughput)
	OutputTokensPerS float64                `json:"output_tokens_per_s"`
	Requests         schema.Counts          `json:"requests"`
	MinRequests      int                    `json:"min_requests"`
	Short            bool                   `json:"short"`
	LatencyMs        map[string]schema.Hist `json:"latency_ms"`

	// Rates are the rates of the rate table's rows marked Sweep that have
	// no field of their own above, by name (absent: not measured).
	Rates map[string]float64 `json:"rates,omitempty"`
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
	// FloorsOnly marks a failed level whose only failures were throughput
	// floors (the run valid, not saturated, not short): below the levels
	// that pass, that is demand, not capacity (floors rise with load).
	FloorsOnly bool `json:"floors_only,omitempty"`
	// NotApplicable names the floors the level's offered load could not
	// reach (N/A there, their notes say why).
	NotApplicable []string `json:"not_applicable,omitempty"`
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
	Energy            *Energy  `json:"energy,omitempty"`
	EnergyUnavailable string   `json:"energy_unavailable,omitempty"`
	Warnings          []string `json:"warnings,omitempty"`
}

// Value is the level's own load: its concurrency (closed loop) or rate.
func (l *SweepLevel) Value() float64 {
	if l.Concurrency > 0 {
		return float64(l.Concurrency)
	}
	return l.RatePerS
}

// Load is the level's load on a common axis: the offered rate in open
// loop, the achieved rate in closed loop.
func (l *SweepLevel) Load() float64 {
	if l.Concurrency > 0 {
		return l.AchievedPerS
	}
	return l.RatePerS
}

// SweepPoint is a level of note: the SLO-max or the knee.
type SweepPoint struct {
	Level        string  `json:"level"`
	RatePerS     float64 `json:"rate_per_s,omitempty"`
	Concurrency  int     `json:"concurrency,omitempty"`
	AchievedPerS float64 `json:"achieved_per_s"`
	Note         string  `json:"note,omitempty"`
	// Elasticity is the knee's: Δln(E2E p50)/Δln(throughput) above it.
	Elasticity float64 `json:"elasticity,omitempty"`
	// Energy is the level's (the SLO-max's: energy and cost per token at
	// the highest load that meets the SLO).
	Energy *Energy `json:"energy,omitempty"`
	// LowerBound (the SLO-max's): no valid level above it failed, so the
	// SLO-max is at least this, not this.
	LowerBound bool `json:"lower_bound,omitempty"`
}

// Label is the point as a reader says it: "r16 (15.3 req/s achieved)",
// or "≥ r16 (…)" for a lower bound.
func (p *SweepPoint) Label() string {
	s := fmt.Sprintf("%s (%.1f req/s achieved)", p.Level, p.AchievedPerS)
	if p.LowerBound {
		s = "≥ " + s
	}
	return s
}

// Value is the point's own load: its concurrency (closed loop) or rate.
func (p *SweepPoint) Value() float64 {
	if p.Concurrency > 0 {
		return float64(p.Concurrency)
	}
	return p.RatePerS
}

// Rate is the point's rate: the level's in open loop, achieved in closed.
func (p *SweepPoint) Rate() float64 {
	if p.Concurrency > 0 {
		return p.AchievedPerS
	}
	return p.RatePerS
}

// SweepHeadroom is sweep.json's headroom block.
type SweepHeadroom struct {
	CurrentRatePerS float64 `json:"current_rate_per_s"`
	SLOMaxRatePerS  float64 `json:"slo_max_rate_per_s"`
	// HeadroomPct is how much more demand the SLO-max allows, in percent
	// of the current (negative: already past it).
	HeadroomPct    float64 `json:"headroom_pct"`
	Growth         string  `json:"growth,omitempty"`
	GrowthPerMonth float64 `json:"growth_per_month,omitempty"`
	// LowerBound: the SLO-max is a lower bound, so the headroom and the
	// months are at least these.
	LowerBound bool `json:"lower_bound,omitempty"`
	// MonthsToSLOMax and ReachesAt say when demand growing at Growth
	// reaches the SLO-max (with LowerBound: at the earliest).
	MonthsToSLOMax *float64   `json:"months_to_slo_max,omitempty"`
	ReachesAt      *time.Time `json:"reaches_slo_max_at,omitempty"`
	Note           string     `json:"note"`
}

// WriteSweep writes sweep.json into d atomically.
func (d Dir) WriteSweep(s *Sweep) error { return WriteJSON(d.Path(SweepFile), s) }

// ReadSweep reads d's sweep.json.
func (d Dir) ReadSweep() (*Sweep, error) {
	p := d.Path(SweepFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var r Sweep
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	if r.Schema != SweepSchema {
		return nil, fmt.Errorf("%s: schema %q, want %q", p, r.Schema, SweepSchema)
	}
	return &r, nil
}

// SweepExit is a sweep's exit, by Exit's one rule: invalid (3) when it
// was interrupted, failed (1) when no level met the SLO or demand is
// already past the SLO-max, else 0. A failure's why is empty: the table
// has said it.
func SweepExit(s *Sweep) (code int, why string) {
	v := &Validity{Valid: !s.Interrupted && s.Broken == ""}
	if s.Interrupted {
		v.Reasons = []string{"interrupted; the levels run so far are in " + SweepFile}
	}
	if s.Broken != "" {
		v.Reasons = append(v.Reasons, s.Broken)
	}
	var rep *slo.Report
	if s.SLOMax == nil || s.Headroom != nil && s.Headroom.HeadroomPct < 0 {
		rep = &slo.Report{Status: slo.ReportFail, ExitCode: slo.ExitFailed}
	}
	code, why = Exit(v, rep)
	if code == slo.ExitFailed {
		why = ""
	}
	return code, why
}
