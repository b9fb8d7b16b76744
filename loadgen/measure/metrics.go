package measure

import (
	"sort"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// Histogram bounds, fixed for every summary: microseconds, 1 µs to 1 h, 3 significant
// digits. Every histogram shares them so any two merge exactly.
const (
	histMinMicros = 1
	histMaxMicros = int64(time.Hour / time.Microsecond)
	histSigDigits = 3
)

// NewHistogram returns a histogram with tailgate's standard bounds.
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigDigits)
}

// Group accumulates one population of records (the whole run or a class).
type Group struct {
	Hist map[string]*hdrhistogram.Histogram

	Sent, OK, Errors, Dropped int64
	Retries                   int64 // re-sends on a fresh connection (Record.Retries)
	ErrorsByKind              map[string]int64
	// FirstErrors holds, per error kind, the failed record intended
	// earliest: what the server said first, for the report.
	FirstErrors               map[string]schema.FirstError
	InputTokens, OutputTokens int64
	RequestedInputTokens      int64
	Good                      int64 // met every goodput constraint
	// Unjudged counts OK records the goodput judge could not decide (an
	// unstreamed answer against a TPOT limit): neither good nor bad.
	Unjudged          int64
	TokenSources      map[string]int64
	ChunkTokenSources map[string]int64
	// work is, per extra rate row (Metrics.WithRates), the work of the
	// successful records.
	work map[string]int64
	// ratio is, per extra ratio row, its bad and counted records.
	ratio map[string]*[2]int64
	// window: first intended start to last end of measured requests.
	first, last time.Duration
	seen        bool
}

// newGroup is an empty group with a histogram for each row of rows (nil:
// the metric table).
func newGroup(rows []LatencyMetric) *Group {
	if rows == nil {
		rows = latencyMetricsTable
	}
	g := &Group{Hist: map[string]*hdrhistogram.Histogram{}, ErrorsByKind: map[string]int64{},
		FirstErrors: map[string]schema.FirstError{}, TokenSources: map[string]int64{}, ChunkTokenSources: map[string]int64{}}
	for _, m := range rows {
		g.Hist[m.Name] = NewHistogram()
	}
	return g
}

// Window is the measured window: the first measured request's intended start
// to the last one's end.
func (g *Group) Window() (start, end time.Duration) { return g.first, g.last }

// GoodputJudge says whether an OK record met every goodput constraint, and
// whether it could be judged (judged false: neither good nor bad).
type GoodputJudge func(*loadgen.Record) (good, judged bool)

// Metrics aggregates records into HDR histograms, overall and per class. It
// is not safe for concurrent use: one goroutine owns it (hdrhistogram-go has
// no locks), fed from the runner's output channel.
type Metrics struct {
	All     *Group
	Classes map[string]*Group
	// Stages groups by load stage (Record.Stage), for runs of several.
	Stages map[string]*Group
	Warmup int64 // records left out as warm-up
	// TurnTTFT holds TTFT per turn index of multi-turn sessions.
	TurnTTFT map[int]*hdrhistogram.Histogram
	// Sessions rolls agent sessions up (sessions.go); nil without any.
	Sessions *sessionStats
	interval map[string]*hdrhistogram.Histogram
	taken    map[string]*hdrhistogram.Histogram // the last interval's, reused by the next
	// Goodput, if set, says whether an OK record met every per-request
	// goodput constraint of the SLO (measure knows nothing of SLOs), and
	// whether it could be judged at all.
	Goodput GoodputJudge
	// LagCorrected holds, for each latency measured from the intended
	// start (LagMeasured), the whole run's values less each request's
	// schedule lag: what the figure would be had every request been sent
	// on time. The self-check compares the two (selfcheck.go).
	LagCorrected map[string]*hdrhistogram.Histogram
	// table is the metric table the histograms are of.
	table []LatencyMetric
	// rates are the rate rows whose work Metrics counts itself (made
	// outside measure: NewRateMetric), into each group's work.
	rates []RateMetric
}

// WithRates has m count the work of the floors of rows made outside
// measure (NewRateMetric), so summary.json's throughput blocks hold them;
// the table's own rates are counted in any case. It returns m.
func (m *Metrics) WithRates(rows []RateMetric) *Metrics {
	m.rates = extraRates(rows)
	return m
}

// lagMeasuredTable are the latency metrics that run from the intended start,
// and so include the generator's schedule lag.
var lagMeasuredTable = []string{MetricTTFT, MetricTTFAT, MetricE2E}

func (m *Metrics) lagCorrected(metric string) *hdrhistogram.Histogram {
	h, ok := m.LagCorrected[metric]
	if !ok {
		h = NewHistogram()
		m.LagCorrected[metric] = h
	}
	return h
}

// addLagCorrected records r's lag-measured values less its schedule lag.
func (m *Metrics) addLagCorrected(r *loadgen.Record) {
	lag := loadgen.ScheduleLagOf(r)
	for _, n := range lagMeasuredTable {
		if v, ok := FindLatencyMetric(n).Of(r); ok {
			m.lagCorrected(n).RecordValue(microsOf(v - max(lag, 0)))
		}
	}
}

// NewMetrics returns empty metrics of the metric table.
func NewMetrics() *Metrics { return NewMetricsOf(latencyMetricsTable) }

// NewMetricsOf returns empty metrics of rows, a metric table (a test's
// LatencyMetrics() plus a made-up row); summary.json's latency_ms and
// definitions hold its rows.
func NewMetricsOf(rows []LatencyMetric) *Metrics {
	return &Metrics{table: rows, All: newGroup(rows), Classes: map[string]*Group{}, Stages: map[string]*Group{}, TurnTTFT: map[int]*hdrhistogram.Histogram{},
		interval: map[string]*hdrhistogram.Histogram{}, LagCorrected: map[string]*hdrhistogram.Histogram{}}
}

// microsOf is d in whole µs, held within the histogram bounds.
func microsOf(d time.Duration) int64 {
	v := int64(d / time.Microsecond)
	if v < histMinMicros {
		return histMinMicros
	}
	if v > histMaxMicros {
		return histMaxMicros
	}
	return v
}

// Add counts one record. Warm-up records are counted apart and left out.
// Latencies come from successful requests only; failures are counted by
// kind (and an error-rate objective judges them).
func (m *Metrics) Add(r *loadgen.Record) {
	if r.Call != "" && r.Session != "" {
		if m.Sessions == nil {
			m.Sessions = newSessionStats()
		}
		m.Sessions.add(r)
	}
	if r.Warmup {
		m.Warmup++
		return
	}
	cls := r.Class
	if cls == "" {
		cls = "default"
	}
	g, ok := m.Classes[cls]
	if !ok {
		g = newGroup(m.table)
		m.Classes[cls] = g
	}
	sg, ok := m.Stages[r.Stage]
	if !ok {
		sg = newGroup(m.table)
		m.Stages[r.Stage] = sg
	}
	good, judged := r.OK(), true
	if good && m.Goodput != nil {
		good, judged = m.Goodput(r)
	}
	groups := [3]*Group{m.All, g, sg}
	for _, grp := range groups {
		grp.add(r, good, judged)
	}
	m.addRatios(r, &groups)
	if r.OK() {
		for i := range m.rates {
			if m.rates[i].Work == nil {
				continue
			}
			w := m.rates[i].Work(r)
			for _, grp := range groups {
				if grp.work == nil {
					grp.work = map[string]int64{}
				}
				grp.work[m.rates[i].Name] += w
			}
		}
		m.recordSamples(r, &groups)
		m.addLagCorrected(r)
		if d, ok := ttftMetric.Of(r); ok && r.Session != "" {
			h, ok := m.TurnTTFT[r.Turn]
			if !ok {
				h = NewHistogram()
				m.TurnTTFT[r.Turn] = h
			}
			h.RecordValue(microsOf(d))
		}
	}
}

// addRatios counts r into each group's bad and counted records of the
// extra ratio rows, by each row's Bad.
func (m *Metrics) addRatios(r *loadgen.Record, groups *[3]*Group) {
	for i := range m.rates {
		rm := &m.rates[i]
		if rm.Bad == nil {
			continue
		}
		counted, bad := rm.Bad(r)
		if !counted {
			continue
		}
		for _, grp := range groups {
			if grp.ratio == nil {
				grp.ratio = map[string]*[2]int64{}
			}
			c := grp.ratio[rm.Name]
			if c == nil {
				c = new([2]int64)
				grp.ratio[rm.Name] = c
			}
			if bad {
				c[0]++
			}
			c[1]++
		}
	}
}

func (g *Group) add(r *loadgen.Record, good, judged bool) {
	if r.ErrorKind == loadgen.ErrDropped {
		g.Dropped++
		g.ErrorsByKind[string(loadgen.ErrDropped)]++
		return
	}
	if r.ErrorKind == loadgen.ErrNotDue { // never sent, and not part of the run
		g.ErrorsByKind[string(loadgen.ErrNotDue)]++
		return
	}
	g.Sent++
	g.Retries += int64(r.Retries)
	if !g.seen || r.Intended < g.first {
		g.first = r.Intended
	}
	if !g.seen || r.End > g.last {
		g.last = r.End
	}
	g.seen = true
	if !r.OK() {
		if r.ErrorKind.Counted() { // cut_at_end: the generator's cut, not a failure
			g.Errors++
		}
		g.ErrorsByKind[string(r.ErrorKind)]++
		g.firstError(schema.FirstError{IntendedNs: int64(r.Intended), Seq: r.Seq, Error: r.Error}, string(r.ErrorKind))
		return
	}
	g.OK++
	switch {
	case !judged:
		g.Unjudged++
	case good:
		g.Good++
	}
	g.InputTokens += int64(r.InputTokens)
	g.RequestedInputTokens += int64(r.RequestedInputTokens)
	g.OutputTokens += int64(r.OutputTokens)
	if r.TokenSource != "" {
		g.TokenSources[r.TokenSource]++
	}
	if r.ChunkTokenSource != "" {
		g.ChunkTokenSources[r.ChunkTokenSource]++
	}
}

// recordSamples records every latency sample of an OK record once into
// each group's histogram and the interval's: one pass over the chunks, not
// one per group (pprof: the per-group passes were a third of Metrics.Add
// on 128-token streams).
func (m *Metrics) recordSamples(r *loadgen.Record, groups *[3]*Group) {
	for i := range m.table {
		lm := &m.table[i]
		var hs [4]*hdrhistogram.Histogram
		for j, grp := range groups {
			hs[j] = grp.Hist[lm.Name]
		}
		// Equal samples in a row (chunks that came in one read are the
		// same microsecond apart) are recorded at once: the histograms
		// are the same, and a stream that came whole is one call, not
		// one per token.
		var v, n int64
		for s := lm.Samples(r); s.Next(); {
			sv, sn := microsOf(s.Value()), int64(s.Weight())
			if n > 0 && sv == v {
				n += sn
				continue
			}
			recordAll(&hs, m, lm.Name, v, n)
			v, n = sv, sn
		}
		recordAll(&hs, m, lm.Name, v, n)
	}
}

// recordAll records n samples of v in each of hs, the interval's (hs[3])
// found on first use; nothing when n is 0.
func recordAll(hs *[4]*hdrhistogram.Histogram, m *Metrics, metric string, v, n int64) {
	if n == 0 {
		return
	}
	if hs[3] == nil {
		hs[3] = m.intervalHist(metric)
	}
	for _, h := range hs {
		h.RecordValues(v, n)
	}
}

// intervalHist is the current interval's histogram of metric.
func (m *Metrics) intervalHist(metric string) *hdrhistogram.Histogram {
	h, ok := m.interval[metric]
	if !ok {
		h = NewHistogram()
		h.SetTag(metric)
		m.interval[metric] = h
	}
	return h
}

var ttftMetric = FindLatencyMetric(MetricTTFT)

// TakeInterval returns the histograms recorded since the last call, tagged
// with their metric, and starts new ones: the intervals of an .hlog file.
// They are valid until the next call, which reuses them: a histogram of
// tailgate's bounds (1 µs to 1 h, 3 digits) is large, and making one per
// metric each second would feed the garbage collector.
func (m *Metrics) TakeInterval() []*hdrhistogram.Histogram {
	out := make([]*hdrhistogram.Histogram, 0, len(m.interval))
	if m.taken == nil {
		m.taken = map[string]*hdrhistogram.Histogram{}
	}
	for _, lm := range m.table {
		n := lm.Name
		if h, ok := m.interval[n]; ok && h.TotalCount() > 0 {
			out = append(out, h)
			nh := m.taken[n]
			if nh == nil {
				nh = NewHistogram()
				nh.SetTag(n)
			} else {
				nh.Reset() // the tag too
				nh.SetTag(n)
			}
			m.interval[n], m.taken[n] = nh, h
		}
	}
	return out
}

// ClassNames returns the classes seen, sorted.
func (m *Metrics) ClassNames() []string {
	out := make([]string, 0, len(m.Classes))
	for c := range m.Classes {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// firstError keeps e for kind when it was intended before the one held;
// ties go to the lower sequence number, so merged shards agree with one
// run whatever their order.
func (g *Group) firstError(e schema.FirstError, kind string) {
	if e.Error == "" {
		return
	}
	if o, ok := g.FirstErrors[kind]; ok && (o.IntendedNs < e.IntendedNs || o.IntendedNs == e.IntendedNs && o.Seq <= e.Seq) {
		return
	}
	g.FirstErrors[kind] = e
}
