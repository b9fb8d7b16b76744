package report_test

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/report"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

// ratesWithTotalTokens is the rate table plus one made-up floor,
// total_tokens_per_s (input and output tokens of successful requests per
// second), given every face a row can have: a new floor is this one row.
func ratesWithTotalTokens() []measure.RateMetric {
	total := measure.NewRateMetric(measure.RateMetric{
		Name: "total_tokens_per_s", Unit: "tok/s", Label: "total tok/s",
		Definition: "input and output tokens of successful requests per second of the measured window",
		Compare:    true, Sweep: true,
		Prom:    measure.PromFace{Name: "tailgate_total_tokens_total", Help: "Input and output tokens of successful requests (made up by a test)."},
		Columns: []string{measure.TableReportParts, measure.TableReportPartsMD, measure.TableSweep},
	}, func(r *loadgen.Record) int64 { return int64(r.InputTokens + r.OutputTokens) })
	return append(measure.RateMetrics(), total)
}

// oneRowSLO judges the made-up floor and the made-up latency metric.
const oneRowSLO = `kind: SLO
apiVersion: tailgate/v1
name: onerow
owner: test@example.com
objectives:
  - name: total-tokens
    metric: total_tokens_per_s
    threshold: 1000
  - name: ttst-p95
    metric: ttst
    threshold: 40ms
    target: 95%
  - name: errors
    metric: error_rate
    threshold: 5%
`

// A made-up floor added as one row of the rate table reaches summary.json,
// /metrics, the SLO parser and judge (the verdict table), report.html (and
// its Markdown) and compare; the made-up latency row reaches the verdict
// table too.
func TestOneRowRateReachesEveryFace(t *testing.T) {
	t.Parallel()
	rows, rates := tableWithTTST(), ratesWithTotalTokens()
	recs := oneRowRecords(200, 0)
	// 200 requests of 10 input and 3 output tokens, intended 0 to 1.99 s,
	// the last ending at 2.06 s.
	wantRate := 200 * 13 / 2.06

	// summary.json: the throughput block and definitions, and back.
	m := measure.NewMetricsOf(rows).WithRates(rates)
	for i := range recs {
		m.Add(&recs[i])
	}
	sum := m.Summary(loadgen.Info{Elapsed: 3 * time.Second}, schema.SummaryMeta{})
	js, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Throughput  map[string]float64 `json:"throughput"`
		Definitions map[string]string  `json:"definitions"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if v := doc.Throughput["total_tokens_per_s"]; math.Abs(v-wantRate) > 1e-6 {
		t.Errorf("summary.json throughput.total_tokens_per_s = %v, want %v (throughput %v)", v, wantRate, doc.Throughput)
	}
	if v := doc.Throughput["requests_per_s"]; math.Abs(v-200/2.06) > 1e-6 {
		t.Errorf("summary.json throughput.requests_per_s = %v, want %v", v, 200/2.06)
	}
	if doc.Definitions["total_tokens_per_s"] == "" {
		t.Error("summary.json has no definition of total_tokens_per_s")
	}
	var back schema.Summary
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if v := back.Throughput.Extra["total_tokens_per_s"]; math.Abs(v-wantRate) > 1e-6 || len(back.Throughput.Extra) != 1 {
		t.Errorf("summary.json read back: extra rates %v, want total_tokens_per_s %v alone", back.Throughput.Extra, wantRate)
	}

	// /metrics: the row's counter, name and help.
	pm := prom.New(prom.Options{Latency: rows, Rates: rates})
	sink := pm.NewSink(prom.SinkOptions{Target: "t"})
	for i := range recs {
		if err := sink.Add(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(pm.Registry(), promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{"# HELP tailgate_total_tokens_total Input and output tokens of successful requests (made up by a test).",
		`tailgate_total_tokens_total{class="chat",target="t"} 2600`, `tailgate_output_tokens_total{class="chat",target="t"} 600`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The SLO parser: the built-in tables know neither made-up metric; the
	// tables given do, and the judge judges both by their rows.
	if _, err := slo.ParseSpec("onerow.yaml", []byte(oneRowSLO)); err == nil || !strings.Contains(err.Error(), `"total_tokens_per_s" is not a metric`) {
		t.Errorf("the built-in tables read a made-up metric: %v", err)
	}
	spec, err := slo.ParseSpecIn(slo.Tables{Latency: rows, Rates: rates}, "onerow.yaml", []byte(oneRowSLO))
	if err != nil {
		t.Fatal(err)
	}
	if k := spec.Objectives[0].Kind(); k != slo.KindFloor {
		t.Errorf("total_tokens_per_s objective kind %q, want floor", k)
	}
	j := slo.NewJudge(nil, spec)
	for i := range recs {
		j.Add(&recs[i])
	}
	verdicts := j.Assess(slo.Input{Now: time.Unix(0, 0)})
	var vt bytes.Buffer
	if err := exporters.WriteVerdictTable(&vt, verdicts); err != nil {
		t.Fatal(err)
	}
	for _, want := range [][]string{{"total-tokens", "1262.1/s", "≥ 1000/s", "2600 in 2.1s", "PASS"}, {"ttst-p95", "≤ 40ms", "200/200", "PASS"}} {
		found := false
		for line := range strings.Lines(vt.String()) {
			all := strings.HasPrefix(line, want[0]+" ")
			for _, w := range want[1:] {
				all = all && strings.Contains(line, w)
			}
			found = found || all
		}
		if !found {
			t.Errorf("verdict table has no line with %q:\n%s", want, vt.String())
		}
	}

	// report.html and the Markdown report: the row's column.
	src := &report.Source{Dir: "run", Kind: "run", Parts: []*report.Part{{Name: "run", Summary: &results.Summary{Summary: *sum}}}}
	var html, md bytes.Buffer
	if err := report.WriteHTML(&html, []*report.Source{src}, report.Options{Latency: rows, Rates: rates}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<th>out tok/s</th><th>total tok/s</th><th>TTFT p50</th>", "<td>291.3</td><td>1262.1</td>"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if err := report.WriteMarkdown(&md, []*report.Source{src}, report.Options{Latency: rows, Rates: rates}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(md.String(), "| goodput/s | total tok/s | TTFT p50 |") || !strings.Contains(md.String(), "| 1262.1 |") {
		t.Errorf("Markdown report lacks the total tok/s column:\n%s", md.String())
	}

	// compare: a default rate, baseline and candidate side by side.
	side := func(dir string, recs []loadgen.Record) *comparison.Side {
		return &comparison.Side{Dir: dir, Stages: map[string][]loadgen.Record{"main": recs}, Order: []string{"main"},
			Load:    map[string]comparison.Load{"main": {Mode: "open", Arrival: "poisson", OfferedPerS: 100}},
			Classes: map[string]map[string]int{"main": {"chat": len(recs)}}}
	}
	rep, err := comparison.Compare(side("a", recs), side("b", oneRowRecords(200, 20*time.Millisecond)),
		comparison.Options{Tolerance: 0.05, Resamples: 200, Seed: 1, Latency: rows, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rates) != 1 || rep.Rates[0].Metric != "total_tokens_per_s" || math.Abs(rep.Rates[0].Baseline-wantRate) > 1e-6 ||
		math.Abs(rep.Rates[0].Candidate-2600/2.08) > 1e-6 || rep.Rates[0].ChangePct == nil || *rep.Rates[0].ChangePct >= 0 {
		t.Errorf("compare rates %+v: want total_tokens_per_s %v → %v, lower", rep.Rates, wantRate, 2600/2.08)
	}
	var ct bytes.Buffer
	comparison.WriteTable(&ct, rep)
	if !strings.Contains(ct.String(), "total_tokens_per_s  1262.1 tok/s") {
		t.Errorf("compare table lacks the total_tokens_per_s row:\n%s", ct.String())
	}
}
