package prom

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/slo"
)

var _ pipeline.Sink = (*Sink)(nil)

const specYAML = `
kind: SLO
name: chat
owner: a@example.com
objectives:
  - {name: ttft-p99, metric: ttft, threshold: 500ms, target: 99%}
  - {name: itl-p95, metric: itl, threshold: 15ms, target: 95%}
  - {name: errors, metric: error_rate, threshold: 1%}
  - {name: queue, metric: queue_delay, threshold: 300ms, target: 99%}
  - {name: tokens, metric: output_tokens_per_s, threshold: 10}
`

func mustSpec(t *testing.T) *slo.Spec {
	t.Helper()
	s, err := slo.ParseSpec("chat.yaml", []byte(strings.TrimLeft(specYAML, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var epoch = time.Unix(1_800_000_000, 0)

// rec is a successful streamed record: first token at ttft, then chunks
// of one token every gap.
func rec(class string, ttft, gap time.Duration, tokens int) *loadgen.Record {
	r := loadgen.NewRecord(epoch)
	r.Class, r.OutputTokens, r.TokenSource = class, tokens, loadgen.TokensFromUsage
	for i := 0; i < tokens; i++ {
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: ttft + time.Duration(i)*gap, Tokens: 1})
	}
	r.End = ttft + time.Duration(tokens)*gap
	r.Finalize()
	return r
}

func failed(class string, kind loadgen.ErrorKind) *loadgen.Record {
	r := loadgen.NewRecord(epoch)
	r.Class, r.ErrorKind, r.End = class, kind, time.Second
	r.Finalize()
	return r
}

// gather returns the registry's families by name.
func gather(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value is the sample of family name whose labels include want.
func value(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	mf := fams[name]
	if mf == nil {
		t.Fatalf("%s not exported", name)
	}
	for _, m := range mf.Metric {
		ok := true
		for k, v := range want {
			found := false
			for _, l := range m.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			ok = ok && found
		}
		if !ok {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	t.Fatalf("%s%v: no such series", name, want)
	return 0
}

func TestSinkCounts(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}, Version: "1.2.3"})
	s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}})
	recs := []*loadgen.Record{
		rec("chat", 100*time.Millisecond, 10*time.Millisecond, 11), // ttft good; 10 itl tokens good
		rec("chat", 500*time.Millisecond, 20*time.Millisecond, 6),  // ttft exactly at 500ms: good; 5 itl bad
		rec("rag", 600*time.Millisecond, 15*time.Millisecond, 3),   // ttft bad; itl at 15ms: good
		failed("chat", loadgen.ErrServer),
		failed("rag", loadgen.ErrTimeout),
	}
	warm := rec("chat", 9*time.Second, time.Second, 3)
	warm.Warmup = true
	recs = append(recs, warm)
	for _, r := range recs {
		if err := s.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	f := gather(t, m)
	checks := []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{RequestsTotal, map[string]string{"target": "sim", "class": "chat", "outcome": "ok"}, 2},
		{RequestsTotal, map[string]string{"class": "chat", "outcome": "error"}, 1},
		{RequestsTotal, map[string]string{"class": "rag", "outcome": "ok"}, 1},
		{RequestErrorsTotal, map[string]string{"class": "rag", "kind": "timeout"}, 1},
		{RequestErrorsTotal, map[string]string{"class": "chat", "kind": "server_error"}, 1},
		{OutputTokensTotal, map[string]string{"class": "chat"}, 17},
		{TTFTSeconds, map[string]string{"class": "chat"}, 2},
		{ITLSeconds, map[string]string{"class": "chat"}, 15},
		{TPOTSeconds, map[string]string{"class": "rag"}, 1},
		{E2ESeconds, map[string]string{"class": "rag"}, 1},
		// Acceptance rules: latency objectives count successful requests,
		// and a request that timed out after the threshold (1 s > 500 ms)
		// as a known miss; the server error, with no time past it, not.
		{SLOEventsTotal, map[string]string{"objective": "ttft-p99", "outcome": "good"}, 2},
		{SLOEventsTotal, map[string]string{"objective": "ttft-p99", "outcome": "bad"}, 2},
		{SLOEventsTotal, map[string]string{"objective": "itl-p95", "outcome": "good"}, 12},
		{SLOEventsTotal, map[string]string{"objective": "itl-p95", "outcome": "bad"}, 5},
		{SLOEventsTotal, map[string]string{"objective": "errors", "outcome": "good"}, 3},
		{SLOEventsTotal, map[string]string{"objective": "errors", "outcome": "bad"}, 2},
		{SLOObjectiveRatio, map[string]string{"slo": "chat", "objective": "ttft-p99"}, 0.99},
		{SLOObjectiveRatio, map[string]string{"objective": "errors"}, 0.99},
		// 2 bad of 4 against a 1% budget: 1 - 50 = -49.
		{SLOErrorBudgetRemainingRatio, map[string]string{"objective": "ttft-p99", "target": "sim"}, 1 - (2.0/4)/0.01},
		{LastSuccessTimestampSeconds, map[string]string{"target": "sim"}, float64(epoch.Add(645*time.Millisecond).UnixNano()) / 1e9},
		{BuildInfo, map[string]string{"version": "1.2.3"}, 1},
	}
	for _, c := range checks {
		if got := value(t, f, c.name, c.labels); math.Abs(got-c.want) > 1e-9*max(1, math.Abs(c.want)) {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, mf := range f[SLOEventsTotal].Metric {
		for _, l := range mf.Label {
			if l.GetName() == "objective" && (l.GetValue() == "queue" || l.GetValue() == "tokens") {
				t.Errorf("%s has series for %s, which has no per-record events", SLOEventsTotal, l.GetValue())
			}
		}
	}
}

// Operate mode: a failed probe is bad for latency objectives too, and a
// probe the canary cancelled counts nowhere.
func TestSinkOperate(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}, Daemon: true})
	var seen []string
	s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}, Operate: true,
		OnEvents: func(sp *slo.Spec, o *slo.Objective, e slo.Events, at time.Time) {
			seen = append(seen, o.Name)
			if !at.Equal(epoch.Add(time.Second)) {
				t.Errorf("event at %v, want the request's end", at)
			}
		}})
	s.Add(failed("chat", loadgen.ErrTimeout))
	s.Add(failed("chat", loadgen.ErrCancelled))
	f := gather(t, m)
	for _, o := range []string{"ttft-p99", "itl-p95", "errors"} {
		if v := value(t, f, SLOEventsTotal, map[string]string{"objective": o, "outcome": "bad"}); v != 1 {
			t.Errorf("%s bad = %v, want 1", o, v)
		}
	}
	if v := value(t, f, RequestsTotal, map[string]string{"outcome": "error"}); v != 1 {
		t.Errorf("errors = %v, want 1 (the cancelled probe left out)", v)
	}
	if !slices.Equal(seen, []string{"ttft-p99", "itl-p95", "errors"}) {
		t.Errorf("OnEvents saw %v", seen)
	}
	if value(t, f, ConfigLastReloadSuccessful, nil) != 0 {
		t.Error("reload gauge should start at 0 until SetReload")
	}
}

// Every SLO threshold is a bucket bound, and a value exactly at the
// threshold is counted in that bucket.
func TestBucketsHoldThresholdsExactly(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}})
	if b := m.HistogramBuckets(measure.MetricITL); !slices.Contains(b, (15 * time.Millisecond).Seconds()) {
		t.Fatalf("itl buckets %v lack 0.015", b)
	}
	s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}})
	s.Add(rec("chat", 500*time.Millisecond, 15*time.Millisecond, 2))
	s.Add(rec("chat", 500*time.Millisecond+time.Microsecond, 15*time.Millisecond+time.Microsecond, 2))
	f := gather(t, m)
	for _, c := range []struct {
		name  string
		bound float64
	}{{TTFTSeconds, 0.5}, {ITLSeconds, 0.015}} {
		h := f[c.name].Metric[0].Histogram
		var cum uint64
		for _, b := range h.Bucket {
			if b.GetUpperBound() == c.bound {
				cum = b.GetCumulativeCount()
			}
		}
		if cum != 1 {
			t.Errorf("%s: bucket le=%v holds %d, want 1 (the value at the threshold, not the one 1µs above)", c.name, c.bound, cum)
		}
		if h.GetSchema() == 0 && len(h.PositiveSpan) == 0 {
			t.Errorf("%s: no native histogram", c.name)
		}
	}
	// A new SLO with another threshold rebuilds the histogram with it.
	spec2 := mustSpec(t)
	spec2.Objectives[0].Threshold = 700 * time.Millisecond
	m.SetSpecs([]*slo.Spec{spec2})
	if b := m.HistogramBuckets(measure.MetricTTFT); !slices.Contains(b, 0.7) {
		t.Errorf("ttft buckets after SetSpecs: %v", b)
	}
}

// Names is the contract: every name exported, nothing exported outside it.
func TestNamesAreWhatIsExported(t *testing.T) {
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}, Daemon: true})
	m.SetReload(true, time.Now())
	m.SetStateWrite(true, time.Now())
	s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}, Operate: true})
	s.Add(rec("chat", 100*time.Millisecond, 10*time.Millisecond, 3))
	s.Add(failed("chat", loadgen.ErrServer))
	m.SetBudgetRemaining("chat", "errors", "sim", 1)
	m.SetBurnRate("chat", "errors", "sim", "5m", 0)
	m.SetCoverage("chat", "errors", "sim", "5m", 1)
	m.SetTargetInfo("sim", "http://127.0.0.1:1", "openai-chat", "m")
	var got []string
	var std int
	for n := range gather(t, m) {
		// client_golang's own process_* and go_* collectors are theirs.
		if strings.HasPrefix(n, "process_") || strings.HasPrefix(n, "go_") {
			std++
			continue
		}
		got = append(got, n)
	}
	if _, ok := gather(t, m)["process_start_time_seconds"]; !ok || std < 10 {
		t.Errorf("a daemon exports no process_start_time_seconds (%d process_/go_ families)", std)
	}
	want := append([]string(nil), namesTable...)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("exported %v\nwant      %v", got, want)
	}
}

// --push: the body the Pushgateway gets holds the run's metrics under the
// contract's names, the target in the grouping key (URL path), job tailgate.
func TestPush(t *testing.T) {
	var mu sync.Mutex
	var method, path string
	var body []byte
	var header http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		method, path, body, header = r.Method, r.URL.Path, b, r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}})
	s := m.NewSink(SinkOptions{Target: "gpu-node:8000", Specs: []*slo.Spec{spec}})
	s.Add(rec("chat", 100*time.Millisecond, 10*time.Millisecond, 3))
	s.Add(failed("chat", loadgen.ErrServer))
	if err := Push(context.Background(), srv.URL, "gpu-node:8000", m.Registry(), nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if method != http.MethodPut || path != "/metrics/job/tailgate/target/gpu-node:8000" {
		t.Errorf("%s %s, want PUT /metrics/job/tailgate/target/gpu-node:8000", method, path)
	}
	dec := expfmt.NewDecoder(bytes.NewReader(body), expfmt.ResponseFormat(header))
	fams := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("decode push body: %v", err)
			}
			break
		}
		fams[mf.GetName()] = &mf
	}
	if v := value(t, fams, RequestsTotal, map[string]string{"outcome": "error", "class": "chat"}); v != 1 {
		t.Errorf("pushed errors = %v", v)
	}
	if v := value(t, fams, SLOEventsTotal, map[string]string{"objective": "errors", "outcome": "bad"}); v != 1 {
		t.Errorf("pushed bad events = %v", v)
	}
	for _, mf := range fams {
		for _, mm := range mf.Metric {
			for _, l := range mm.Label {
				if l.GetName() == LabelTarget {
					t.Fatalf("%s carries the target label; it belongs to the grouping key", mf.GetName())
				}
			}
		}
	}
	if err := Push(context.Background(), "http://127.0.0.1:1", "x", m.Registry(), nil); err == nil {
		t.Error("push to a closed port: no error")
	}
}

// The error series exist at 0 before the first error, for every class
// named and every kind a record can count with (increase() then counts the
// first errors instead of taking them for the series' start); a class seen
// later gets them at its first record.
func TestErrorSeriesExistFromTheStart(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t)
	m := New(Options{Specs: []*slo.Spec{spec}, Daemon: true})
	s := m.NewSink(SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}, Operate: true, Classes: []string{"chat"}})
	count := func(name, label, value string) (n int, sum float64) {
		for _, mm := range gather(t, m)[name].GetMetric() {
			for _, l := range mm.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n++
					sum += mm.GetCounter().GetValue()
				}
			}
		}
		return
	}
	if n, v := count(RequestsTotal, LabelOutcome, OutcomeError); n != 1 || v != 0 {
		t.Errorf("%s{outcome=error}: %d series, sum %v; want one at 0", RequestsTotal, n, v)
	}
	if n, _ := count(RequestErrorsTotal, LabelClass, "chat"); n != len(loadgen.ErrorKinds)-1 {
		t.Errorf("%s{class=chat}: %d series, want every kind but cancelled (%d)", RequestErrorsTotal, n, len(loadgen.ErrorKinds)-1)
	}
	if n, _ := count(RequestErrorsTotal, LabelKind, string(loadgen.ErrCancelled)); n != 0 {
		t.Errorf("operate counts cancelled probes nowhere, yet %s{kind=cancelled} exists", RequestErrorsTotal)
	}
	s.Add(rec("other", 100*time.Millisecond, 10*time.Millisecond, 3))
	if n, v := count(RequestsTotal, LabelOutcome, OutcomeError); n != 2 || v != 0 {
		t.Errorf("after a first record of class other: %d error series, sum %v; want two at 0", n, v)
	}
}
