// Package llmd writes llm-d-benchmark's benchmark report (schema v0.2,
// "benchmark_report.json") from a tailgate results directory, so a
// tailgate run can sit beside the reports llm-d's analysis tools read.
//
// Every figure is taken from summary.json as it stands: the report is a
// second view of the same run, never a second measurement. A metric that
// tailgate did not measure (no streamed tokens, so no ITL; no input token
// counts) is left out of the report, never written as zero, because a zero
// would read as a measured value. The JSON Schema of what is written is
// testdata/schema/llmd-benchmark-report-v0.2.json.
package llmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// FileName is the report's name in a results directory, as llm-d's
// harnesses name it.
const FileName = results.LLMDReportFile

// Version is the benchmark-report schema version written.
const Version = "0.2"

// Report is the benchmark report's top level.
type Report struct {
	Version  string   `json:"version"`
	Run      Run      `json:"run"`
	Scenario Scenario `json:"scenario"`
	Results  Results  `json:"results"`
}

// Run is the report's run block.
type Run struct {
	// UID identifies the run: a digest of its summary.json, so the same
	// results always give the same report.
	UID         string `json:"uid"`
	Time        *Time  `json:"time,omitempty"`
	Description string `json:"description,omitempty"`
}

// Time is run.time: RFC 3339 instants and an ISO-8601 duration.
type Time struct {
	Start    string `json:"start,omitempty"`
	End      string `json:"end,omitempty"`
	Duration string `json:"duration,omitempty"`
}

// Scenario is the report's scenario block (load only: tailgate does not
// know the serving stack's components).
type Scenario struct {
	Load Load `json:"load"`
}

// Load is scenario.load.
type Load struct {
	Metadata     *LoadMetadata `json:"metadata,omitempty"`
	Standardized Standardized  `json:"standardized"`
	Native       *Native       `json:"native,omitempty"`
}

// LoadMetadata is scenario.load.metadata.
type LoadMetadata struct {
	SchemaVersion string `json:"schema_version,omitempty"`
	Description   string `json:"description,omitempty"`
}

// Standardized is scenario.load.standardized.
type Standardized struct {
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version"`
	// Parallelism is the number of load generators (shards merged).
	Parallelism int `json:"parallelism,omitempty"`
	// Source is how prompts were made: summary.json does not say, so
	// "unknown", one of the schema's words for it.
	Source string `json:"source"`
	// InputSeqLen is the mean input tokens per completed request (the
	// server's count, else what tailgate asked for); absent when neither
	// was counted.
	InputSeqLen *SequenceLength `json:"input_seq_len,omitempty"`
	Stage       *int            `json:"stage,omitempty"`
	RateQPS     *float64        `json:"rate_qps,omitempty"`
	Concurrency *int            `json:"concurrency,omitempty"`
}

// SequenceLength is a sequence length's distribution: tailgate knows
// the mean only, so "other".
type SequenceLength struct {
	Distribution string  `json:"distribution"`
	Value        float64 `json:"value"`
}

// Native is scenario.load.native: tailgate's own description of the load.
type Native struct {
	Config map[string]any `json:"config,omitempty"`
}

// Results is the report's results block.
type Results struct {
	RequestPerformance RequestPerformance `json:"request_performance"`
}

// RequestPerformance is results.request_performance.
type RequestPerformance struct {
	Aggregate Aggregate `json:"aggregate"`
}

// Aggregate is results.request_performance.aggregate.
type Aggregate struct {
	Requests   Requests    `json:"requests"`
	Latency    *Latency    `json:"latency,omitempty"`
	Throughput *Throughput `json:"throughput,omitempty"`
}

// Requests is the aggregate's requests block.
type Requests struct {
	Total      int64 `json:"total"`
	Failures   int64 `json:"failures"`
	Incomplete int64 `json:"incomplete"`
}

// Latency is the aggregate's latency block.
type Latency struct {
	TimeToFirstToken   *Statistics `json:"time_to_first_token,omitempty"`
	TimePerOutputToken *Statistics `json:"time_per_output_token,omitempty"`
	InterTokenLatency  *Statistics `json:"inter_token_latency,omitempty"`
	RequestLatency     *Statistics `json:"request_latency,omitempty"`
}

// Throughput is the aggregate's throughput block.
type Throughput struct {
	InputTokenRate  *Statistics `json:"input_token_rate,omitempty"`
	OutputTokenRate *Statistics `json:"output_token_rate,omitempty"`
	TotalTokenRate  *Statistics `json:"total_token_rate,omitempty"`
	RequestRate     *Statistics `json:"request_rate,omitempty"`
}

// Statistics is the report's statistics object: units and mean are
// required, the rest written where known.
type Statistics struct {
	Units string   `json:"units"`
	Mean  float64  `json:"mean"`
	Min   *float64 `json:"min,omitempty"`
	P50   *float64 `json:"p50,omitempty"`
	P90   *float64 `json:"p90,omitempty"`
	P95   *float64 `json:"p95,omitempty"`
	P99   *float64 `json:"p99,omitempty"`
	P99p9 *float64 `json:"p99p9,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// Read builds the report of the results directory dir.
func Read(dir results.Dir) (*Report, error) {
	p := dir.Path(results.SummaryFile)
	s, err := dir.ReadSummary()
	if err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", p, err)
	}
	return FromSummary(s, b), nil
}

// FromSummary builds the report of summary s; raw is its JSON, whose
// digest is the run's uid.
func FromSummary(s *results.Summary, raw []byte) *Report {
	sum := sha256.Sum256(raw)
	r := &Report{Version: Version, Run: Run{UID: hex.EncodeToString(sum[:16])}}
	if s.Run.Started != "" || s.Run.Ended != "" || s.Run.DurationS > 0 {
		r.Run.Time = &Time{Start: s.Run.Started, End: s.Run.Ended}
		if s.Run.DurationS > 0 {
			r.Run.Time.Duration = isoDuration(s.Run.DurationS)
		}
	}
	host := hostOf(s.Run.Target)
	r.Run.Description = strings.TrimSpace(fmt.Sprintf("tailgate run of %s against %s", s.Run.Model, host))

	st := Standardized{Tool: s.Tool.Name, ToolVersion: s.Tool.Version}
	if st.Tool == "" {
		st.Tool = "tailgate"
	}
	if s.Run.Merged != nil && s.Run.Merged.Count > 0 {
		st.Parallelism = s.Run.Merged.Count
	} else {
		st.Parallelism = 1
	}
	st.RateQPS, st.Concurrency = loadLevel(s.Run.Load)
	st.Source = "unknown"
	if n := s.Requests.OK; n > 0 {
		in := s.Tokens.Input
		if in == 0 {
			in = s.Tokens.RequestedInput
		}
		if in > 0 {
			st.InputSeqLen = &SequenceLength{Distribution: "other", Value: float64(in) / float64(n)}
		}
	}
	cfg := map[string]any{"model": s.Run.Model, "api": s.Run.API, "target_host": host}
	if len(s.Run.Load) > 0 {
		cfg["load"] = s.Run.Load
	}
	r.Scenario.Load = Load{
		Metadata:     &LoadMetadata{SchemaVersion: s.Schema, Description: "tailgate " + s.Tool.Version + " load; native.config is summary.json's run.load"},
		Standardized: st,
		Native:       &Native{Config: cfg},
	}

	agg := &r.Results.RequestPerformance.Aggregate
	agg.Requests = Requests{Total: s.Requests.Sent, Failures: s.Requests.Errors,
		Incomplete: s.Requests.CutAtEnd + s.Requests.Cancelled}
	lat := Latency{
		TimeToFirstToken:   stats(s.LatencyMs, loadgen.MetricTTFT, "ms"),
		TimePerOutputToken: stats(s.LatencyMs, loadgen.MetricTPOT, "ms/token"),
		InterTokenLatency:  stats(s.LatencyMs, loadgen.MetricITL, "ms/token"),
		RequestLatency:     stats(s.LatencyMs, loadgen.MetricE2E, "ms"),
	}
	if lat != (Latency{}) {
		agg.Latency = &lat
	}
	// Rates exist only over a measured window with completions: without
	// one, tailgate measured no rate at all.
	if t := s.Throughput; t.MeasuredWindowS > 0 && s.Requests.OK > 0 {
		th := Throughput{RequestRate: &Statistics{Units: "queries/s", Mean: t.RequestsPerS},
			OutputTokenRate: &Statistics{Units: "tokens/s", Mean: t.OutputTokensPerS}}
		// No input token count means the input was not counted, not
		// that it was empty.
		if s.Tokens.Input > 0 {
			th.InputTokenRate = &Statistics{Units: "tokens/s", Mean: t.InputTokensPerS}
			th.TotalTokenRate = &Statistics{Units: "tokens/s", Mean: t.InputTokensPerS + t.OutputTokensPerS}
		}
		agg.Throughput = &th
	}
	return r
}

// stats is summary.json's histogram name as a statistics object, nil when
// it holds no events.
func stats(lat map[string]loadgen.Hist, name, units string) *Statistics {
	h, ok := lat[name]
	if !ok || h.Count == 0 {
		return nil
	}
	f := func(v float64) *float64 { return &v }
	return &Statistics{Units: units, Mean: h.Mean, Min: f(h.Min), P50: f(h.P50), P90: f(h.P90),
		P95: f(h.P95), P99: f(h.P99), P99p9: f(h.P999), Max: f(h.Max)}
}

// loadLevel is the run's rate or concurrency when it had one level: a run
// of several stages, or a trace replay, has no single one to state.
func loadLevel(load map[string]any) (*float64, *int) {
	stages, _ := load["stages"].(string)
	if stages == "" || strings.Contains(stages, ",") {
		return nil, nil
	}
	lvl, _, _ := strings.Cut(stages, "@")
	switch load["mode"] {
	case "closed":
		if c, err := strconv.Atoi(strings.TrimPrefix(lvl, "c")); err == nil {
			return nil, &c
		}
	case "open":
		if q, err := strconv.ParseFloat(lvl, 64); err == nil {
			return &q, nil
		}
	}
	return nil, nil
}

// hostOf is the target's host, without scheme, credentials or path.
func hostOf(target string) string {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Host
}

// isoDuration is seconds as an ISO-8601 duration (PT49.97S), to the
// millisecond: the float's last digits are noise, not resolution.
func isoDuration(s float64) string {
	return "PT" + strconv.FormatFloat(math.Round(s*1000)/1000, 'f', -1, 64) + "S"
}

// Write writes dir's report into dir/benchmark_report.json.
func Write(dir results.Dir) error {
	r, err := Read(dir)
	if err != nil {
		return err
	}
	return results.WriteJSON(dir.Path(FileName), r)
}
