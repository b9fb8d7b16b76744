package measure

import (
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

const ms = time.Millisecond

func TestHistogramsMergeExactly(t *testing.T) {
	t.Parallel()
	a, b, both := NewHistogram(), NewHistogram(), NewHistogram()
	for i := int64(1); i < 200000; i += 7 {
		a.RecordValue(i)
		both.RecordValue(i)
	}
	for i := int64(3); i < 5_000_000; i += 1013 {
		b.RecordValue(i)
		both.RecordValue(i)
	}
	a.Merge(b)
	if !a.Equals(both) {
		t.Error("merged histogram differs from the histogram of the combined samples")
	}
}

// Per-chunk samples recorded at once where equal in a row give the same
// histograms as each recorded alone: equal gaps in and out of runs,
// chunks of several tokens, a gap at the end.
func TestRecordSamplesRunsEqualOneByOne(t *testing.T) {
	t.Parallel()
	at := []time.Duration{0, 10, 10, 10, 25, 25, 40, 40, 41, 41, 41, 80}
	tokens := []int{1, 1, 2, 1, 1, 3, 1, 1, 1, 2, 1, 1}
	r := &loadgen.Record{Class: "a", Stage: "s", Sent: 0, End: 100 * time.Microsecond}
	for i, a := range at {
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: 5*time.Microsecond + a*time.Microsecond + 300*time.Nanosecond, Tokens: tokens[i]})
	}
	r.OutputTokens = 16
	r.Finalize()
	m := NewMetrics()
	m.Add(r)
	for _, name := range []string{MetricICL, MetricITL} {
		want := NewHistogram()
		for s := FindLatencyMetric(name).Samples(r); s.Next(); {
			for range s.Weight() {
				want.RecordValue(microsOf(s.Value()))
			}
		}
		if want.TotalCount() == 0 {
			t.Fatalf("%s: no samples", name)
		}
		for where, h := range map[string]*hdrhistogram.Histogram{"all": m.All.Hist[name], "class": m.Classes["a"].Hist[name],
			"stage": m.Stages["s"].Hist[name], "interval": m.interval[name]} {
			if !h.Equals(want) {
				t.Errorf("%s %s: %v, want %v", name, where, h.Distribution(), want.Distribution())
			}
		}
	}
}

// TakeInterval gives each interval's histograms, tagged, holding that
// interval's records only, while it reuses the last interval's.
func TestTakeIntervalReuses(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	rec := func(ttft time.Duration) *loadgen.Record {
		r := &loadgen.Record{Sent: 0, End: 2 * ttft, Chunks: []loadgen.Chunk{{At: ttft, Tokens: 1}, {At: 2 * ttft, Tokens: 1}}, OutputTokens: 2}
		r.Finalize()
		return r
	}
	var seen []*hdrhistogram.Histogram
	for i, ttft := range []time.Duration{10 * ms, 20 * ms, 30 * ms, 40 * ms} {
		for range i + 1 {
			m.Add(rec(ttft))
		}
		var got *hdrhistogram.Histogram
		for _, h := range m.TakeInterval() {
			if h.Tag() == MetricTTFT {
				got = h
			}
		}
		if got == nil {
			t.Fatalf("interval %d: no ttft histogram", i)
		}
		if got.TotalCount() != int64(i+1) || !got.ValuesAreEquivalent(got.Min(), ttft.Microseconds()) || !got.ValuesAreEquivalent(got.Max(), ttft.Microseconds()) {
			t.Fatalf("interval %d: ttft count %d, min %d, max %d; want %d of %d µs", i, got.TotalCount(), got.Min(), got.Max(), i+1, ttft.Microseconds())
		}
		seen = append(seen, got)
	}
	if seen[0] != seen[2] || seen[1] != seen[3] || seen[0] == seen[1] {
		t.Error("the intervals' histograms are not reused in turn")
	}
}

func TestMetricsSummaryFigures(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	m.Goodput = func(r *loadgen.Record) (bool, bool) { d, _ := r.TTFT(); return d <= 50*ms, true }
	for i := 0; i < 10; i++ {
		start := time.Duration(i) * 100 * ms
		r := &loadgen.Record{Class: "a", Intended: start, Sent: start, End: start + 100*ms, OutputTokens: 10, InputTokens: 5,
			Chunks: []loadgen.Chunk{{At: start + time.Duration(10+10*i)*ms}}}
		if i%2 == 1 {
			r.Class = "b"
		}
		r.Stage = []string{"low", "high"}[i/5]
		r.Finalize()
		m.Add(r)
	}
	m.Add(&loadgen.Record{Class: "a", ErrorKind: loadgen.ErrRateLimited, Intended: 0, End: ms})
	m.Add(&loadgen.Record{Class: "a", ErrorKind: loadgen.ErrDropped})
	s := m.Summary(loadgen.Info{Started: time.Unix(0, 0), Elapsed: time.Second}, schema.SummaryMeta{})
	if s.Requests.Sent != 11 || s.Requests.OK != 10 || s.Requests.Errors != 1 || s.Requests.Dropped != 1 {
		t.Errorf("counts %+v", s.Requests)
	}
	if s.Requests.ErrorsByKind["rate_limited"] != 1 || s.Requests.ErrorsByKind["dropped"] != 1 {
		t.Errorf("by kind %v", s.Requests.ErrorsByKind)
	}
	// Window 0 → 1000 ms: 10 ok/s, 100 output tokens/s, 5 good (TTFT 10..50ms).
	if s.Throughput.RequestsPerS != 10 || s.Throughput.OutputTokensPerS != 100 || s.Throughput.GoodputPerS == nil || *s.Throughput.GoodputPerS != 5 {
		t.Errorf("throughput %+v", s.Throughput)
	}
	// HDR reports a bucket's highest equivalent value: 3 digits, ≤ 0.1% high.
	near := func(got, want float64) bool { return got >= want && got <= want*1.001 }
	if h := s.LatencyMs[MetricTTFT]; h.Count != 10 || !near(h.Min, 10) || !near(h.Max, 100) || !near(h.P50, 50) {
		t.Errorf("ttft %+v", h)
	}
	if s.Classes["a"].Requests.OK != 5 || s.Classes["b"].Requests.OK != 5 {
		t.Errorf("classes %+v", s.Classes)
	}
	// Stages: 0–499 ms low, 500–999 ms high; each over its own window.
	if lo, hi := s.Stages["low"], s.Stages["high"]; lo.Requests.OK != 5 || hi.Requests.OK != 5 ||
		lo.Throughput.RequestsPerS != 10 || !near(hi.LatencyMs[MetricTTFT].Min, 60) {
		t.Errorf("stages %+v", s.Stages)
	}
}

// The generator flags itself as the bottleneck: schedule lag that moved a
// figure, or its CPU saturated, or requests dropped.
func TestSummarySelfCheckWarnings(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	for i := 0; i < 100; i++ {
		lag := 100 * time.Microsecond
		if i >= 80 {
			lag = 3 * ms // the worst 20%: p90 is late
		}
		r := &loadgen.Record{Intended: 0, Sent: lag, End: lag + 10*ms, Chunks: []loadgen.Chunk{{At: lag + 5*ms}}}
		r.Finalize()
		m.Add(r)
	}
	s := m.Summary(loadgen.Info{CPUUtilization: 0.5}, schema.SummaryMeta{})
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "TTFT p90") {
		t.Errorf("warnings %q", s.Warnings)
	}
	m.Add(&loadgen.Record{ErrorKind: loadgen.ErrDropped})
	s = m.Summary(loadgen.Info{CPUUtilization: 0.95}, schema.SummaryMeta{})
	if len(s.Warnings) != 3 {
		t.Errorf("want lag, CPU and dropped warnings: %q", s.Warnings)
	}
	quiet := NewMetrics()
	r := &loadgen.Record{Sent: 50 * time.Microsecond, End: ms, Chunks: []loadgen.Chunk{{At: ms / 2}}}
	r.Finalize()
	quiet.Add(r)
	if w := quiet.Summary(loadgen.Info{CPUUtilization: 0.2}, schema.SummaryMeta{}).Warnings; len(w) != 0 {
		t.Errorf("warnings on a healthy run: %q", w)
	}
}

// Goodput no completion could be judged (every answer unstreamed against a
// TPOT limit) is absent, not 0 per second; once one is judged, it is a
// rate of the judged good ones. The unjudged count survives the state
// round trip that merge uses.
func TestGoodputUnjudgedIsAbsent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		judged   func(i int) bool
		wantNil  bool
		wantRate float64
	}{
		{"none judged", func(int) bool { return false }, true, 0},
		{"half judged, all good", func(i int) bool { return i%2 == 0 }, false, 5},
	} {
		m := NewMetrics()
		m.Goodput = func(r *loadgen.Record) (bool, bool) { return true, tc.judged(int(r.Seq)) }
		for i := range 10 {
			start := time.Duration(i) * 100 * ms
			m.Add(&loadgen.Record{Seq: int64(i), Class: "a", Intended: start, Sent: start, End: start + 100*ms, OutputTokens: 3, Unstreamed: true})
		}
		st, err := m.State()
		if err != nil {
			t.Fatal(err)
		}
		back, err := MetricsFromState(st)
		if err != nil {
			t.Fatal(err)
		}
		for _, mm := range []*Metrics{m, back} {
			got := mm.Summary(loadgen.Info{Elapsed: time.Second}, schema.SummaryMeta{}).Throughput.GoodputPerS
			switch {
			case tc.wantNil && got != nil:
				t.Errorf("%s: goodput %v, want absent", tc.name, *got)
			case !tc.wantNil && (got == nil || *got != tc.wantRate):
				t.Errorf("%s: goodput %v, want %v/s", tc.name, got, tc.wantRate)
			}
		}
	}
}
