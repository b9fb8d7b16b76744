package report_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/report"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// tableWithTTST is the metric table plus one made-up latency metric, TTST
// (time to the second content chunk), given every face a row can have: a
// new metric is this one row and nothing else.
func tableWithTTST() []measure.LatencyMetric {
	ttst := measure.NewLatencyMetric(measure.LatencyMetric{
		Name: "ttst", Label: "TTST", Events: "successful requests with two chunks",
		Definition: "intended start to the second content-bearing chunk",
		Compare:    true, Sweep: true,
		Prom: measure.PromFace{Name: "tailgate_ttst_seconds", Help: "Time to the second chunk (made up by a test).",
			Buckets: []float64{0.01, 0.1, 1}},
		Columns: map[string][]float64{measure.TableReportParts: {0.5, 0.99}, measure.TableReportPartsMD: {0.99},
			measure.TableReportClasses: {0.99}, measure.TableReportLevels: {0.99}, measure.TableSweep: {0.99}},
	}, func(r *loadgen.Record) (time.Duration, bool) {
		if len(r.Chunks) < 2 {
			return 0, false
		}
		return loadgen.TruncMicros(r.Chunks[1].At) - loadgen.TruncMicros(r.Intended), true
	})
	return append(measure.LatencyMetrics(), ttst)
}

// oneRowRecords are n successful streamed requests, the second chunk
// 30 ms (base) or more after the intended start.
func oneRowRecords(n int, slow time.Duration) []loadgen.Record {
	out := make([]loadgen.Record, n)
	for i := range out {
		at := time.Duration(i) * 10 * time.Millisecond
		out[i] = loadgen.Record{Seq: int64(i), Class: "chat", Intended: at, Sent: at, FirstAnswer: at + 20*time.Millisecond,
			Chunks: []loadgen.Chunk{{At: at + 20*time.Millisecond, Tokens: 1}, {At: at + 30*time.Millisecond + slow + time.Duration(i%7)*time.Millisecond, Tokens: 1},
				{At: at + 60*time.Millisecond + slow, Tokens: 1}},
			End: at + 70*time.Millisecond + slow, OutputTokens: 3, InputTokens: 10}
	}
	return out
}

// oneRowDoc is what the one-row tests read of summary.json.
type oneRowDoc struct {
	LatencyMs   map[string]schema.Hist `json:"latency_ms"`
	Throughput  map[string]float64     `json:"throughput"`
	Definitions map[string]string      `json:"definitions"`
}

// oneRowSummary counts recs into m and returns the summary, its
// summary.json and what the tests read of it.
func oneRowSummary(t *testing.T, m *measure.Metrics, recs []loadgen.Record) (*schema.Summary, []byte, oneRowDoc) {
	t.Helper()
	for i := range recs {
		m.Add(&recs[i])
	}
	sum := m.Summary(loadgen.Info{Elapsed: 3 * time.Second}, schema.SummaryMeta{})
	js, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var doc oneRowDoc
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	return sum, js, doc
}

// oneRowScrape feeds recs to a sink of pm (target "t") and returns what
// /metrics serves.
func oneRowScrape(t *testing.T, pm *prom.Metrics, recs []loadgen.Record) string {
	t.Helper()
	sink := pm.NewSink(prom.SinkOptions{Target: "t"})
	for i := range recs {
		if err := sink.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(pm.Registry(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}

// oneRowReports is report.html and the Markdown report of one run whose
// summary is sum.
func oneRowReports(t *testing.T, sum *schema.Summary, opts report.Options) (html, md string) {
	t.Helper()
	src := &report.Source{Dir: "run", Kind: "run", Parts: []*report.Part{{Name: "run", Summary: &results.Summary{Summary: *sum}}}}
	var h, m bytes.Buffer
	if err := report.WriteHTML(&h, []*report.Source{src}, opts); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteMarkdown(&m, []*report.Source{src}, opts); err != nil {
		t.Fatal(err)
	}
	return h.String(), m.String()
}

// oneRowSide is one side of a compare: recs as the one stage of an open
// poisson run.
func oneRowSide(dir string, recs []loadgen.Record) *comparison.Side {
	return &comparison.Side{Dir: dir, Stages: map[string][]loadgen.Record{"main": recs}, Order: []string{"main"},
		Load:    map[string]comparison.Load{"main": {Mode: "open", Arrival: "poisson", OfferedPerS: 100}},
		Classes: map[string]map[string]int{"main": {"chat": len(recs)}}}
}

// A made-up metric added as one row of the metric table reaches
// summary.json, /metrics, report.html (and its Markdown) and compare.
func TestOneRowMetricReachesEveryFace(t *testing.T) {
	t.Parallel()
	rows := tableWithTTST()
	recs := oneRowRecords(200, 0)

	// summary.json: latency_ms and definitions.
	sum, _, doc := oneRowSummary(t, measure.NewMetricsOf(rows), recs)
	if h := doc.LatencyMs["ttst"]; h.Count != 200 || h.Min < 30 || h.Max > 37 {
		t.Errorf("summary.json latency_ms.ttst = %+v, want 200 samples in 30–36 ms", h)
	}
	if doc.Definitions["ttst"] == "" {
		t.Error("summary.json has no definition of ttst")
	}

	// /metrics: the row's histogram, name, help and buckets.
	body := oneRowScrape(t, prom.New(prom.Options{Latency: rows}), recs)
	for _, want := range []string{"# HELP tailgate_ttst_seconds Time to the second chunk (made up by a test).",
		`tailgate_ttst_seconds_bucket{class="chat",target="t",le="0.1"} 200`, `tailgate_ttst_seconds_count{class="chat",target="t"} 200`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// report.html and the Markdown report: the row's columns.
	html, md := oneRowReports(t, sum, report.Options{Latency: rows})
	for _, want := range []string{"<th>TTST p50</th><th>TTST p99</th>", "<th>TTST p99</th></tr>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if !strings.Contains(md, "| TTST p99 | GPU util |") {
		t.Errorf("Markdown report lacks the TTST column:\n%s", md)
	}

	// compare: a default row, and a slower candidate is a regression of it.
	rep, err := comparison.Compare(oneRowSide("a", recs), oneRowSide("b", oneRowRecords(200, 20*time.Millisecond)),
		comparison.Options{Tolerance: 0.05, Resamples: 200, Seed: 1, Latency: rows})
	if err != nil {
		t.Fatal(err)
	}
	var found, gates bool
	for _, r := range rep.Rows {
		if r.Metric == "ttst" {
			found = true
			gates = gates || (r.Gates && r.ChangePct > 50) // a 30 ms second chunk became 50 ms
		}
	}
	if !found || !gates {
		t.Errorf("compare: no ttst row that gates (found %v): %+v", found, rep.Rows)
	}
}
