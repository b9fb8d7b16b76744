package measure

import (
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// The rate table: every floor and ratio metric (the throughput rates, the
// error rate, goodput, session success) is one row, read by the slo
// package (objective kinds, what a floor counts, what demand bounds it),
// summary.json's throughput block and the faces above loadgen, as the
// latency metric table is (metric.go).

// Rate metric names: the floor and ratio metrics of an SLO.
const (
	MetricErrorRate        = "error_rate"
	MetricOutputTokensPerS = "output_tokens_per_s"
	MetricInputTokensPerS  = "input_tokens_per_s"
	MetricRequestsPerS     = "requests_per_s"
	MetricGoodputPerS      = "goodput_per_s"
	MetricSessionSuccess   = "session_success"
)

// RateKind says which way a rate metric is bounded.
type RateKind string

// The kinds of rate metric.
const (
	// RateFloor is work per second of the measured window, bounded below.
	RateFloor RateKind = "floor"
	// RateRatio is bad over all events, bounded above.
	RateRatio RateKind = "ratio"
)

// Reach says what bounds the most a floor can show from the load offered
// alone (slo's demand rule): a floor above it is out of the load's reach.
type Reach string

// The reaches of a floor.
const (
	ReachNone     Reach = ""         // no bound is known (input tokens)
	ReachRequests Reach = "requests" // the offered requests
	ReachTokens   Reach = "tokens"   // the offered requests × the most max_tokens asked
)

// RateMetric is one row of the rate table.
type RateMetric struct {
	Name string
	Kind RateKind
	// Unit is what Label's values are counted in ("req/s"; "" for a ratio).
	Unit string
	// Definition says what the metric is.
	Definition string
	// PerSession: judged per agent session, not per request.
	PerSession bool
	// Work is what one successful record adds to a floor (nil: not counted
	// per record, as goodput is, which counts the records that met its
	// constraints).
	Work func(r *loadgen.Record) int64
	// Goodput: the floor counts the successful records that met the
	// goodput constraints, which it takes.
	Goodput bool
	// ErrorKinds: the ratio counts failed requests and may be restricted
	// to some error kinds.
	ErrorKinds bool
	// Bad classes one record for a ratio counted per record: counted
	// false leaves it out, bad true counts it against the ratio (nil: a
	// floor, or a ratio with rules of its own, as error_rate's kinds and
	// session_success's sessions are). Warm-up records never reach it.
	Bad func(r *loadgen.Record) (counted, bad bool)
	// ShareOfOffered: the floor may be judged as a share of the offered
	// requests.
	ShareOfOffered bool
	// Reach bounds the floor from the offered load.
	Reach Reach
	// Of reads the metric from a throughput block; ok false: absent (not
	// measured, or not a rate summary.json holds).
	Of func(t *schema.Throughput) (v float64, ok bool)

	// The faces the packages above loadgen build from this row.

	// Label is the metric's column heading ("out tok/s").
	Label string
	// Absent is what the terminal summary says in place of the figure
	// when it is absent ("": "<Label> not measured").
	Absent string
	// Prom is its Prometheus counter of Work {target,class} (exporters/prom),
	// or for a ratio with Bad the pair Name_bad_total and Name_events_total
	// (bad and counted records); a zero Name: not exported. Buckets are
	// unused.
	Prom PromFace
	// Columns are the tables (the Table names) that show the metric as a
	// column of its own after the fixed ones; the built-in rates have
	// fixed places in those tables and none here.
	Columns []string
	// Compare: `tailgate compare` shows it when no metric is named.
	Compare bool
	// Sweep: a sweep's levels keep it.
	Sweep bool

	// extra: summary.json holds it in Throughput.Extra (a row made outside
	// loadgen), so Metrics counts its Work, or its bad and counted records.
	extra bool
}

// NewRateMetric is a floor whose work per successful record is work, for a
// table built outside loadgen (a test's made-up metric): summary.json
// writes it into the throughput block under its name.
func NewRateMetric(m RateMetric, work func(r *loadgen.Record) int64) RateMetric {
	m.Kind, m.Work, m.extra = RateFloor, work, true
	name := m.Name
	m.Of = func(t *schema.Throughput) (float64, bool) {
		v, ok := t.Extra[name]
		return v, ok
	}
	return m
}

// NewRatioMetric is a ratio counted per record, whose records bad classes,
// for a table built outside loadgen (a test's made-up metric): summary.json
// writes bad over counted into the throughput block under its name, absent
// while nothing was counted.
func NewRatioMetric(m RateMetric, bad func(r *loadgen.Record) (counted, bad bool)) RateMetric {
	m = NewRateMetric(m, nil)
	m.Kind, m.Bad = RateRatio, bad
	return m
}

// rateMetricsTable is the rate table, in the order SLO errors list them.
var rateMetricsTable = []RateMetric{
	{Name: MetricErrorRate, Kind: RateRatio, ErrorKinds: true, Label: "error rate",
		Definition: "failed requests over the requests counted (cut at the end, dropped and cancelled by the run left out unless named)"},
	{Name: MetricOutputTokensPerS, Kind: RateFloor, Unit: "tok/s", Label: "out tok/s", Reach: ReachTokens,
		Definition: "output tokens of successful requests per second of the measured window",
		Work:       func(r *loadgen.Record) int64 { return int64(max(r.OutputTokens, 0)) },
		Of:         func(t *schema.Throughput) (float64, bool) { return t.OutputTokensPerS, true },
		Prom:       PromFace{Name: "tailgate_output_tokens_total", Help: "Output tokens of successful requests (the server's usage count when given)."}},
	{Name: MetricInputTokensPerS, Kind: RateFloor, Unit: "tok/s", Label: "in tok/s",
		Definition: "input tokens of successful requests per second of the measured window",
		Work:       func(r *loadgen.Record) int64 { return int64(max(r.InputTokens, 0)) },
		Of:         func(t *schema.Throughput) (float64, bool) { return t.InputTokensPerS, true }},
	{Name: MetricRequestsPerS, Kind: RateFloor, Unit: "req/s", Label: "completed/s", Reach: ReachRequests, ShareOfOffered: true,
		Definition: "successful requests per second of the measured window",
		Work:       func(*loadgen.Record) int64 { return 1 },
		Of:         func(t *schema.Throughput) (float64, bool) { return t.RequestsPerS, true }},
	{Name: MetricGoodputPerS, Kind: RateFloor, Unit: "req/s", Label: "goodput/s", Reach: ReachRequests, ShareOfOffered: true, Goodput: true,
		Definition: "successful requests that met every goodput constraint per second of the measured window",
		Absent:     "goodput not judged (no TPOT without a stream)",
		Of: func(t *schema.Throughput) (float64, bool) {
			if t.GoodputPerS == nil {
				return 0, false
			}
			return *t.GoodputPerS, true
		}},
	{Name: MetricSessionSuccess, Kind: RateRatio, PerSession: true, Label: "session failures",
		Definition: "failed sessions over the sessions that ran their course"},
}

// FindRateIn returns the row of rows named name, or nil.
func FindRateIn(rows []RateMetric, name string) *RateMetric {
	for i := range rows {
		if rows[i].Name == name {
			return &rows[i]
		}
	}
	return nil
}

// RatesWhere lists the names of the rows of rows for which keep is true,
// in row order.
func RatesWhere(rows []RateMetric, keep func(*RateMetric) bool) []string {
	var out []string
	for i := range rows {
		if keep(&rows[i]) {
			out = append(out, rows[i].Name)
		}
	}
	return out
}

// RateColumnsOf lists the rows of rows that table shows as columns of
// their own, in row order.
func RateColumnsOf(rows []RateMetric, table string) []*RateMetric {
	var out []*RateMetric
	for i := range rows {
		for _, t := range rows[i].Columns {
			if t == table {
				out = append(out, &rows[i])
				break
			}
		}
	}
	return out
}

// extraRates are the rows of rows whose work Metrics counts itself.
func extraRates(rows []RateMetric) []RateMetric {
	var out []RateMetric
	for _, r := range rows {
		if r.extra && (r.Work != nil || r.Bad != nil) {
			out = append(out, r)
		}
	}
	return out
}
