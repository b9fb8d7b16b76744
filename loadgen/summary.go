package loadgen

import (
	"fmt"
	"strconv"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
)

// SummarySchema names the summary.json contract. Scripts and CI gates read
// it: keys may be added, never renamed or given another meaning.
const SummarySchema = "tailgate.summary/v1"

// definitionsTable are written into every summary so a reader never has to
// guess what a figure means. The latency metrics' come from the metric
// table (LatencyMetrics).
var definitionsTable = func() map[string]string {
	d := map[string]string{
		"intended_start": "when the schedule says a request should be sent; in open loop every latency is measured from it (no coordinated omission); in closed loop it is the send time",
		"output_tokens":  "the server's usage count when given, else counted from chunks (see tokens.sources)",
		"throughput":     "completed requests and their tokens per second over the measured window (first measured intended start to last measured end; warm-up excluded)",
		"goodput":        "completed requests per second that met every per-request goodput constraint of the SLO",
		"latency_scope":  "latency histograms hold successful requests only; failures are counted in requests.errors_by_kind",
		"resolution":     "every instant is truncated to the microsecond (as requests.jsonl stores it) before latencies are taken",
	}
	for _, m := range latencyMetricsTable {
		d[m.Name] = m.Definition
	}
	return d
}()

// Hist is the H shape of summary.json: milliseconds as floats.
type Hist struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	Min   float64 `json:"min"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P95   float64 `json:"p95"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p999"`
	Max   float64 `json:"max"`
}

// Quantile is the percentile q (0.5, 0.9, 0.95, 0.99, 0.999) of h; it
// panics on any other q, which only a wrong metric-table row can ask for.
func (h Hist) Quantile(q float64) float64 {
	switch q {
	case 0.5:
		return h.P50
	case 0.9:
		return h.P90
	case 0.95:
		return h.P95
	case 0.99:
		return h.P99
	case 0.999:
		return h.P999
	}
	panic(fmt.Sprintf("loadgen: Hist has no percentile %g", q))
}

// HistOf summarises an HDR histogram of microseconds.
func HistOf(h *hdrhistogram.Histogram) Hist {
	if h.TotalCount() == 0 {
		return Hist{}
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	// hdrhistogram-go's ValueAtQuantile takes 0–100.
	return Hist{Count: h.TotalCount(), Mean: h.Mean() / 1000, Min: ms(h.Min()),
		P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P95: ms(h.ValueAtQuantile(95)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
}

// Counts is the requests block.
type Counts struct {
	Sent     int64 `json:"sent"`
	OK       int64 `json:"ok"`
	Errors   int64 `json:"errors"`
	Dropped  int64 `json:"dropped"`
	CutAtEnd int64 `json:"cut_at_end"` // not in Errors: the generator cut them (see Options.Grace)
	// Cancelled were in flight when the run stopped itself (Ctrl-C, a
	// failed sink): not in Errors, never a failure of the server.
	Cancelled int64 `json:"cancelled,omitempty"`
	// Retries counts requests sent again on a fresh connection after a
	// reused idle one failed before any response byte (the latency still
	// counts from the intended start).
	Retries      int64            `json:"retries"`
	Warmup       int64            `json:"warmup,omitempty"`
	ErrorsByKind map[string]int64 `json:"errors_by_kind"`
	// FirstErrors is, per error kind, the error of the failed request
	// intended earliest ("request <seq>: <the server's words>"), scrubbed
	// as requests.jsonl holds it.
	FirstErrors map[string]string `json:"first_errors,omitempty"`
}

// Throughput is the throughput block. Completions (requests_per_s, tokens,
// goodput) are per second of the measured window, which includes the
// drain after the schedule; offered and sent rates are per second of the
// scheduled window, which does not (RunDefinitions).
type Throughput struct {
	RequestsPerS     float64 `json:"requests_per_s"` // the completion rate
	OutputTokensPerS float64 `json:"output_tokens_per_s"`
	InputTokensPerS  float64 `json:"input_tokens_per_s"`
	// GoodputPerS is absent when no completion could be judged against the
	// goodput constraints (unstreamed answers against a TPOT limit).
	GoodputPerS      *float64 `json:"goodput_per_s,omitempty"`
	OfferedPerS      float64  `json:"offered_per_s,omitempty"`
	SentPerS         float64  `json:"sent_per_s,omitempty"`
	ScheduledWindowS float64  `json:"scheduled_window_s,omitempty"`
	MeasuredWindowS  float64  `json:"measured_window_s,omitempty"`
	// Extra holds the rates of rate rows made outside loadgen
	// (NewRateMetric) by name, written into the block beside the fields.
	Extra map[string]float64 `json:"-"`
}

// Tokens says how many tokens were moved and where the counts came from.
type Tokens struct {
	Input             int64            `json:"input"`
	RequestedInput    int64            `json:"requested_input"`
	Output            int64            `json:"output"`
	Sources           map[string]int64 `json:"sources"`
	ChunkTokenSources map[string]int64 `json:"chunk_token_sources"`
}

// ClassSummary is one entry of classes.
type ClassSummary struct {
	Requests   Counts          `json:"requests"`
	Throughput Throughput      `json:"throughput"`
	LatencyMs  map[string]Hist `json:"latency_ms"`
	Tokens     Tokens          `json:"tokens"`
}

// RunInfo is the run block.
type RunInfo struct {
	Started         string         `json:"started"`
	Ended           string         `json:"ended"`
	DurationS       float64        `json:"duration_s"`
	MeasuredWindowS float64        `json:"measured_window_s"`
	Target          string         `json:"target"`
	API             string         `json:"api"`
	Model           string         `json:"model"`
	Load            map[string]any `json:"load"`
	Interrupted     bool           `json:"interrupted"`
	Stopped         string         `json:"stopped,omitempty"` // why the tool stopped the run early
	GraceS          float64        `json:"grace_s"`
	CPUUtilization  float64        `json:"cpu_utilization"`
	// Shard is set when the run sent one shard of a split schedule.
	Shard *ShardInfo `json:"shard,omitempty"`
	// Merged is set on a result merged from shards (tailgate merge).
	Merged *MergedInfo `json:"merged,omitempty"`
	// Preconnect says whether connections were opened before the first
	// intended start (--preconnect), and how long that took: set-up time
	// kept apart from every request's latency.
	Preconnect Preconnect `json:"preconnect"`
}

// ShardInfo is run.shard: which part of a split schedule a run sent.
type ShardInfo struct {
	Index   int     `json:"index"`
	Count   int     `json:"count"`
	StartAt string  `json:"start_at,omitempty"` // the shared start (--start-at), RFC 3339
	LateByS float64 `json:"late_by_s"`          // how long after start_at the shard began
}

// MergedInfo is run.merged: the shards a merged result was made of.
type MergedInfo struct {
	Count  int           `json:"count"`
	Shards []MergedShard `json:"shards"`
}

// MergedShard is one shard of a merged result.
type MergedShard struct {
	Index          int     `json:"index"`
	Dir            string  `json:"dir"`
	Started        string  `json:"started"`
	LateByS        float64 `json:"late_by_s"`
	CPUUtilization float64 `json:"cpu_utilization"`
	Sent           int64   `json:"sent"`
	Records        string  `json:"records,omitempty"` // the form its records were kept in
}

// Preconnect is run.preconnect.
type Preconnect struct {
	Used        bool    `json:"used"`
	Connections int     `json:"connections,omitempty"`
	SetupMs     float64 `json:"setup_ms,omitempty"`
	Error       string  `json:"error,omitempty"`
}

// Summary is summary.json (schema tailgate.summary/v1). Keys may be added,
// never renamed.
type Summary struct {
	Schema      string                  `json:"schema"`
	Tool        version.Tool            `json:"tool"`
	Run         RunInfo                 `json:"run"`
	Requests    Counts                  `json:"requests"`
	Throughput  Throughput              `json:"throughput"`
	LatencyMs   map[string]Hist         `json:"latency_ms"`
	Tokens      Tokens                  `json:"tokens"`
	Classes     map[string]ClassSummary `json:"classes"`
	Stages      map[string]ClassSummary `json:"stages,omitempty"` // by load stage, when there are several
	Turns       map[string]Hist         `json:"ttft_by_turn_ms,omitempty"`
	Sessions    *SessionSummary         `json:"sessions,omitempty"`
	SelfCheck   selfcheck.Result        `json:"self_check"`
	Warnings    []string                `json:"warnings"`
	Definitions map[string]string       `json:"definitions"`
}

// CheckSelf judges the run's metrics as the generator gathered them
// (selfcheck.Judge); maxShift is the stated share (0:
// selfcheck.DefaultMaxShift).
func (m *Metrics) CheckSelf(info Info, maxShift float64) selfcheck.Result {
	return selfcheck.Judge(selfcheck.Input{Lag: m.All.Hist[MetricScheduleLag], Metrics: lagMeasuredTable,
		Figures: m.All.Hist, Corrected: m.LagCorrected,
		CPUUtilization: info.CPUUtilization, Host: info.Host, Dropped: info.Dropped}, maxShift)
}

// SummaryMeta is what the caller knows that the metrics do not.
type SummaryMeta struct {
	Version, Target, API, Model string
	Load                        map[string]any
}

// summarize builds one population's blocks; sched is its scheduled window
// in seconds (0: unknown).
func (g *Group) summarize(sched float64) (Counts, Throughput, map[string]Hist, Tokens) {
	c := Counts{Sent: g.Sent, OK: g.OK, Errors: g.Errors, Dropped: g.Dropped, Retries: g.Retries, ErrorsByKind: g.ErrorsByKind,
		CutAtEnd: g.ErrorsByKind[string(ErrCutAtEnd)], Cancelled: g.ErrorsByKind[string(ErrCancelled)]}
	for k, e := range g.FirstErrors {
		if c.FirstErrors == nil {
			c.FirstErrors = map[string]string{}
		}
		c.FirstErrors[k] = "request " + strconv.FormatInt(e.Seq, 10) + ": " + e.Error
	}
	var t Throughput
	if w := g.last - g.first; w > 0 {
		t = Throughput{RequestsPerS: PerSecond(g.OK, w), OutputTokensPerS: PerSecond(g.OutputTokens, w),
			InputTokensPerS: PerSecond(g.InputTokens, w)}
		if g.Unjudged == 0 || g.Unjudged < g.OK {
			t.GoodputPerS = new(PerSecond(g.Good, w))
		}
		for n, v := range g.work {
			if t.Extra == nil {
				t.Extra = map[string]float64{}
			}
			t.Extra[n] = PerSecond(v, w)
		}
	}
	g.rates(&t, sched)
	lat := make(map[string]Hist, len(g.Hist))
	for n, h := range g.Hist {
		lat[n] = HistOf(h)
	}
	tok := Tokens{Input: g.InputTokens, RequestedInput: g.RequestedInputTokens, Output: g.OutputTokens,
		Sources: g.TokenSources, ChunkTokenSources: g.ChunkTokenSources}
	return c, t, lat, tok
}

// Summary builds summary.json from the metrics and the run's info.
func (m *Metrics) Summary(info Info, meta SummaryMeta) *Summary {
	defs := make(map[string]string, len(definitionsTable)+len(runDefinitionsTable))
	for _, d := range []map[string]string{definitionsTable, runDefinitionsTable} {
		for k, v := range d {
			defs[k] = v
		}
	}
	for _, lm := range m.table { // a made-up row's too
		defs[lm.Name] = lm.Definition
	}
	for _, rm := range m.rates {
		defs[rm.Name] = rm.Definition
	}
	s := &Summary{Schema: SummarySchema, Tool: version.NewTool(meta.Version),
		Classes: map[string]ClassSummary{}, Definitions: defs,
		Warnings: []string{}}
	sched := info.Scheduled.Seconds()
	s.Requests, s.Throughput, s.LatencyMs, s.Tokens = m.All.summarize(sched)
	s.Requests.Warmup = m.Warmup
	for name, g := range m.Classes {
		var cs ClassSummary
		cs.Requests, cs.Throughput, cs.LatencyMs, cs.Tokens = g.summarize(sched)
		s.Classes[name] = cs
	}
	if len(m.Stages) > 1 {
		s.Stages = map[string]ClassSummary{}
		for name, g := range m.Stages {
			var cs ClassSummary
			cs.Requests, cs.Throughput, cs.LatencyMs, cs.Tokens = g.summarize(info.StageScheduled[name].Seconds())
			s.Stages[name] = cs
		}
	}
	if len(m.TurnTTFT) > 0 {
		s.Turns = map[string]Hist{}
		for turn, h := range m.TurnTTFT {
			s.Turns[strconv.Itoa(turn)] = HistOf(h)
		}
	}
	s.Sessions = m.sessionSummary()
	load := meta.Load
	if load == nil {
		load = map[string]any{}
	}
	s.Run = RunInfo{Started: info.Started.UTC().Format(time.RFC3339Nano),
		Ended:     info.Started.Add(info.Elapsed).UTC().Format(time.RFC3339Nano),
		DurationS: info.Elapsed.Seconds(), MeasuredWindowS: (m.All.last - m.All.first).Seconds(),
		Target: meta.Target, API: meta.API, Model: meta.Model, Load: load,
		Interrupted: info.Interrupted, GraceS: info.Grace.Seconds(), CPUUtilization: info.CPUUtilization}
	if info.Stopped != nil {
		s.Run.Stopped = info.Stopped.Error()
	}
	if info.Shard.Count > 0 {
		s.Run.Shard = &ShardInfo{Index: info.Shard.Index, Count: info.Shard.Count, LateByS: info.LateStart.Seconds()}
	}
	if !info.StartAt.IsZero() {
		if s.Run.Shard == nil {
			s.Run.Shard = &ShardInfo{Count: 1, LateByS: info.LateStart.Seconds()}
		}
		s.Run.Shard.StartAt = info.StartAt.UTC().Format(time.RFC3339Nano)
		if info.LateStart > 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("started %v after --start-at %s: requests due meanwhile went out late, their lateness counted in their latency",
				info.LateStart.Round(time.Microsecond), s.Run.Shard.StartAt))
		}
	}
	if info.Preconnected {
		s.Run.Preconnect = Preconnect{Used: true, Connections: info.PreconnectConns, SetupMs: float64(info.PreconnectTime.Microseconds()) / 1000}
		if info.PreconnectErr != nil {
			s.Run.Preconnect.Error = info.PreconnectErr.Error()
			s.Warnings = append(s.Warnings, "--preconnect: "+info.PreconnectErr.Error()+" (the run went on; those connections were opened cold)")
		}
	}
	// At the default stated share; the pipeline recomputes it at the run's
	// (its validity bounds' max_distortion) with m.CheckSelf(info, share).
	s.SelfCheck = m.CheckSelf(info, 0)
	s.Warnings = append(s.Warnings, s.SelfCheck.Reasons...)
	s.Warnings = append(s.Warnings, s.SelfCheck.Warnings...)
	if s.Requests.CutAtEnd > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf(
			"%d requests cut at the end: still in flight %v after the schedule ended (grace period); counted apart from errors",
			s.Requests.CutAtEnd, info.Grace))
	}
	if s.Requests.Dropped > 0 {
		s.Warnings = append(s.Warnings, fmt.Sprintf(
			"%d requests dropped: due but not started before the run ended (in-flight cap reached)", s.Requests.Dropped))
	}
	return s
}
