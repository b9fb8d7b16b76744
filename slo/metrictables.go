package slo

import (
	"strings"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// Tables are the metric tables an SLO is read and judged by: loadgen's
// latency table and its rate table (floors and ratios). ParseSpecIn takes
// them, so a test's made-up row is an objective metric without changing
// what any other spec reads.
type Tables struct {
	Latency []measure.LatencyMetric
	Rates   []measure.RateMetric
}

// BuiltinTables are copies of loadgen's tables.
func BuiltinTables() Tables {
	return Tables{Latency: measure.LatencyMetrics(), Rates: measure.RateMetrics()}
}

// builtin is the package's own copy of the tables, never changed: what an
// objective not resolved by a parser (built in code) is judged by.
var builtin = BuiltinTables()

// otherMetrics are the latency metrics that are rows of neither table:
// queue delay comes from server telemetry, session duration from the
// session roll-up.
var otherMetrics = []Metric{QueueDelay, SessionDuration}

// kind is m's objective kind in t ("" for an unknown metric).
func (t *Tables) kind(m Metric) Kind {
	switch {
	case m == ManualResult:
		return KindManual
	case measure.FindIn(t.Latency, string(m)) != nil:
		return KindLatency
	}
	if r := measure.FindRateIn(t.Rates, string(m)); r != nil {
		return Kind(r.Kind)
	}
	for _, o := range otherMetrics {
		if o == m {
			return KindLatency
		}
	}
	return ""
}

// list names t's metrics, latency rows first, for "known: …" errors.
func (t *Tables) list() string {
	var s []string
	for _, m := range t.Latency {
		s = append(s, m.Name)
	}
	s = append(s, string(QueueDelay))
	for _, r := range t.Rates {
		if !r.PerSession {
			s = append(s, r.Name)
		}
	}
	s = append(s, string(SessionDuration))
	for _, r := range t.Rates {
		if r.PerSession {
			s = append(s, r.Name)
		}
	}
	return strings.Join(s, ", ")
}

// resolve ties o to its metric's rows in t: the judge and the parser's
// checks read the rows, not the metric's name.
func (o *Objective) resolve(t *Tables) {
	o.kind = t.kind(o.Metric)
	o.lat = measure.FindIn(t.Latency, string(o.Metric))
	o.rate = measure.FindRateIn(t.Rates, string(o.Metric))
}

// rows are o's kind and rows: those it was resolved to, else the
// built-in tables' (an objective built in code). It allocates nothing: the
// judge asks it per record.
func (o *Objective) rows() (Kind, *measure.LatencyMetric, *measure.RateMetric) {
	if o.kind != "" {
		return o.kind, o.lat, o.rate
	}
	return builtin.kind(o.Metric), measure.FindIn(builtin.Latency, string(o.Metric)), measure.FindRateIn(builtin.Rates, string(o.Metric))
}

// latency is o's row of the latency table (nil: not judged from records).
func (o *Objective) latency() *measure.LatencyMetric {
	_, l, _ := o.rows()
	return l
}

// rateRow is o's row of the rate table (nil: not a floor or ratio).
func (o *Objective) rateRow() *measure.RateMetric {
	_, _, r := o.rows()
	return r
}

// perSession reports whether o is judged per session, not per request.
func (o *Objective) perSession() bool {
	if r := o.rateRow(); r != nil {
		return r.PerSession
	}
	return o.Metric == SessionDuration
}
