// Package llmd writes llm-d-benchmark's benchmark report (schema v0.2.1,
// "benchmark_report.json") from a tailgate results directory, so a
// tailgate run can sit beside the reports llm-d's analysis tools read. A
// validate pack or a sweep gives one report per stage or level, written
// beside that part's summary.json, as inference-perf writes a partial per
// stage; the reports of one pack share run.eid.
//
// Every figure is taken from the run's files as they stand (summary.json;
// latency.hlog, requests.jsonl and telemetry.jsonl for distributions and
// time series, read only where they agree with summary.json): the report
// is a second view of the same run, never a second measurement. A metric that
// tailgate did not measure (no streamed tokens, so no ITL; no input token
// counts) is left out of the report, never written as zero, because a zero
// would read as a measured value. The JSON Schema of what is written is
// testdata/schema/llmd-benchmark-report-v0.2.1.json.
package llmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// FileName is the report's name in a results directory, as llm-d's
// harnesses name it.
const FileName = results.LLMDReportFile

// Version is the benchmark-report schema version written.
const Version = "0.2.1"

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
	UID string `json:"uid"`
	// EID is the experiment: the validate pack or sweep the run is a
	// stage or level of, shared by all its reports; a run alone is its
	// own experiment.
	EID         string `json:"eid,omitempty"`
	Time        *Time  `json:"time,omitempty"`
	Description string `json:"description,omitempty"`
}

// Time is run.time: RFC 3339 instants and an ISO-8601 duration.
type Time struct {
	Start    string `json:"start,omitempty"`
	End      string `json:"end,omitempty"`
	Duration string `json:"duration,omitempty"`
}

// Scenario is the report's scenario block: the load, and the serving
// stack as far as the run's telemetry tells it (absent without telemetry).
type Scenario struct {
	Stack []Component `json:"stack,omitempty"`
	Load  Load        `json:"load"`
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
	// InputSeqLen is the input length the mix planned; without a plan
	// for every class, the mean input tokens per completed request (the
	// server's count, else what tailgate asked for); absent when neither
	// is known.
	InputSeqLen *SequenceLength `json:"input_seq_len,omitempty"`
	// OutputSeqLen is the max_tokens the mix planned; without a plan for
	// every class, the mean output tokens per completed request as the
	// server counted them, "other"; absent when neither is known.
	OutputSeqLen *SequenceLength `json:"output_seq_len,omitempty"`
	Stage        *int            `json:"stage,omitempty"`
	MultiTurn    *MultiTurn      `json:"multi_turn,omitempty"`
	RateQPS      *float64        `json:"rate_qps,omitempty"`
	Concurrency  *int            `json:"concurrency,omitempty"`
}

// SequenceLength is a sequence length's distribution: the mix's plan
// (plannedSeqLen), else the measured mean, "other".
type SequenceLength struct {
	Distribution string   `json:"distribution"`
	Value        float64  `json:"value"`
	StdDev       *float64 `json:"std_dev,omitempty"`
	Min          *int64   `json:"min,omitempty"`
	Max          *int64   `json:"max,omitempty"`
}

// MultiTurn is scenario.load.standardized.multi_turn: set for a run of
// agent sessions.
type MultiTurn struct {
	Enabled bool `json:"enabled"`
}

// Native is scenario.load.native: tailgate's own description of the load.
type Native struct {
	Config map[string]any `json:"config,omitempty"`
}

// Results is the report's results block.
type Results struct {
	RequestPerformance RequestPerformance  `json:"request_performance"`
	SessionPerformance *SessionPerformance `json:"session_performance,omitempty"`
	Observability      *Observability      `json:"observability,omitempty"`
}

// RequestPerformance is results.request_performance.
type RequestPerformance struct {
	Aggregate  Aggregate   `json:"aggregate"`
	TimeSeries *TimeSeries `json:"time_series,omitempty"`
}

// TimeSeries is results.request_performance.time_series: one point per
// interval of latency.hlog.
type TimeSeries struct {
	Latency    *SeriesLatency    `json:"latency,omitempty"`
	Throughput *SeriesThroughput `json:"throughput,omitempty"`
}

// SeriesLatency is time_series.latency.
type SeriesLatency struct {
	TimeToFirstToken   *Series `json:"time_to_first_token,omitempty"`
	TimePerOutputToken *Series `json:"time_per_output_token,omitempty"`
	InterTokenLatency  *Series `json:"inter_token_latency,omitempty"`
	RequestLatency     *Series `json:"request_latency,omitempty"`
}

// SeriesThroughput is time_series.throughput: completions per second
// from latency.hlog, tokens per second from the records.
type SeriesThroughput struct {
	InputTokenRate  *Series `json:"input_token_rate,omitempty"`
	OutputTokenRate *Series `json:"output_token_rate,omitempty"`
	TotalTokenRate  *Series `json:"total_token_rate,omitempty"`
	RequestRate     *Series `json:"request_rate,omitempty"`
}

// Series is one metric's time series.
type Series struct {
	Units  string  `json:"units"`
	Series []Point `json:"series"`
}

// Point is one interval: its start, and the interval's statistics (a
// rate: Value).
type Point struct {
	TS    string   `json:"ts"`
	Value *float64 `json:"value,omitempty"`
	Mean  *float64 `json:"mean,omitempty"`
	Min   *float64 `json:"min,omitempty"`
	P50   *float64 `json:"p50,omitempty"`
	P90   *float64 `json:"p90,omitempty"`
	P95   *float64 `json:"p95,omitempty"`
	P99   *float64 `json:"p99,omitempty"`
	P99p9 *float64 `json:"p99p9,omitempty"`
	Max   *float64 `json:"max,omitempty"`
}

// SessionPerformance is results.session_performance.
type SessionPerformance struct {
	Sessions Sessions `json:"sessions"`
}

// Sessions is session_performance.sessions.
type Sessions struct {
	Total                int64       `json:"total"`
	Succeeded            *int64      `json:"succeeded,omitempty"`
	Failed               *int64      `json:"failed,omitempty"`
	TotalEventsCancelled *int64      `json:"total_events_cancelled,omitempty"`
	SessionDuration      *Statistics `json:"session_duration,omitempty"`
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
	// InputLength and OutputLength are tokens per completed request:
	// summary.json holds totals, so the mean only.
	InputLength  *Statistics `json:"input_length,omitempty"`
	OutputLength *Statistics `json:"output_length,omitempty"`
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
	Units  string   `json:"units"`
	Mean   float64  `json:"mean"`
	StdDev *float64 `json:"stddev,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	P50    *float64 `json:"p50,omitempty"`
	P90    *float64 `json:"p90,omitempty"`
	P95    *float64 `json:"p95,omitempty"`
	P99    *float64 `json:"p99,omitempty"`
	P99p9  *float64 `json:"p99p9,omitempty"`
	Max    *float64 `json:"max,omitempty"`
}

// Part is one report and the run directory it is of.
type Part struct {
	Dir    results.Dir
	Report *Report
}

// Read builds the report of the run directory dir (one summary.json).
// Its eid is its own uid: a run alone is its own experiment.
func Read(dir results.Dir) (*Report, error) {
	r, err := readRun(dir)
	if err != nil {
		return nil, err
	}
	r.Run.EID = r.Run.UID
	return r, nil
}

// readRun is dir's report without an eid, and the time series of its
// latency.hlog when it has one.
func readRun(dir results.Dir) (*Report, error) {
	p := dir.Path(results.SummaryFile)
	raw, err := os.ReadFile(p)
	if err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
	}
	var s results.Summary
	if err := json.Unmarshal(raw, &s); err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", p, err)
	}
	r := FromSummary(&s, raw)
	ts, iv, err := readSeries(dir.Path(results.HlogFile))
	if err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
	}
	r.Results.RequestPerformance.TimeSeries = ts
	f, err := readRecords(dir, &s)
	if err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
	}
	addRecords(r, f, &s, iv)
	if err := addTelemetrySeries(r, dir.Path(results.TelemetryFile), s.Telemetry); err != nil {
		return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
	}
	return r, nil
}

// Reports builds the reports of dir: one per stage of a validate pack
// (stages/), one per level of a sweep (sweep.json, levels/), else dir's
// own. A pack's reports share an eid, the digest of its verdict.json or
// sweep.json (of the parts' uids when it has neither), and carry their
// stage's number.
func Reports(dir results.Dir) ([]Part, error) {
	var names []string
	var sub func(string) results.Dir
	var top string
	switch {
	case dir.HasSweep():
		sw, err := dir.ReadSweep()
		if err != nil {
			return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
		}
		for _, l := range sw.Levels {
			if _, err := os.Stat(dir.Level(l.Name).Path(results.SummaryFile)); err == nil {
				names = append(names, l.Name)
			}
		}
		sub, top = dir.Level, dir.Path(results.SweepFile)
	case isDir(dir.Path(results.StagesDir)):
		ents, err := os.ReadDir(dir.Path(results.StagesDir))
		if err != nil {
			return nil, fmt.Errorf("llm-d report of %s: %w", dir, err)
		}
		for _, e := range ents {
			if _, err := os.Stat(dir.Stage(e.Name()).Path(results.SummaryFile)); e.IsDir() && err == nil {
				names = append(names, e.Name())
			}
		}
		names = stageOrder(dir, names)
		sub, top = dir.Stage, dir.Path(results.VerdictFile)
	default:
		r, err := Read(dir)
		if err != nil {
			return nil, err
		}
		return []Part{{Dir: dir, Report: r}}, nil
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("llm-d report of %s: no stage or level holds a %s", dir, results.SummaryFile)
	}
	parts := make([]Part, 0, len(names))
	eid := sha256.New()
	for i, n := range names {
		r, err := readRun(sub(n))
		if err != nil {
			return nil, err
		}
		stage := i
		r.Scenario.Load.Standardized.Stage = &stage
		r.Run.Description += ", " + n
		parts = append(parts, Part{Dir: sub(n), Report: r})
		eid.Write([]byte(r.Run.UID))
	}
	id := hex.EncodeToString(eid.Sum(nil)[:16])
	if b, err := os.ReadFile(top); err == nil {
		sum := sha256.Sum256(b)
		id = hex.EncodeToString(sum[:16])
	}
	for _, p := range parts {
		p.Report.Run.EID = id
	}
	return parts, nil
}

// stageOrder is names in the order verdict.json lists the stages (the
// order they ran), else as read.
func stageOrder(dir results.Dir, names []string) []string {
	b, err := os.ReadFile(dir.Path(results.VerdictFile))
	if err != nil {
		return names
	}
	var v struct {
		Stages []struct {
			Name string `json:"name"`
		} `json:"stages"`
	}
	if json.Unmarshal(b, &v) != nil {
		return names
	}
	have := map[string]bool{}
	for _, n := range names {
		have[n] = true
	}
	var out []string
	for _, st := range v.Stages {
		if have[st.Name] {
			out = append(out, st.Name)
			delete(have, st.Name)
		}
	}
	for _, n := range names {
		if have[n] {
			out = append(out, n)
		}
	}
	return out
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// FromSummary builds the report of summary s; raw is summary.json's
// bytes, whose digest is the run's uid.
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
		if out := s.Tokens.Output; out > 0 {
			st.OutputSeqLen = &SequenceLength{Distribution: "other", Value: float64(out) / float64(n)}
		}
	}
	// The mix's plan is the scenario's length where it covers every class
	// that sent; the measured lengths stay in the results.
	if p := plannedSeqLen(s.PlannedLengths, func(c prompts.ClassLengths) *prompts.LengthDist { return c.InputTokens }); p != nil {
		st.InputSeqLen = p
	}
	if p := plannedSeqLen(s.PlannedLengths, func(c prompts.ClassLengths) *prompts.LengthDist { return c.MaxTokens }); p != nil {
		st.OutputSeqLen = p
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
	if n := s.Requests.OK; n > 0 {
		if s.Tokens.Input > 0 {
			agg.Requests.InputLength = &Statistics{Units: "count", Mean: float64(s.Tokens.Input) / float64(n)}
		}
		if s.Tokens.Output > 0 {
			agg.Requests.OutputLength = &Statistics{Units: "count", Mean: float64(s.Tokens.Output) / float64(n)}
		}
	}
	lat := Latency{
		TimeToFirstToken:   stats(s.LatencyMs, measure.MetricTTFT, "ms"),
		TimePerOutputToken: stats(s.LatencyMs, measure.MetricTPOT, "ms/token"),
		InterTokenLatency:  stats(s.LatencyMs, measure.MetricITL, "ms/token"),
		RequestLatency:     stats(s.LatencyMs, measure.MetricE2E, "ms"),
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
	if ss := s.Sessions; ss != nil && ss.Count > 0 {
		i := func(v int64) *int64 { return &v }
		sp := &SessionPerformance{Sessions: Sessions{Total: ss.Count, Succeeded: i(ss.OK), Failed: i(ss.Failed),
			TotalEventsCancelled: i(ss.CancelledCalls)}}
		// The published schema describes session_duration in seconds.
		if d := ss.DurationMs; d.Count > 0 {
			sec := schema.Hist{Count: d.Count, Mean: d.Mean / 1000, Min: d.Min / 1000, P50: d.P50 / 1000, P90: d.P90 / 1000,
				P95: d.P95 / 1000, P99: d.P99 / 1000, P999: d.P999 / 1000, Max: d.Max / 1000}
			sp.Sessions.SessionDuration = statsOf(sec, "s")
		}
		r.Results.SessionPerformance = sp
		r.Scenario.Load.Standardized.MultiTurn = &MultiTurn{Enabled: true}
	}
	r.Scenario.Stack, r.Results.Observability = stackOf(s.Telemetry, s.Run.Model)
	return r
}

// seriesMetrics are the hlog tags written as latency time series.
var seriesMetrics = []struct{ tag, units string }{
	{measure.MetricTTFT, "ms"}, {measure.MetricTPOT, "ms/token"}, {measure.MetricITL, "ms/token"}, {measure.MetricE2E, "ms"},
}

// readSeries is the time series of the interval log at path: per
// interval, each latency's statistics and the completions per second (e2e
// events over the interval's length). nil when there is no log or it
// holds no interval. The intervals are those of the request-rate points.
func readSeries(path string) (*TimeSeries, []interval, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	lr := hdrhistogram.NewHistogramLogReader(f)
	by := map[string]*Series{}
	var rate *Series
	var iv []interval
	f64 := func(v float64) *float64 { return &v }
	for {
		h, err := lr.NextIntervalHistogram()
		if errors.Is(err, io.EOF) || (err == nil && h == nil) {
			break
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		if h.TotalCount() == 0 {
			continue
		}
		ts := time.UnixMilli(h.StartTimeMs()).UTC().Format(time.RFC3339Nano)
		for _, m := range seriesMetrics {
			if h.Tag() != m.tag {
				continue
			}
			st := schema.HistOf(h)
			se := by[m.tag]
			if se == nil {
				se = &Series{Units: m.units}
				by[m.tag] = se
			}
			se.Series = append(se.Series, Point{TS: ts, Mean: f64(st.Mean), Min: f64(st.Min), P50: f64(st.P50), P90: f64(st.P90),
				P95: f64(st.P95), P99: f64(st.P99), P99p9: f64(st.P999), Max: f64(st.Max)})
			if m.tag == measure.MetricE2E {
				if secs := float64(h.EndTimeMs()-h.StartTimeMs()) / 1000; secs > 0 {
					if rate == nil {
						rate = &Series{Units: "queries/s"}
					}
					rate.Series = append(rate.Series, Point{TS: ts, Value: f64(float64(h.TotalCount()) / secs)})
					iv = append(iv, interval{from: time.UnixMilli(h.StartTimeMs()), to: time.UnixMilli(h.EndTimeMs())})
				}
			}
		}
	}
	if len(by) == 0 {
		return nil, nil, nil
	}
	lat := &SeriesLatency{TimeToFirstToken: by[measure.MetricTTFT], TimePerOutputToken: by[measure.MetricTPOT],
		InterTokenLatency: by[measure.MetricITL], RequestLatency: by[measure.MetricE2E]}
	ts := &TimeSeries{Latency: lat}
	if rate != nil {
		ts.Throughput = &SeriesThroughput{RequestRate: rate}
	}
	return ts, iv, nil
}

// stats is summary.json's histogram name as a statistics object, nil when
// it holds no events.
func stats(lat map[string]schema.Hist, name, units string) *Statistics {
	h, ok := lat[name]
	if !ok || h.Count == 0 {
		return nil
	}
	return statsOf(h, units)
}

// statsOf is h as a statistics object in units.
func statsOf(h schema.Hist, units string) *Statistics {
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

// Write writes each report of dir (Reports) into its run directory as
// benchmark_report.json.
func Write(dir results.Dir) ([]Part, error) {
	parts, err := Reports(dir)
	if err != nil {
		return nil, err
	}
	for _, p := range parts {
		if err := results.WriteJSON(p.Dir.Path(FileName), p.Report); err != nil {
			return nil, err
		}
	}
	return parts, nil
}
