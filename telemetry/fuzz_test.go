package telemetry

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParseExposition feeds arbitrary text to the parser and normaliser:
// no panic, a sample that marshals to JSON, well-formed histograms and
// quantiles inside their bucket, ratios in [0, 1], and merging and
// subtracting that do not panic either.
func FuzzParseExposition(f *testing.F) {
	// Seed with each fixture cut into small pieces at its # TYPE lines:
	// the minimizer is quadratic in the input length, so whole files (up to
	// 20 KB) would stall fuzzing for a minute per new input.
	files, _ := filepath.Glob("testdata/*.prom")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		var piece []byte
		for _, line := range bytes.SplitAfter(b, []byte("\n")) {
			if bytes.HasPrefix(line, []byte("# TYPE")) && len(piece) > 200 {
				f.Add(piece)
				piece = nil
			}
			piece = append(piece, line...)
		}
		f.Add(piece)
	}
	f.Add([]byte("vllm:num_requests_waiting NaN\nvllm:kv_cache_usage_perc +Inf\n"))
	f.Add([]byte("# TYPE x histogram\nvllm:request_queue_time_seconds_bucket{le=\"NaN\"} -1\n"))
	f.Add([]byte("tgi_request_queue_duration_bucket{le=\"1\"} 5\ntgi_request_queue_duration_bucket{le=\"0.5\"} 9\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, _ := ParseExposition(bytes.NewReader(data))
		if s == nil {
			t.Fatal("nil sample")
		}
		if _, err := json.Marshal(s); err != nil {
			t.Fatalf("marshal: %v", err)
		}
		for _, h := range []*Histogram{s.QueueDelay, s.TTFT, s.E2E} {
			checkHistogram(t, h)
		}
		if s.KVUsage != nil && !(*s.KVUsage >= 0 && *s.KVUsage <= 1) {
			t.Fatalf("kv usage %v", *s.KVUsage)
		}
		for _, g := range s.GPUs {
			for _, v := range []*float64{g.Utilization, g.EngineActive} {
				if v != nil && !(*v >= 0 && *v <= 1) {
					t.Fatalf("gpu ratio %v", *v)
				}
			}
		}
		m := mergeServer([]*ServerSample{s, s}, []string{"a", "b"})
		if _, err := json.Marshal(m); err != nil {
			t.Fatalf("marshal merged: %v", err)
		}
		checkHistogram(t, m.QueueDelay)
		if s.QueueDelay != nil {
			if d, reset := s.QueueDelay.Sub(*s.QueueDelay); reset || d.Count != 0 {
				t.Fatalf("h − h = %+v (reset %v)", d, reset)
			}
			if _, err := json.Marshal(SummariseHistogram(s.QueueDelay)); err != nil {
				t.Fatalf("marshal summary: %v", err)
			}
		}
	})
}

func checkHistogram(t *testing.T, h *Histogram) {
	t.Helper()
	if h == nil {
		return
	}
	n := len(h.Buckets)
	if n == 0 || !math.IsInf(h.Buckets[n-1].LeSeconds, 1) || h.Buckets[n-1].Count != h.Count {
		t.Fatalf("bad +Inf bucket: %+v", h)
	}
	if math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) {
		t.Fatalf("sum %v", h.Sum)
	}
	for i := 1; i < n; i++ {
		if !(h.Buckets[i].LeSeconds > h.Buckets[i-1].LeSeconds) || h.Buckets[i].Count < h.Buckets[i-1].Count {
			t.Fatalf("buckets not sorted and cumulative: %+v", h.Buckets)
		}
	}
	for _, q := range []float64{0, 0.01, 0.5, 0.9, 0.99, 1} {
		e, ok := h.Quantile(q)
		if ok && (math.IsNaN(e.Value) || e.Value < e.Lower || e.Value > e.Upper) {
			t.Fatalf("q=%v: %+v outside its bucket (%+v)", q, e, h.Buckets)
		}
	}
}
