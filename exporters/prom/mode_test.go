package prom

import (
	"bytes"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"

	"github.com/tailgate-llm/tailgate/slo"
)

// textOf is the text exposition of m's latency histograms (build info and
// the rest left out: only the histograms depend on the mode).
func textOf(t *testing.T, m *Metrics) string {
	t.Helper()
	f := gather(t, m)
	var b bytes.Buffer
	for _, name := range []string{TTFTSeconds, ITLSeconds, TPOTSeconds, E2ESeconds} {
		if _, err := expfmt.MetricFamilyToText(&b, f[name]); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// The mode picks the forms of every latency histogram: classic alone is
// today's classic output (no native fields, the text exposition identical
// to both's), native alone has no classic buckets, and both has both.
func TestHistogramModes(t *testing.T) {
	spec := mustSpec(t)
	fill := func(mode HistogramMode) *Metrics {
		m := New(Options{Specs: []*slo.Spec{spec}, Histograms: mode})
		s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}})
		for i := range 20 {
			s.Add(rec("chat", time.Duration(100+i*37)*time.Millisecond, time.Duration(3+i)*time.Millisecond, 3))
		}
		return m
	}
	both, classic, native := fill(""), fill(HistogramsClassic), fill(HistogramsNative)
	if both.HistogramMode() != HistogramsBoth {
		t.Errorf("default mode %q", both.HistogramMode())
	}
	if a, b := textOf(t, classic), textOf(t, both); a != b {
		t.Errorf("classic text differs from both's:\n%s\n---\n%s", a, b)
	}
	for _, c := range []struct {
		m               *Metrics
		classic, native bool
	}{{both, true, true}, {classic, true, false}, {native, false, true}} {
		f := gather(t, c.m)
		for _, name := range []string{TTFTSeconds, ITLSeconds, TPOTSeconds, E2ESeconds} {
			h := f[name].Metric[0].Histogram
			if got := len(h.Bucket) > 0; got != c.classic {
				t.Errorf("%s %s: classic buckets %v, want %v", c.m.HistogramMode(), name, got, c.classic)
			}
			if got := h.Schema != nil; got != c.native {
				t.Errorf("%s %s: native histogram %v, want %v", c.m.HistogramMode(), name, got, c.native)
			}
			if h.GetSampleCount() == 0 {
				t.Errorf("%s %s: empty", c.m.HistogramMode(), name)
			}
		}
	}
	if b := native.HistogramBuckets("ttft"); b != nil {
		t.Errorf("native mode reports classic buckets %v", b)
	}
	// A mode change rebuilds the histograms in the new form.
	classic.SetHistogramMode(HistogramsNative)
	if _, ok := gather(t, classic)[TTFTSeconds]; ok {
		t.Error("after the mode change the old series are still exposed")
	}
	classic.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}}).Add(rec("chat", time.Second, time.Millisecond, 3))
	if h := gather(t, classic)[TTFTSeconds].Metric[0].Histogram; len(h.Bucket) != 0 || h.Schema == nil || h.GetSampleCount() != 1 {
		t.Errorf("after the mode change: %d classic buckets, schema %v, count %d", len(h.Bucket), h.Schema, h.GetSampleCount())
	}
	if _, err := ParseHistogramMode("exponential"); err == nil {
		t.Error("ParseHistogramMode accepted exponential")
	}
}
