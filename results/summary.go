package results

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
	"github.com/tailgate-llm/tailgate/theater"
)

// Summary is summary.json (schema tailgate.summary/v1), assembled from
// typed parts: the load generator's figures, the telemetry summary and, when
// the run was judged, the SLO report. Keys may be added, never renamed.
type Summary struct {
	schema.Summary
	// Telemetry is null when nothing was sampled.
	Telemetry *telemetry.Summary `json:"telemetry"`
	// SLO is null unless the run was judged (run --slo).
	SLO *slo.Report `json:"slo"`
	// Validity says whether the figures can be trusted: a run whose
	// requests mostly failed, that measured nothing, whose generator
	// distorted what it measured or whose results did not reach the disk
	// is invalid, whatever its latencies.
	Validity Validity `json:"validity"`
	// MetricTheater is the metric-theater check: GPU utilisation against
	// the queue delay and TTFT p99 per time bucket (absent without
	// telemetry).
	MetricTheater *theater.Section `json:"metric_theater,omitempty"`
	// CapacityAlias is MetricTheater under the key it was first written
	// as, "capacity" (a word that also names the telemetry's KV capacity
	// and the sweep): keys are never renamed, so it is written beside
	// metric_theater, and read when a file written before has only it.
	// Set MetricTheater; MarshalJSON fills this.
	CapacityAlias *theater.Section `json:"capacity,omitempty"`
	// Changes are change-record ids recorded on the run (--change), so
	// compare can pin a regression to a change.
	Changes []string `json:"changes,omitempty"`
	// Energy is, per stage, the GPUs' energy over the stage's measured
	// window beside the work done in that same window (absent when no
	// energy was read; EnergyUnavailable then says why).
	Energy            map[string]*Energy `json:"energy,omitempty"`
	EnergyUnavailable string             `json:"energy_unavailable,omitempty"`
	// Records is the count and SHA-256 of the lines written to the
	// records file, taken as they were written (absent with --records
	// none and in a summary written before it was kept).
	Records *RecordsDigest `json:"records,omitempty"`
	// PlannedLengths is the prompt mix's plan of token lengths, class by
	// class, as the run drew them (absent without a mix, and for a trace,
	// whose rows set every length): the planned side of the measured
	// tokens, for reports that state both.
	PlannedLengths *prompts.LengthPlan `json:"planned_lengths,omitempty"`
}

// MarshalJSON writes MetricTheater under both its keys.
func (s Summary) MarshalJSON() ([]byte, error) {
	type plain Summary // without these methods
	p := plain(s)
	p.CapacityAlias = s.MetricTheater
	return json.Marshal(p)
}

// UnmarshalJSON reads the metric-theater section from metric_theater, or
// from capacity in a file written before that key.
func (s *Summary) UnmarshalJSON(b []byte) error {
	type plain Summary
	if err := json.Unmarshal(b, (*plain)(s)); err != nil {
		return err
	}
	if s.MetricTheater == nil {
		s.MetricTheater = s.CapacityAlias
	}
	s.CapacityAlias = nil
	return nil
}

// Energy is one window's GPU energy and the work done in exactly that
// window: output tokens streamed and requests completed in it, whichever
// request they belonged to.
type Energy struct {
	telemetry.EnergyWindow
	OutputTokens         int64    `json:"output_tokens"`
	Requests             int64    `json:"requests"`
	JoulesPerOutputToken *float64 `json:"joules_per_output_token,omitempty"`
	JoulesPerRequest     *float64 `json:"joules_per_request,omitempty"`
	// GPUHourCostUSD is the price given (--gpu-hour-cost); the cost per
	// million output tokens is GPUs × window hours × price / tokens × 10⁶.
	GPUHourCostUSD                float64  `json:"gpu_hour_cost_usd,omitempty"`
	CostPerMillionOutputTokensUSD *float64 `json:"cost_per_million_output_tokens_usd,omitempty"`
	Note                          string   `json:"note,omitempty"`
}

// Validity is summary.json's "validity" block.
type Validity struct {
	Valid bool `json:"valid"`
	// Reasons say why not, one line each.
	Reasons []string `json:"reasons,omitempty"`
	// MaxErrorRate is the limit the error rate was held to (Bounds'
	// max_error_rate as a fraction; kept for readers of the first form).
	MaxErrorRate float64 `json:"max_error_rate"`
	// Bounds are every bound the run was held to (slo.Validity), so check
	// re-judges the run by the same ones.
	Bounds *slo.Validity `json:"bounds,omitempty"`
}

// NewValidity is the validity block of a run judged by bounds with these
// problems (slo.Valid: an objective's NO_DATA is not the run's).
func NewValidity(bounds slo.Validity, problems []slo.Problem) Validity {
	b := bounds
	v := Validity{MaxErrorRate: b.ErrorRateLimit(), Bounds: &b}
	v.Valid, v.Reasons = slo.Valid(problems)
	return v
}

// WriteSummary writes summary.json into d atomically.
func (d Dir) WriteSummary(s *Summary) error { return WriteJSON(d.Path(SummaryFile), s) }

// ReadSummary reads d's summary.json.
func (d Dir) ReadSummary() (*Summary, error) {
	p := d.Path(SummaryFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &s, nil
}
