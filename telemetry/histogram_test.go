package telemetry

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

var inf = math.Inf(1)

func hist(sum float64, bs ...Bucket) Histogram {
	return Histogram{Source: "test", Buckets: bs, Sum: sum, Count: bs[len(bs)-1].Count}
}

func TestQuantileHandComputed(t *testing.T) {
	t.Parallel()
	// 50 observations: 10 ≤ 0.1, 20 in (0.1, 0.5], 10 in (0.5, 1], 10 above.
	h := hist(30, Bucket{LeSeconds: 0.1, Count: 10}, Bucket{LeSeconds: 0.5, Count: 30}, Bucket{LeSeconds: 1, Count: 40}, Bucket{LeSeconds: inf, Count: 50})
	for _, c := range []struct {
		q, want, lo, hi float64
	}{
		{0, 0, 0, 0.1},                   // rank 0: the first bucket's lower bound
		{0.1, 0.05, 0, 0.1},              // rank 5 of 10 in [0, 0.1]
		{0.2, 0.1, 0, 0.1},               // rank 10: exactly the first bucket's count
		{0.5, 0.1 + 0.4*15/20, 0.1, 0.5}, // rank 25: 15 of 20 into (0.1, 0.5]
		{0.7, 0.5 + 0.5*5/10, 0.5, 1},    // rank 35: 5 of 10 into (0.5, 1]
		{0.8, 1, 0.5, 1},                 // rank 40: the 1 s bucket's count
		{0.9, 1, 1, inf},                 // rank 45 in +Inf: highest finite bound
		{1, 1, 1, inf},
	} {
		e, ok := h.Quantile(c.q)
		if !ok || !near(e.Value, c.want) || e.Lower != c.lo || e.Upper != c.hi {
			t.Errorf("q=%v: %+v %v, want %v in (%v, %v]", c.q, e, ok, c.want, c.lo, c.hi)
		}
		if e.Value < e.Lower || e.Value > e.Upper {
			t.Errorf("q=%v: estimate outside its bucket: %+v", c.q, e)
		}
	}
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		if _, ok := h.Quantile(q); ok {
			t.Errorf("q=%v accepted", q)
		}
	}
	if m, ok := h.Mean(); !ok || m != 0.6 {
		t.Errorf("mean %v", m)
	}
	empty := hist(0, Bucket{LeSeconds: 0.1, Count: 0}, Bucket{LeSeconds: inf, Count: 0})
	if _, ok := empty.Quantile(0.5); ok {
		t.Error("quantile of an empty histogram")
	}
	if _, ok := empty.Mean(); ok {
		t.Error("mean of an empty histogram")
	}
	noInf := Histogram{Buckets: []Bucket{{LeSeconds: 0.1, Count: 1}, {LeSeconds: 1, Count: 2}}, Count: 2}
	if _, ok := noInf.Quantile(0.5); ok {
		t.Error("quantile without a +Inf bucket")
	}
}

func TestQuantilePrometheusCases(t *testing.T) {
	t.Parallel()
	// The testhistogram_bucket series of Prometheus's own
	// histogram_quantile tests, with the values Prometheus expects.
	pos := hist(0, Bucket{LeSeconds: 0.1, Count: 50}, Bucket{LeSeconds: 0.2, Count: 70}, Bucket{LeSeconds: 1, Count: 110}, Bucket{LeSeconds: inf, Count: 120})
	neg := hist(0, Bucket{LeSeconds: -0.2, Count: 10}, Bucket{LeSeconds: -0.1, Count: 20}, Bucket{LeSeconds: 0.3, Count: 20}, Bucket{LeSeconds: inf, Count: 30})
	for _, c := range []struct{ q, pos, neg float64 }{
		{1, 1, 0.3}, {0.2, 0.048, -0.2}, {0.5, 0.15, -0.15}, {0.8, 0.72, 0.3},
	} {
		wantQuantile(t, "positive", &pos, c.q, c.pos)
		wantQuantile(t, "negative", &neg, c.q, c.neg)
	}
}

func TestSubAndDelta(t *testing.T) {
	t.Parallel()
	a := hist(1, Bucket{LeSeconds: 0.1, Count: 2}, Bucket{LeSeconds: 1, Count: 5}, Bucket{LeSeconds: inf, Count: 6})
	b := hist(4, Bucket{LeSeconds: 0.1, Count: 3}, Bucket{LeSeconds: 1, Count: 9}, Bucket{LeSeconds: inf, Count: 12})
	d, reset := b.Sub(a)
	want := Histogram{Source: "test", Buckets: []Bucket{{LeSeconds: 0.1, Count: 1}, {LeSeconds: 1, Count: 4}, {LeSeconds: inf, Count: 6}}, Sum: 3, Count: 6}
	if reset || !equalHist(d, want) {
		t.Fatalf("b−a = %+v (reset %v), want %+v", d, reset, want)
	}
	qd := Delta(Snapshot{QueueDelay: &a}, Snapshot{QueueDelay: &b})
	if !equalHist(qd, want) {
		t.Errorf("Delta = %+v", qd)
	}
	if qd := Delta(Snapshot{}, Snapshot{QueueDelay: &b}); !equalHist(qd, b) {
		t.Errorf("Delta from nothing = %+v", qd)
	}
	if qd := Delta(Snapshot{QueueDelay: &a}, Snapshot{}); qd.Count != 0 || qd.Buckets != nil {
		t.Errorf("Delta to nothing = %+v", qd)
	}

	// A restart: counts fall. The later reading is all that is known.
	c := hist(0.5, Bucket{LeSeconds: 0.1, Count: 1}, Bucket{LeSeconds: 1, Count: 2}, Bucket{LeSeconds: inf, Count: 2})
	if d, reset := c.Sub(b); !reset || !equalHist(d, c) {
		t.Errorf("reset: %+v %v", d, reset)
	}
	// One bucket falling while the total rises is a reset too.
	e := hist(5, Bucket{LeSeconds: 0.1, Count: 1}, Bucket{LeSeconds: 1, Count: 12}, Bucket{LeSeconds: inf, Count: 13})
	if _, reset := e.Sub(b); !reset {
		t.Error("falling bucket not taken for a reset")
	}

	// Layout change: only shared bounds survive.
	f := hist(6, Bucket{LeSeconds: 0.5, Count: 10}, Bucket{LeSeconds: 1, Count: 11}, Bucket{LeSeconds: inf, Count: 14})
	d, reset = f.Sub(b)
	if reset || len(d.Buckets) != 2 || d.Buckets[0] != (Bucket{LeSeconds: 1, Count: 2}) || d.Buckets[1] != (Bucket{LeSeconds: inf, Count: 2}) {
		t.Errorf("layout change: %+v %v", d, reset)
	}
}

func equalHist(a, b Histogram) bool {
	if a.Count != b.Count || !near(a.Sum, b.Sum) || len(a.Buckets) != len(b.Buckets) {
		return false
	}
	for i := range a.Buckets {
		if a.Buckets[i] != b.Buckets[i] {
			return false
		}
	}
	return true
}

func TestAccumulatorCorrectsResets(t *testing.T) {
	t.Parallel()
	var acc histAcc
	readings := []Histogram{
		hist(10, Bucket{LeSeconds: 1, Count: 10}, Bucket{LeSeconds: inf, Count: 10}), // baseline: server history, not counted
		hist(12, Bucket{LeSeconds: 1, Count: 13}, Bucket{LeSeconds: inf, Count: 14}), // +4
		hist(1, Bucket{LeSeconds: 1, Count: 1}, Bucket{LeSeconds: inf, Count: 2}),    // restart: +2
		hist(3, Bucket{LeSeconds: 1, Count: 4}, Bucket{LeSeconds: inf, Count: 5}),    // +3
	}
	for i := range readings {
		acc.observe(map[string]Histogram{"q{}": readings[i]})
	}
	want := Histogram{Source: "test", Buckets: []Bucket{{LeSeconds: 1, Count: 7}, {LeSeconds: inf, Count: 9}}, Sum: 2 + 1 + 2, Count: 9}
	if !equalHist(*acc.total, want) || acc.resets != 1 {
		t.Errorf("total %+v resets %d, want %+v", *acc.total, acc.resets, want)
	}
	var c counterAcc
	for _, v := range []float64{100, 150, 20, 50} { // +50, reset +20, +30
		c.observe(map[string]float64{"c{}": v})
	}
	if c.total != 100 || c.resets != 1 {
		t.Errorf("counter total %v resets %d", c.total, c.resets)
	}
}

func TestBucketJSON(t *testing.T) {
	t.Parallel()
	in := []Bucket{{LeSeconds: 0.25, Count: 3}, {LeSeconds: inf, Count: 7}}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `[{"le":0.25,"count":3},{"le":"+Inf","count":7}]` {
		t.Errorf("got %s", b)
	}
	var out []Bucket
	if err := json.Unmarshal(b, &out); err != nil || len(out) != 2 || out[0] != in[0] || out[1] != in[1] {
		t.Errorf("round trip %+v %v", out, err)
	}
	if err := json.Unmarshal([]byte(`{"le":"x","count":1}`), &out[0]); err == nil {
		t.Error("bad le accepted")
	}
}

func TestSummariseHistogram(t *testing.T) {
	t.Parallel()
	h := hist(30, Bucket{LeSeconds: 0.1, Count: 10}, Bucket{LeSeconds: 0.5, Count: 30}, Bucket{LeSeconds: 1, Count: 40}, Bucket{LeSeconds: inf, Count: 50})
	s := SummariseHistogram(&h)
	if s.Count != 50 || *s.MeanMs != 600 || !near(*s.P50Ms, 400) || *s.P99Ms != 1000 || s.Method != MethodBuckets {
		t.Fatalf("%+v", s)
	}
	if *s.P50Bkt[0] != 100 || *s.P50Bkt[1] != 500 || *s.P99Bkt[0] != 1000 || s.P99Bkt[1] != nil {
		t.Errorf("buckets %v %v", s.P50Bkt, s.P99Bkt)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"p99_bucket_ms":[1000,null]`, `"method":"estimated from server buckets`, `"buckets_s":[`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s: %s", key, b)
		}
	}
	m := Histogram{Source: "nv_inference_queue_duration_us", Buckets: []Bucket{{LeSeconds: inf, Count: 4}}, Sum: 2, Count: 4}
	if s := SummariseHistogram(&m); s.Method != MethodMeanOnly || *s.MeanMs != 500 || s.P50Ms != nil || s.Buckets != nil {
		t.Errorf("mean only: %+v", s)
	}
	if SummariseHistogram(nil) != nil {
		t.Error("nil")
	}
}

// With no queueing at all every request is in vLLM's first queue bucket
// (0.3 s): the quantiles are interpolated from 0 (p50 150 ms, p99 297 ms)
// and the summary says they are not measured; the mean is exact.
func TestSummaryBelowTheFirstBucket(t *testing.T) {
	t.Parallel()
	h := hist(0.08, Bucket{LeSeconds: 0.3, Count: 100}, Bucket{LeSeconds: 0.5, Count: 100}, Bucket{LeSeconds: inf, Count: 100})
	s := SummariseHistogram(&h)
	if !near(*s.MeanMs, 0.8) || !near(*s.P50Ms, 150) || *s.P99Bkt[0] != 0 || *s.P99Bkt[1] != 300 {
		t.Fatalf("%+v", s)
	}
	if !strings.Contains(s.Note, "p50, p90, p99 in the first bucket (≤ 300 ms)") || !strings.Contains(s.Note, "the mean is exact") {
		t.Errorf("note %q", s.Note)
	}
	h = hist(30, Bucket{LeSeconds: 0.1, Count: 10}, Bucket{LeSeconds: 0.5, Count: 30}, Bucket{LeSeconds: 1, Count: 40}, Bucket{LeSeconds: inf, Count: 50})
	if s := SummariseHistogram(&h); s.Note != "" {
		t.Errorf("note without a quantile in the first bucket: %q", s.Note)
	}
}
