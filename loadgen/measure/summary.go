package measure

import (
	"fmt"
	"strconv"
	"time"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/results/schema"
)

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

// CheckSelf judges the run's metrics as the generator gathered them
// (selfcheck.Judge); maxShift is the stated share (0:
// selfcheck.DefaultMaxShift).
func (m *Metrics) CheckSelf(info loadgen.Info, maxShift float64) selfcheck.Result {
	return selfcheck.Judge(selfcheck.Input{Lag: m.All.Hist[MetricScheduleLag], Metrics: lagMeasuredTable,
		Figures: m.All.Hist, Corrected: m.LagCorrected,
		CPUUtilization: info.CPUUtilization, Host: info.Host, Dropped: info.Dropped}, maxShift)
}

// summarize builds one population's blocks; sched is its scheduled window
// in seconds (0: unknown).
func (g *Group) summarize(sched float64) (schema.Counts, schema.Throughput, map[string]schema.Hist, schema.Tokens) {
	c := schema.Counts{Sent: g.Sent, OK: g.OK, Errors: g.Errors, Dropped: g.Dropped, Retries: g.Retries, ErrorsByKind: g.ErrorsByKind,
		CutAtEnd: g.ErrorsByKind[string(loadgen.ErrCutAtEnd)], Cancelled: g.ErrorsByKind[string(loadgen.ErrCancelled)]}
	for k, e := range g.FirstErrors {
		if c.FirstErrors == nil {
			c.FirstErrors = map[string]string{}
		}
		c.FirstErrors[k] = "request " + strconv.FormatInt(e.Seq, 10) + ": " + e.Error
	}
	var t schema.Throughput
	if w := g.last - g.first; w > 0 {
		t = schema.Throughput{RequestsPerS: PerSecond(g.OK, w), OutputTokensPerS: PerSecond(g.OutputTokens, w),
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
	for n, c := range g.ratio { // counted > 0: a ratio with no event is absent
		if t.Extra == nil {
			t.Extra = map[string]float64{}
		}
		t.Extra[n] = float64(c[0]) / float64(c[1])
	}
	g.rates(&t, sched)
	lat := make(map[string]schema.Hist, len(g.Hist))
	for n, h := range g.Hist {
		lat[n] = schema.HistOf(h)
	}
	tok := schema.Tokens{Input: g.InputTokens, RequestedInput: g.RequestedInputTokens, Output: g.OutputTokens,
		Sources: g.TokenSources, ChunkTokenSources: g.ChunkTokenSources}
	return c, t, lat, tok
}

// Summary builds summary.json from the metrics and the run's info.
func (m *Metrics) Summary(info loadgen.Info, meta schema.SummaryMeta) *schema.Summary {
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
	s := &schema.Summary{Schema: schema.SummarySchema, Tool: version.NewTool(meta.Version),
		Classes: map[string]schema.ClassSummary{}, Definitions: defs,
		Warnings: []string{}}
	sched := info.Scheduled.Seconds()
	s.Requests, s.Throughput, s.LatencyMs, s.Tokens = m.All.summarize(sched)
	s.Requests.Warmup = m.Warmup
	for name, g := range m.Classes {
		var cs schema.ClassSummary
		cs.Requests, cs.Throughput, cs.LatencyMs, cs.Tokens = g.summarize(sched)
		s.Classes[name] = cs
	}
	if len(m.Stages) > 1 {
		s.Stages = map[string]schema.ClassSummary{}
		for name, g := range m.Stages {
			var cs schema.ClassSummary
			cs.Requests, cs.Throughput, cs.LatencyMs, cs.Tokens = g.summarize(info.StageScheduled[name].Seconds())
			s.Stages[name] = cs
		}
	}
	if len(m.TurnTTFT) > 0 {
		s.Turns = map[string]schema.Hist{}
		for turn, h := range m.TurnTTFT {
			s.Turns[strconv.Itoa(turn)] = schema.HistOf(h)
		}
	}
	s.Sessions = m.sessionSummary()
	load := meta.Load
	if load == nil {
		load = map[string]any{}
	}
	s.Run = schema.RunInfo{Started: info.Started.UTC().Format(time.RFC3339Nano),
		Ended:     info.Started.Add(info.Elapsed).UTC().Format(time.RFC3339Nano),
		DurationS: info.Elapsed.Seconds(), MeasuredWindowS: (m.All.last - m.All.first).Seconds(),
		Target: meta.Target, API: meta.API, Model: meta.Model, Load: load,
		Interrupted: info.Interrupted, GraceS: info.Grace.Seconds(), CPUUtilization: info.CPUUtilization}
	if info.Stopped != nil {
		s.Run.Stopped = info.Stopped.Error()
	}
	if info.Shard.Count > 0 {
		s.Run.Shard = &schema.ShardInfo{Index: info.Shard.Index, Count: info.Shard.Count, LateByS: info.LateStart.Seconds()}
	}
	if !info.StartAt.IsZero() {
		if s.Run.Shard == nil {
			s.Run.Shard = &schema.ShardInfo{Count: 1, LateByS: info.LateStart.Seconds()}
		}
		s.Run.Shard.StartAt = info.StartAt.UTC().Format(time.RFC3339Nano)
		if info.LateStart > 0 {
			s.Warnings = append(s.Warnings, fmt.Sprintf("started %v after --start-at %s: requests due meanwhile went out late, their lateness counted in their latency",
				info.LateStart.Round(time.Microsecond), s.Run.Shard.StartAt))
		}
	}
	if info.Preconnected {
		s.Run.Preconnect = schema.Preconnect{Used: true, Connections: info.PreconnectConns, SetupMs: float64(info.PreconnectTime.Microseconds()) / 1000}
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
