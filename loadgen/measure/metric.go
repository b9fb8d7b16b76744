package measure

import (
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// The metric table: every latency metric is one row, read by the
// histograms (Metrics), summary.json (latency_ms keys and definitions) and
// the slo package (objective metrics and their judging), so a new metric
// is one row here.
//
// One resolution rule holds everywhere: every instant is truncated to the
// microsecond before it is subtracted, exactly as Record.MarshalJSON writes
// it, so a live record and its requests.jsonl copy give the same samples.
// Quotients (TPOT, ITL) of those differences keep their nanoseconds.

// Metric names: the keys of latency_ms in summary.json and the latency
// metrics of an SLO.
const (
	MetricTTFT        = "ttft"
	MetricTTFAT       = "ttfat"
	MetricICL         = "icl"
	MetricITL         = "itl"
	MetricTPOT        = "tpot"
	MetricE2E         = "e2e"
	MetricScheduleLag = "schedule_lag"
)

// SamplePer says what one sample of a metric is.
type SamplePer string

// How many samples a metric takes from one record.
const (
	PerRequest  SamplePer = "request"   // at most one sample per record
	PerChunkGap SamplePer = "chunk_gap" // one per gap between content chunks
	PerToken    SamplePer = "token"     // one per output token after the first
)

// LatencyMetric is one row of the metric table.
type LatencyMetric struct {
	Name string
	Per  SamplePer
	// Streamed metrics need the gaps of a stream: a record whose answer came
	// as one body (Record.Unstreamed) gives none.
	Streamed bool
	// Definition is written into summary.json's definitions.
	Definition string
	// Events names what is counted, for "nothing to measure" notes.
	Events string
	// value is the sample of a PerRequest metric.
	value func(r *loadgen.Record) (time.Duration, bool)

	// The faces the packages above measure build from this row.

	// Label is the metric's name in column headings and plot legends
	// ("TTFT").
	Label string
	// Prom is its Prometheus histogram (exporters/prom); a zero Name: not
	// exported.
	Prom PromFace
	// Columns are the percentiles the metric shows in each table that has
	// latency columns (the Table names), in the order shown; a table it is
	// absent from does not show it.
	Columns map[string][]float64
	// Compare: `tailgate compare` compares it when no metric is named.
	Compare bool
	// Sweep: a sweep's levels keep its latency_ms entry.
	Sweep bool
	// Goodput: it may bound a goodput constraint (slo.Constraints).
	// GoodputUndefinedMeets: a successful request the metric gives no
	// sample meets that bound (TPOT below two output tokens); otherwise it
	// fails it (TTFT without a token).
	Goodput, GoodputUndefinedMeets bool
}

// PromFace is a metric's Prometheus histogram: its name in the metric
// contract, its help text and its default classic bucket bounds (seconds).
type PromFace struct {
	Name    string
	Help    string
	Buckets []float64
}

// The tables with latency columns, the keys of LatencyMetric.Columns.
const (
	TableReportParts    = "report.parts"          // report.html's per-part summary
	TableReportPartsMD  = "report.parts.markdown" // the same in the Markdown report
	TableReportClasses  = "report.classes"        // report.html's per-class table
	TableReportLevels   = "report.levels"         // the sweep's levels in report.html and Markdown
	TableReportSweepLat = "report.sweep.latency"  // the plot of latency against load
	TableSweep          = "sweep.table"           // `tailgate sweep`'s table
)

// Column is one latency column of a table: a metric at a percentile.
type Column struct {
	Metric string
	Label  string  // "TTFT p99"
	Q      float64 // 0.5, 0.99
}

// ColumnsOf lists the columns of table in rows, in row order and then each
// row's percentile order.
func ColumnsOf(rows []LatencyMetric, table string) []Column {
	var out []Column
	for _, m := range rows {
		for _, q := range m.Columns[table] {
			out = append(out, Column{Metric: m.Name, Label: fmt.Sprintf("%s p%g", m.Label, 100*q), Q: q})
		}
	}
	return out
}

// NewLatencyMetric is a per-request row whose sample is value, for a
// table built outside measure (a test's made-up metric).
func NewLatencyMetric(m LatencyMetric, value func(r *loadgen.Record) (time.Duration, bool)) LatencyMetric {
	m.Per, m.value = PerRequest, value
	return m
}

// Prometheus default classic bucket bounds (seconds). Every SLO threshold
// of the metric is added to them exactly (prom.Buckets), so "share of
// requests ≤ 500 ms" is a bucket ratio, never an interpolation.
var (
	promTTFTBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	promGapBuckets  = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1}
	promE2EBuckets  = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
)

// Percentile lists of the Columns.
var (
	p99    = []float64{0.99}
	p50p99 = []float64{0.5, 0.99}
)

// latencyMetricsTable is the metric table, in report order.
var latencyMetricsTable = []LatencyMetric{
	{Name: MetricTTFT, Per: PerRequest, value: ttftOf, Events: "successful requests with a token",
		Definition: "intended start to the first chunk carrying at least one output token (answer or reasoning); role-only, empty and comment chunks do not count; for an answer that came as one body, its end",
		Label:      "TTFT", Compare: true, Sweep: true, Goodput: true,
		Prom: PromFace{Name: "tailgate_ttft_seconds", Buckets: promTTFTBuckets,
			Help: "Time to first token: intended start to the first chunk carrying an output token (successful requests)."},
		Columns: map[string][]float64{TableReportParts: p50p99, TableReportPartsMD: p50p99, TableReportClasses: p50p99,
			TableReportLevels: p99, TableReportSweepLat: p99, TableSweep: p99}},
	{Name: MetricTTFAT, Per: PerRequest, value: ttfatOf, Events: "successful requests with an answer token",
		Definition: "intended start to the first answer (non-reasoning) token",
		Label:      "TTFAT", Goodput: true},
	{Name: MetricICL, Per: PerChunkGap, Streamed: true, Events: "chunk gaps",
		Definition: "inter-chunk latency: gap between consecutive content-bearing chunks of a stream, one sample per gap; none from an answer that came as one body",
		Label:      "ICL"},
	{Name: MetricITL, Per: PerToken, Streamed: true, Events: "output tokens after the first (with token counts)",
		Definition: "inter-token latency: each chunk gap divided by the tokens that chunk carries, one sample per token (tokens per chunk: see tokens.chunk_token_sources); none from an answer that came as one body",
		Label:      "ITL", Compare: true, Sweep: true,
		Prom: PromFace{Name: "tailgate_itl_seconds", Buckets: promGapBuckets,
			Help: "Inter-token latency: each chunk gap divided by the tokens it carries, one observation per token (successful streamed requests)."},
		Columns: map[string][]float64{TableReportParts: p50p99, TableReportPartsMD: p99, TableSweep: p99}},
	{Name: MetricTPOT, Per: PerRequest, Streamed: true, value: tpotOf, Events: "successful streamed requests with ≥ 2 output tokens",
		Definition: "per request (E2E - TTFT) / (output tokens - 1), for streamed requests with at least 2 output tokens",
		Label:      "TPOT", Compare: true, Sweep: true, Goodput: true, GoodputUndefinedMeets: true,
		Prom: PromFace{Name: "tailgate_tpot_seconds", Buckets: promGapBuckets,
			Help: "Time per output token: (E2E - TTFT) / (output tokens - 1), for streamed requests with at least 2 tokens."},
		Columns: map[string][]float64{TableReportParts: p99, TableReportPartsMD: p99, TableReportClasses: p99,
			TableReportLevels: p99, TableReportSweepLat: p99, TableSweep: p99}},
	{Name: MetricE2E, Per: PerRequest, value: e2eOf, Events: "successful requests",
		Definition: "intended start to the end of the response",
		Label:      "E2E", Compare: true, Sweep: true, Goodput: true,
		Prom: PromFace{Name: "tailgate_e2e_seconds", Buckets: promE2EBuckets,
			Help: "End-to-end latency: intended start to the end of the response (successful requests)."},
		Columns: map[string][]float64{TableReportParts: p50p99, TableReportPartsMD: p99, TableReportClasses: p50p99,
			TableReportLevels: p99, TableReportSweepLat: p50p99, TableSweep: p99}},
	{Name: MetricScheduleLag, Per: PerRequest, value: scheduleLagOf, Events: "successful requests",
		Definition: "actual send minus intended start: the load generator's own lateness",
		Label:      "schedule lag"},
}

// metricNamesTable lists the latency metrics in report order.
var metricNamesTable = func() []string {
	out := make([]string, len(latencyMetricsTable))
	for i, m := range latencyMetricsTable {
		out[i] = m.Name
	}
	return out
}()

// FindLatencyMetric returns the row named name, or nil.
func FindLatencyMetric(name string) *LatencyMetric { return FindIn(latencyMetricsTable, name) }

// The per-request samples of the table's rows, by Record's own figures.

func ttftOf(r *loadgen.Record) (time.Duration, bool) { return r.TTFT() }

func ttfatOf(r *loadgen.Record) (time.Duration, bool) { return r.TTFAT() }

func e2eOf(r *loadgen.Record) (time.Duration, bool) { return r.E2E(), true }

func scheduleLagOf(r *loadgen.Record) (time.Duration, bool) { return r.ScheduleLag(), true }

func tpotOf(r *loadgen.Record) (time.Duration, bool) { return r.TPOT() }

// has reports whether r gives this metric samples at all: a successful
// record, streamed when the metric needs a stream.
func (m *LatencyMetric) has(r *loadgen.Record) bool { return r.OK() && !(m.Streamed && r.Unstreamed) }

// Of is the sample of a PerRequest metric for r; ok is false when r has
// none (failed, no token, unstreamed for TPOT, …) or m is not per request.
func (m *LatencyMetric) Of(r *loadgen.Record) (d time.Duration, ok bool) {
	if m.value == nil || !m.has(r) {
		return 0, false
	}
	return m.value(r)
}

// Samples iterates the samples of r for m. It allocates nothing, so a
// streaming consumer stays at zero allocations per record:
//
//	for s := m.Samples(r); s.Next(); {
//		h.RecordValues(s.Value().Microseconds(), int64(s.Weight()))
//	}
func (m *LatencyMetric) Samples(r *loadgen.Record) Samples {
	s := Samples{m: m, r: r, i: 0}
	if !m.has(r) {
		s.i = -1
	}
	return s
}

// Samples is an iterator over one record's samples of one metric.
type Samples struct {
	m *LatencyMetric
	r *loadgen.Record
	i int // next chunk index (gap metrics) or 0/1 (per request); -1 done
	v time.Duration
	n int
}

// Next advances to the next sample, reporting whether there is one.
func (s *Samples) Next() bool {
	if s.i < 0 {
		return false
	}
	switch s.m.Per {
	case PerRequest:
		if s.i > 0 {
			s.i = -1
			return false
		}
		s.i = 1
		v, ok := s.m.value(s.r)
		if !ok {
			s.i = -1
			return false
		}
		s.v, s.n = v, 1
		return true
	default:
		if s.i == 0 {
			s.i = 1
		}
		for ; s.i < len(s.r.Chunks); s.i++ {
			c, gap := s.r.Chunks[s.i], s.r.ChunkGap(s.i)
			if s.m.Per == PerChunkGap {
				s.v, s.n = gap, 1
				s.i++
				return true
			}
			// PerToken: chunks without a token count give no sample (call
			// Record.Finalize first).
			if c.Tokens > 0 {
				s.v, s.n = gap/time.Duration(c.Tokens), c.Tokens
				s.i++
				return true
			}
		}
		s.i = -1
		return false
	}
}

// Value is the current sample.
func (s *Samples) Value() time.Duration { return s.v }

// Weight is how many events the current sample stands for (ITL: the tokens
// of the chunk; otherwise 1).
func (s *Samples) Weight() int { return s.n }

// FindIn returns the row of rows named name, or nil.
func FindIn(rows []LatencyMetric, name string) *LatencyMetric {
	for i := range rows {
		if rows[i].Name == name {
			return &rows[i]
		}
	}
	return nil
}

// NamesWhere lists the names of the rows of rows for which keep is true,
// in row order.
func NamesWhere(rows []LatencyMetric, keep func(*LatencyMetric) bool) []string {
	var out []string
	for i := range rows {
		if keep(&rows[i]) {
			out = append(out, rows[i].Name)
		}
	}
	return out
}

// Compared lists the rows of rows that `tailgate compare` compares when no
// metric is named.
func Compared(rows []LatencyMetric) []string {
	return NamesWhere(rows, func(m *LatencyMetric) bool { return m.Compare })
}

// GoodputMetrics lists the rows of rows that may bound a goodput
// constraint, in row order.
func GoodputMetrics(rows []LatencyMetric) []string {
	return NamesWhere(rows, func(m *LatencyMetric) bool { return m.Goodput })
}
