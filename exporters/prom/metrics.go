package prom

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/slo"
)

// latencyHistogram is one histogram row: a metric-table row with a
// Prometheus face, so the values observed are the table's (one definition
// of each metric) and its name, help and default buckets are the row's.
type latencyHistogram struct {
	name, metric, help string
	defaults           []float64
	row                *measure.LatencyMetric
}

// latencyHistogramsOf are the histogram rows of a metric table, in its
// order: the rows with a Prometheus name.
func latencyHistogramsOf(rows []measure.LatencyMetric) []latencyHistogram {
	var out []latencyHistogram
	for i := range rows {
		if f := rows[i].Prom; f.Name != "" {
			out = append(out, latencyHistogram{name: f.Name, metric: rows[i].Name, help: f.Help, defaults: f.Buckets, row: &rows[i]})
		}
	}
	return out
}

// Native histogram settings: ~10% bucket width, at most 160 buckets a
// series (the factor doubles when more would be needed), reset at most
// hourly to regain resolution.
const (
	nativeBucketFactor = 1.1
	nativeMaxBuckets   = 160
	nativeMinReset     = time.Hour
)

// HistogramMode says which forms of the latency histograms are exposed.
type HistogramMode string

// The histogram modes. Both is the default: classic buckets on the SLO
// edges for Prometheus without native histograms (and for queries on
// _bucket), native ones for full-resolution quantiles where they are on.
const (
	HistogramsBoth    HistogramMode = "both"
	HistogramsClassic HistogramMode = "classic"
	HistogramsNative  HistogramMode = "native"
)

// HistogramModes lists the modes in the order help texts name them.
var HistogramModes = []HistogramMode{HistogramsClassic, HistogramsNative, HistogramsBoth}

// ParseHistogramMode reads classic, native or both ("" is both).
func ParseHistogramMode(s string) (HistogramMode, error) {
	if s == "" {
		return HistogramsBoth, nil
	}
	for _, m := range HistogramModes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("histogram mode %q: want classic, native or both", s)
}

// Classic says whether the classic buckets are exposed.
func (h HistogramMode) Classic() bool { return h != HistogramsNative }

// Native says whether the native histogram is exposed.
func (h HistogramMode) Native() bool { return h != HistogramsClassic }

// Buckets is the classic bucket layout for one latency metric: defaults
// plus every threshold that specs' latency objectives on the metric set,
// as time.Duration.Seconds() gives it — the very computation that turns an
// observation into seconds, so a value exactly at the threshold falls in
// the threshold's bucket (Prometheus buckets are ≤ their bound, as SLO
// thresholds are).
func Buckets(metric string, defaults []float64, specs []*slo.Spec) []float64 {
	b := append([]float64(nil), defaults...)
	for _, s := range specs {
		if s == nil {
			continue
		}
		for _, o := range s.Objectives {
			if string(o.Metric) == metric && o.Kind() == slo.KindLatency && o.Threshold > 0 {
				b = append(b, o.Threshold.Seconds())
			}
		}
	}
	slices.Sort(b)
	return slices.Compact(b)
}

// Metrics holds the collectors of the contract on their own registry.
// Counters and gauges live as long as Metrics; the histograms are
// rebuilt when a new configuration changes their buckets (SetSpecs).
// Safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests, errors *prometheus.CounterVec
	// rates are the rate table's counters (tailgate_output_tokens_total):
	// a row's work of each successful record {target,class}.
	rates                     []rateCounter
	sloEvents                 *prometheus.CounterVec
	objectiveRatio            *prometheus.GaugeVec
	budgetRemaining, burnRate *prometheus.GaugeVec
	lastSuccess               *prometheus.GaugeVec
	coverage, targetInfo      *prometheus.GaugeVec
	reloadOK, reloadAt        prometheus.Gauge
	stateErrors               prometheus.Counter
	stateWritten              *prometheus.GaugeVec // no labels: absent until the first write

	mu      sync.RWMutex
	mode    HistogramMode
	specs   []*slo.Spec
	hists   map[string]*prometheus.HistogramVec // by metric-table name
	buckets map[string][]float64
	built   HistogramMode // the mode the histograms in hists have
	lat     []latencyHistogram
}

// Options configure New.
type Options struct {
	// Specs give the SLO thresholds the histograms' buckets include.
	Specs []*slo.Spec
	// Version is tailgate's version for tailgate_build_info (empty: version.Version).
	Version string
	// Revision is the VCS revision the binary was built from; empty:
	// version.Revision, else "unknown".
	Revision string
	// Daemon adds what a long-running canary needs and a pushed run does
	// not: the configuration-reload gauges, window coverage, target info,
	// and the process_* and go_* collectors (process_start_time_seconds
	// shows restarts).
	Daemon bool
	// Histograms is which forms of the latency histograms are exposed
	// ("": both).
	Histograms HistogramMode
	// Latency is the metric table the histograms are built from (nil:
	// measure.LatencyMetrics()); a test passes a table with a made-up row.
	Latency []measure.LatencyMetric
	// Rates is the rate table the counters are built from (nil:
	// measure.RateMetrics()); a test passes a table with a made-up row.
	Rates []measure.RateMetric
}

// rateCounter is one counter row: a rate-table row with a Prometheus face,
// counting the row's work (one definition of what the rate counts), or
// for a ratio row the records it counts (vec) and those of them bad.
type rateCounter struct {
	row *measure.RateMetric
	vec *prometheus.CounterVec
	bad *prometheus.CounterVec // nil: a floor
}

// rateCountersOf are the counter rows of a rate table, in its order: the
// rows with a Prometheus name and a per-record work or classing (Bad).
func rateCountersOf(rows []measure.RateMetric) []rateCounter {
	var out []rateCounter
	labels := []string{LabelTarget, LabelClass}
	for i := range rows {
		switch f := rows[i].Prom; {
		case f.Name == "":
		case rows[i].Work != nil:
			out = append(out, rateCounter{row: &rows[i], vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name, Help: f.Help}, labels)})
		case rows[i].Bad != nil:
			// A pair, bad and counted: rate() of one over the other is the
			// ratio over any window.
			out = append(out, rateCounter{row: &rows[i],
				vec: prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name + "_events_total", Help: f.Help + " Records counted."}, labels),
				bad: prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.Name + "_bad_total", Help: f.Help + " Records counted bad."}, labels)})
		}
	}
	return out
}

// collectors are c's counters.
func (c rateCounter) collectors() []*prometheus.CounterVec {
	if c.bad == nil {
		return []*prometheus.CounterVec{c.vec}
	}
	return []*prometheus.CounterVec{c.bad, c.vec}
}

// add counts r, a record not of the warm-up, into c.
func (c rateCounter) add(r *loadgen.Record, target, class string) {
	if c.bad == nil {
		if r.OK() {
			c.vec.WithLabelValues(target, class).Add(float64(max(c.row.Work(r), 0)))
		}
		return
	}
	switch counted, bad := c.row.Bad(r); {
	case !counted:
	case bad:
		c.bad.WithLabelValues(target, class).Inc()
		fallthrough
	default:
		c.vec.WithLabelValues(target, class).Inc()
	}
}

// New makes the collectors and registers them, and tailgate_build_info, on
// a fresh registry.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), mode: opts.Histograms}
	if opts.Latency == nil {
		opts.Latency = measure.LatencyMetrics()
	}
	m.lat = latencyHistogramsOf(opts.Latency)
	if opts.Rates == nil {
		opts.Rates = measure.RateMetrics()
	}
	m.rates = rateCountersOf(opts.Rates)
	if m.mode == "" {
		m.mode = HistogramsBoth
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestsTotal,
		Help: "Finished requests by outcome (ok or error); dropped and cut_at_end requests count as errors of their kind."},
		[]string{LabelTarget, LabelClass, LabelOutcome})
	m.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: RequestErrorsTotal,
		Help: "Failed requests by protocol-neutral error kind (client_error, rate_limited, server_error, timeout, connect, ...)."},
		[]string{LabelTarget, LabelClass, LabelKind})
	m.sloEvents = prometheus.NewCounterVec(prometheus.CounterOpts{Name: SLOEventsTotal,
		Help: "SLI events per SLO objective, good or bad, by the objective's per-record rules (slo/events.go)."},
		[]string{LabelSLO, LabelObjective, LabelTarget, LabelOutcome})
	m.objectiveRatio = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SLOObjectiveRatio,
		Help: "The objective's target fraction of good events (1 - error budget)."}, []string{LabelSLO, LabelObjective})
	m.budgetRemaining = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SLOErrorBudgetRemainingRatio,
		Help: "Share of the error budget left over the SLO window as far as this process has seen it (negative: overspent)."},
		[]string{LabelSLO, LabelObjective, LabelTarget})
	m.burnRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SLOBurnRate,
		Help: "Error ratio over the rolling window divided by the error budget (1 spends the budget exactly over the SLO window)."},
		[]string{LabelSLO, LabelObjective, LabelTarget, LabelWindow})
	m.lastSuccess = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: LastSuccessTimestampSeconds,
		Help: "When the target's last successful request ended, Unix seconds."}, []string{LabelTarget})
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: BuildInfo,
		Help: "Always 1; labels say which tailgate build is running."}, []string{LabelVersion, LabelRevision, LabelGoVersion})
	ver := opts.Version
	if ver == "" {
		ver = version.Version
	}
	rev := opts.Revision
	if rev == "" {
		rev = version.RevisionOrUnknown()
	}
	build.WithLabelValues(ver, rev, runtime.Version()).Set(1)
	m.reg.MustRegister(m.requests, m.errors, m.sloEvents, m.objectiveRatio,
		m.budgetRemaining, m.burnRate, m.lastSuccess, build)
	for _, c := range m.rates {
		for _, v := range c.collectors() {
			m.reg.MustRegister(v)
		}
	}
	if opts.Daemon {
		m.reloadOK = prometheus.NewGauge(prometheus.GaugeOpts{Name: ConfigLastReloadSuccessful,
			Help: "1 when the last configuration load succeeded; 0 when it failed and the previous configuration is still in use."})
		m.reloadAt = prometheus.NewGauge(prometheus.GaugeOpts{Name: ConfigLastReloadSuccessTimestampSeconds,
			Help: "When the configuration was last loaded successfully, Unix seconds."})
		m.coverage = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: SLOWindowCoverageRatio,
			Help: "Share of the rolling window the canary has data for (1: the whole window; less early in its life). Read burn rates and the budget with it."},
			[]string{LabelSLO, LabelObjective, LabelTarget, LabelWindow})
		m.targetInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: TargetInfo,
			Help: "Always 1; labels say what a target probes: its URL (credentials redacted), API and model."},
			[]string{LabelTarget, LabelURL, LabelAPI, LabelModel})
		m.stateErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: CanaryStateWriteErrorsTotal,
			Help: "Failed writes of the canary's state file; the windows not kept are lost at the next restart, and /healthz fails while the latest write failed."})
		m.stateWritten = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: CanaryStateLastSuccessTimestampSeconds,
			Help: "When the canary's state file was last written successfully, Unix seconds (absent before the first write and without a state file)."}, nil)
		m.reg.MustRegister(m.reloadOK, m.reloadAt, m.coverage, m.targetInfo, m.stateErrors, m.stateWritten,
			collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), collectors.NewGoCollector())
	}
	m.SetSpecs(opts.Specs)
	return m
}

// Registry is the registry every collector is on (serve it, or push it).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SetSpecs sets the objective ratios of specs and rebuilds each histogram
// whose buckets the specs' thresholds change (its series restart from zero,
// which Prometheus' rate() reads as a counter reset).
func (m *Metrics) SetSpecs(specs []*slo.Spec) {
	for _, s := range specs {
		for i := range s.Objectives {
			o := &s.Objectives[i]
			if !o.HasRecordEvents() {
				continue
			}
			if b, ok := o.ErrorBudget(); ok {
				m.objectiveRatio.WithLabelValues(s.Name, o.Name).Set(1 - b)
			}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.specs = specs
	m.rebuild()
}

// SetHistogramMode changes which forms of the latency histograms are
// exposed ("": both); the histograms are rebuilt if it changes (their
// series restart from zero).
func (m *Metrics) SetHistogramMode(mode HistogramMode) {
	if mode == "" {
		mode = HistogramsBoth
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.mode = mode
	m.rebuild()
}

// HistogramMode is the mode in use.
func (m *Metrics) HistogramMode() HistogramMode {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.mode
}

// rebuild makes each histogram whose buckets or mode changed anew; m.mu
// is held.
func (m *Metrics) rebuild() {
	if m.hists == nil {
		m.hists, m.buckets = map[string]*prometheus.HistogramVec{}, map[string][]float64{}
	}
	for _, h := range m.lat {
		b := Buckets(h.metric, h.defaults, m.specs)
		if old, ok := m.hists[h.metric]; ok {
			if slices.Equal(b, m.buckets[h.metric]) && m.built == m.mode {
				continue
			}
			m.reg.Unregister(old)
		}
		opts := prometheus.HistogramOpts{Name: h.name, Help: h.help}
		if m.mode.Classic() {
			opts.Buckets = b
		}
		if m.mode.Native() {
			opts.NativeHistogramBucketFactor = nativeBucketFactor
			opts.NativeHistogramMaxBucketNumber = nativeMaxBuckets
			opts.NativeHistogramMinResetDuration = nativeMinReset
		}
		v := prometheus.NewHistogramVec(opts, []string{LabelTarget, LabelClass})
		m.reg.MustRegister(v)
		m.hists[h.metric], m.buckets[h.metric] = v, b
	}
	m.built = m.mode
}

// HistogramBuckets is the classic bucket layout in use for a metric-table
// metric (measure.MetricTTFT), nil if it is not exported or the mode is native.
func (m *Metrics) HistogramBuckets(metric string) []float64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.mode.Classic() {
		return nil
	}
	return append([]float64(nil), m.buckets[metric]...)
}

// SetBudgetRemaining sets an objective's remaining error budget.
func (m *Metrics) SetBudgetRemaining(sloName, objective, target string, v float64) {
	m.budgetRemaining.WithLabelValues(sloName, objective, target).Set(v)
}

// SetBurnRate sets an objective's burn rate over one window.
func (m *Metrics) SetBurnRate(sloName, objective, target, window string, v float64) {
	m.burnRate.WithLabelValues(sloName, objective, target, window).Set(v)
}

// SetCoverage sets the share of a rolling window the canary has data for.
func (m *Metrics) SetCoverage(sloName, objective, target, window string, v float64) {
	if m.coverage != nil {
		m.coverage.WithLabelValues(sloName, objective, target, window).Set(v)
	}
}

// SetTargetInfo says what a target probes (url already redacted); a
// changed target replaces its old series.
func (m *Metrics) SetTargetInfo(target, url, api, model string) {
	if m.targetInfo == nil {
		return
	}
	m.targetInfo.DeletePartialMatch(prometheus.Labels{LabelTarget: target})
	m.targetInfo.WithLabelValues(target, url, api, model).Set(1)
}

// SetReload records a configuration load: ok, and when it succeeded.
func (m *Metrics) SetReload(ok bool, at time.Time) {
	if m.reloadOK == nil {
		return
	}
	if !ok {
		m.reloadOK.Set(0)
		return
	}
	m.reloadOK.Set(1)
	m.reloadAt.Set(float64(at.UnixNano()) / 1e9)
}

// SetStateWrite records a write of the canary's state file: ok, and when
// it succeeded.
func (m *Metrics) SetStateWrite(ok bool, at time.Time) {
	if m.stateErrors == nil {
		return
	}
	if !ok {
		m.stateErrors.Inc()
		return
	}
	m.stateWritten.WithLabelValues().Set(float64(at.UnixNano()) / 1e9)
}

// Forget deletes every series of a target that is no longer configured,
// so a removed target does not linger with its last values.
func (m *Metrics) Forget(target string) {
	l := prometheus.Labels{LabelTarget: target}
	for _, v := range []interface {
		DeletePartialMatch(prometheus.Labels) int
	}{m.requests, m.errors, m.sloEvents, m.budgetRemaining, m.burnRate, m.lastSuccess} {
		v.DeletePartialMatch(l)
	}
	for _, c := range m.rates {
		for _, v := range c.collectors() {
			v.DeletePartialMatch(l)
		}
	}
	for _, v := range []*prometheus.GaugeVec{m.coverage, m.targetInfo} {
		if v != nil {
			v.DeletePartialMatch(l)
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, h := range m.hists {
		h.DeletePartialMatch(l)
	}
}

// ForgetObjective deletes the series of an objective that is no longer
// configured for target ("" for every target).
func (m *Metrics) ForgetObjective(sloName, objective, target string) {
	l := prometheus.Labels{LabelSLO: sloName, LabelObjective: objective}
	if target != "" {
		l[LabelTarget] = target
	} else {
		m.objectiveRatio.DeletePartialMatch(l)
	}
	m.sloEvents.DeletePartialMatch(l)
	m.budgetRemaining.DeletePartialMatch(l)
	m.burnRate.DeletePartialMatch(l)
	if m.coverage != nil {
		m.coverage.DeletePartialMatch(l)
	}
}

func (m *Metrics) histogram(metric string) *prometheus.HistogramVec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.hists[metric]
}
