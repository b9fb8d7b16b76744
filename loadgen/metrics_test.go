package loadgen

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/results/schema"
)

const ms = time.Millisecond

func TestRecordDerivedMetrics(t *testing.T) {
	t.Parallel()
	r := &Record{Intended: 10 * ms, Sent: 12 * ms, End: 200 * ms, OutputTokens: 7,
		Chunks: []Chunk{{At: 60 * ms, Tokens: 1}, {At: 80 * ms, Tokens: 2}, {At: 140 * ms, Tokens: 4}}}
	r.Finalize()
	if d, _ := r.TTFT(); d != 50*ms {
		t.Errorf("TTFT %v, want 50ms (from intended start)", d)
	}
	if r.ScheduleLag() != 2*ms || r.E2E() != 190*ms {
		t.Errorf("lag %v e2e %v", r.ScheduleLag(), r.E2E())
	}
	if d, _ := r.TPOT(); d != (190*ms-50*ms)/6 {
		t.Errorf("TPOT %v", d)
	}
	var icl []time.Duration
	r.EachICL(func(g time.Duration) { icl = append(icl, g) })
	if !reflect.DeepEqual(icl, []time.Duration{20 * ms, 60 * ms}) {
		t.Errorf("ICL %v", icl)
	}
	// ITL: 20ms over 2 tokens → two samples of 10ms; 60ms over 4 → four of 15ms.
	var itl []time.Duration
	r.EachITL(func(per time.Duration, n int) {
		for i := 0; i < n; i++ {
			itl = append(itl, per)
		}
	})
	if !reflect.DeepEqual(itl, []time.Duration{10 * ms, 10 * ms, 15 * ms, 15 * ms, 15 * ms, 15 * ms}) {
		t.Errorf("ITL %v", itl)
	}
	if r.ChunkTokenSource != chunkTokensServer || r.TokenSource != TokensFromUsage {
		t.Errorf("sources %q %q", r.TokenSource, r.ChunkTokenSource)
	}
}

func TestFinalizeSpreadsUsageOverChunks(t *testing.T) {
	t.Parallel()
	r := &Record{OutputTokens: 10, Chunks: make([]Chunk, 4)}
	r.Finalize()
	got := []int{}
	for _, c := range r.Chunks {
		got = append(got, c.Tokens)
	}
	if !reflect.DeepEqual(got, []int{3, 3, 2, 2}) || r.ChunkTokenSource != chunkTokensSpread {
		t.Errorf("spread %v (%s)", got, r.ChunkTokenSource)
	}
	r2 := &Record{Chunks: make([]Chunk, 4)}
	r2.Finalize()
	if r2.OutputTokens != 4 || r2.TokenSource != TokensFromChunks || r2.ChunkTokenSource != chunkTokensOne {
		t.Errorf("no usage: %d tokens from %s/%s", r2.OutputTokens, r2.TokenSource, r2.ChunkTokenSource)
	}
}

func TestRecordJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := &Record{Seq: 3, ID: "x", Class: "chat", Stage: "peak", Intended: 1500 * time.Microsecond, Sent: 1600 * time.Microsecond,
		FirstAnswer: 9 * ms, End: 20 * ms, Chunks: []Chunk{{At: 5 * ms, Tokens: 1}, {At: 9 * ms, Tokens: 3}},
		InputTokens: 12, OutputTokens: 4, TokenSource: TokensFromUsage, ChunkTokenSource: chunkTokensServer,
		Status: 200, ErrorKind: ErrStreamTruncated, Error: "eof"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, &back) {
		t.Errorf("round trip:\n%+v\n%+v\n%s", r, &back, b)
	}
}

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
	r := &Record{Class: "a", Stage: "s", Sent: 0, End: 100 * time.Microsecond}
	for i, a := range at {
		r.Chunks = append(r.Chunks, Chunk{At: 5*time.Microsecond + a*time.Microsecond + 300*time.Nanosecond, Tokens: tokens[i]})
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
	rec := func(ttft time.Duration) *Record {
		r := &Record{Sent: 0, End: 2 * ttft, Chunks: []Chunk{{At: ttft, Tokens: 1}, {At: 2 * ttft, Tokens: 1}}, OutputTokens: 2}
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
	m.Goodput = func(r *Record) (bool, bool) { d, _ := r.TTFT(); return d <= 50*ms, true }
	for i := 0; i < 10; i++ {
		start := time.Duration(i) * 100 * ms
		r := &Record{Class: "a", Intended: start, Sent: start, End: start + 100*ms, OutputTokens: 10, InputTokens: 5,
			Chunks: []Chunk{{At: start + time.Duration(10+10*i)*ms}}}
		if i%2 == 1 {
			r.Class = "b"
		}
		r.Stage = []string{"low", "high"}[i/5]
		r.Finalize()
		m.Add(r)
	}
	m.Add(&Record{Class: "a", ErrorKind: ErrRateLimited, Intended: 0, End: ms})
	m.Add(&Record{Class: "a", ErrorKind: ErrDropped})
	s := m.Summary(Info{Started: time.Unix(0, 0), Elapsed: time.Second}, schema.SummaryMeta{})
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
		r := &Record{Intended: 0, Sent: lag, End: lag + 10*ms, Chunks: []Chunk{{At: lag + 5*ms}}}
		r.Finalize()
		m.Add(r)
	}
	s := m.Summary(Info{CPUUtilization: 0.5}, schema.SummaryMeta{})
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "TTFT p90") {
		t.Errorf("warnings %q", s.Warnings)
	}
	m.Add(&Record{ErrorKind: ErrDropped})
	s = m.Summary(Info{CPUUtilization: 0.95}, schema.SummaryMeta{})
	if len(s.Warnings) != 3 {
		t.Errorf("want lag, CPU and dropped warnings: %q", s.Warnings)
	}
	quiet := NewMetrics()
	r := &Record{Sent: 50 * time.Microsecond, End: ms, Chunks: []Chunk{{At: ms / 2}}}
	r.Finalize()
	quiet.Add(r)
	if w := quiet.Summary(Info{CPUUtilization: 0.2}, schema.SummaryMeta{}).Warnings; len(w) != 0 {
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
		m.Goodput = func(r *Record) (bool, bool) { return true, tc.judged(int(r.Seq)) }
		for i := range 10 {
			start := time.Duration(i) * 100 * ms
			m.Add(&Record{Seq: int64(i), Class: "a", Intended: start, Sent: start, End: start + 100*ms, OutputTokens: 3, Unstreamed: true})
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
			got := mm.Summary(Info{Elapsed: time.Second}, schema.SummaryMeta{}).Throughput.GoodputPerS
			switch {
			case tc.wantNil && got != nil:
				t.Errorf("%s: goodput %v, want absent", tc.name, *got)
			case !tc.wantNil && (got == nil || *got != tc.wantRate):
				t.Errorf("%s: goodput %v, want %v/s", tc.name, got, tc.wantRate)
			}
		}
	}
}
