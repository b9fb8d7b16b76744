package report_test

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

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
	sum, js, doc := oneRowSummary(t, m, recs)
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
	body := oneRowScrape(t, prom.New(prom.Options{Latency: rows, Rates: rates}), recs)
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
	html, md := oneRowReports(t, sum, report.Options{Latency: rows, Rates: rates})
	for _, want := range []string{"<th>out tok/s</th><th>total tok/s</th><th>TTFT p50</th>", "<td>291.3</td><td>1262.1</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if !strings.Contains(md, "| goodput/s | total tok/s | TTFT p50 |") || !strings.Contains(md, "| 1262.1 |") {
		t.Errorf("Markdown report lacks the total tok/s column:\n%s", md)
	}

	// The terminal summary: by the row's label with the table given, by
	// its name after the built-in rows without it.
	oneRowTextHas(t, sum, rates, "goodput/s 97.09  total tok/s 1262.1  (measured")
	oneRowTextHas(t, sum, nil, "goodput/s 97.09  total_tokens_per_s 1262.1  (measured")

	// compare: a default rate, baseline and candidate side by side.
	rep, err := comparison.Compare(oneRowSide("a", recs), oneRowSide("b", oneRowRecords(200, 20*time.Millisecond)),
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

// ratesWithCapped is the rate table plus one made-up ratio, capped_rate
// (successful requests that asked for a max_tokens and used all of it,
// over the successful requests that asked for one), given every face a
// row can have: a new ratio is this one row.
func ratesWithCapped() []measure.RateMetric {
	capped := measure.NewRatioMetric(measure.RateMetric{
		Name: "capped_rate", Label: "capped",
		Definition: "successful requests that used all of their max_tokens over the successful requests that asked for one",
		Compare:    true, Sweep: true,
		Prom:    measure.PromFace{Name: "tailgate_capped", Help: "Successful requests that used all of their max_tokens (made up by a test)."},
		Columns: []string{measure.TableReportParts, measure.TableReportPartsMD},
	}, func(r *loadgen.Record) (counted, bad bool) {
		if !r.OK() || r.MaxTokens <= 0 {
			return false, false
		}
		return true, r.OutputTokens >= r.MaxTokens
	})
	return append(measure.RateMetrics(), capped)
}

// cappedRecords are oneRowRecords with a max_tokens each, every every-th
// one used up, and failed more failed requests after them.
func cappedRecords(n, every, failed int) []loadgen.Record {
	recs := oneRowRecords(n, 0)
	for i := range recs {
		recs[i].MaxTokens = 8
		if i%every == 0 {
			recs[i].MaxTokens = 3
		}
	}
	for i := range failed {
		at := time.Duration(n+i) * 10 * time.Millisecond
		recs = append(recs, loadgen.Record{Seq: int64(n + i), Class: "chat", Intended: at, Sent: at, End: at + 5*time.Millisecond,
			MaxTokens: 3, ErrorKind: loadgen.ErrServer, Error: "HTTP 500"})
	}
	return recs
}

const cappedSLO = `kind: SLO
apiVersion: tailgate/v1
name: capped
owner: test@example.com
objectives:
  - name: capped
    metric: capped_rate
    threshold: 40%
`

// A made-up ratio added as one row of the rate table reaches summary.json,
// /metrics (a bad and counted pair), the SLO parser and judge (the verdict
// table), report.html (and its Markdown) and compare, each counting the
// records the row's own rule classes.
func TestOneRowRatioReachesEveryFace(t *testing.T) {
	t.Parallel()
	rates := ratesWithCapped()
	// 200 successful requests, one in four capped (50), and 10 failed ones
	// the row does not count.
	recs := cappedRecords(200, 4, 10)

	// summary.json: the throughput block and definitions, and back.
	m := measure.NewMetrics().WithRates(rates)
	sum, js, doc := oneRowSummary(t, m, recs)
	if v, ok := doc.Throughput["capped_rate"]; !ok || v != 0.25 {
		t.Errorf("summary.json throughput.capped_rate = %v (%v), want 0.25 (throughput %v)", v, ok, doc.Throughput)
	}
	if doc.Definitions["capped_rate"] == "" {
		t.Error("summary.json has no definition of capped_rate")
	}
	var back schema.Summary
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if v := back.Throughput.Extra["capped_rate"]; v != 0.25 || len(back.Throughput.Extra) != 1 {
		t.Errorf("summary.json read back: extra rates %v, want capped_rate 0.25 alone", back.Throughput.Extra)
	}
	if v := back.Classes["chat"].Throughput.Extra["capped_rate"]; v != 0.25 {
		t.Errorf("summary.json class chat: capped_rate %v, want 0.25", v)
	}
	// Nothing counted: absent, not zero.
	none := measure.NewMetrics().WithRates(rates)
	for _, r := range oneRowRecords(20, 0) { // no max_tokens asked
		none.Add(&r)
	}
	if v, ok := none.Summary(loadgen.Info{Elapsed: time.Second}, schema.SummaryMeta{}).Throughput.Extra["capped_rate"]; ok {
		t.Errorf("capped_rate of requests that asked no max_tokens = %v, want absent", v)
	}

	// /metrics: the row's bad and counted pair, names and help.
	body := oneRowScrape(t, prom.New(prom.Options{Rates: rates}), recs)
	for _, want := range []string{"# HELP tailgate_capped_bad_total Successful requests that used all of their max_tokens (made up by a test). Records counted bad.",
		`tailgate_capped_bad_total{class="chat",target="t"} 50`, `tailgate_capped_events_total{class="chat",target="t"} 200`,
		`tailgate_output_tokens_total{class="chat",target="t"} 600`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	// The SLO parser and judge: the built-in table does not know the
	// ratio; the table given does, and the judge counts by its row.
	if _, err := slo.ParseSpec("capped.yaml", []byte(cappedSLO)); err == nil || !strings.Contains(err.Error(), `"capped_rate" is not a metric`) {
		t.Errorf("the built-in tables read a made-up ratio: %v", err)
	}
	spec, err := slo.ParseSpecIn(slo.Tables{Latency: measure.LatencyMetrics(), Rates: rates}, "capped.yaml", []byte(cappedSLO))
	if err != nil {
		t.Fatal(err)
	}
	o := &spec.Objectives[0]
	if k := o.Kind(); k != slo.KindRatio {
		t.Errorf("capped_rate objective kind %q, want ratio", k)
	}
	if e := o.Events(&recs[0]); e != (slo.Events{Bad: 1}) {
		t.Errorf("events of a capped request %+v, want one bad", e)
	}
	if e := o.Events(&recs[len(recs)-1]); e.Total() != 0 {
		t.Errorf("events of a failed request %+v, want none (the row does not count it)", e)
	}
	j := slo.NewJudge(nil, spec)
	for i := range recs {
		j.Add(&recs[i])
	}
	verdicts := j.Assess(slo.Input{Now: time.Unix(0, 0)})
	if vs := verdicts.Verdicts; len(vs) != 1 || vs[0].Measured != 0.25 || vs[0].Total != 200 || vs[0].Good != 150 || vs[0].LeftOut != 10 {
		t.Fatalf("verdicts %+v: want capped_rate 25%% of 200, 10 left out", verdicts.Verdicts)
	}
	var vt bytes.Buffer
	if err := exporters.WriteVerdictTable(&vt, verdicts); err != nil {
		t.Fatal(err)
	}
	found := false
	for line := range strings.Lines(vt.String()) {
		found = found || strings.HasPrefix(line, "capped ") && strings.Contains(line, " 25% ") && strings.Contains(line, "≤ 40%") && strings.Contains(line, "PASS")
	}
	if !found || !strings.Contains(vt.String(), "left out: 10 requests capped_rate does not count") {
		t.Errorf("verdict table lacks the capped line or its note:\n%s", vt.String())
	}

	// report.html and the Markdown report: the row's column.
	html, md := oneRowReports(t, sum, report.Options{Rates: rates})
	for _, want := range []string{"<th>out tok/s</th><th>capped</th><th>TTFT p50</th>", "<td>25.00%</td>"} {
		if !strings.Contains(html, want) {
			t.Errorf("report.html lacks %q", want)
		}
	}
	if !strings.Contains(md, "| goodput/s | capped | TTFT p50 |") || !strings.Contains(md, "| 25.00% |") {
		t.Errorf("Markdown report lacks the capped column:\n%s", md)
	}

	// The terminal summary: by the row's label with the table given, by
	// its name after the built-in rows without it.
	oneRowTextHas(t, sum, rates, "  capped 25.00%  (measured")
	oneRowTextHas(t, sum, nil, "  capped_rate 0.25  (measured")

	// compare: a default rate, baseline and candidate side by side.
	rep, err := comparison.Compare(oneRowSide("a", recs), oneRowSide("b", cappedRecords(200, 5, 10)),
		comparison.Options{Tolerance: 0.05, Resamples: 200, Seed: 1, Rates: rates})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rates) != 1 || rep.Rates[0].Metric != "capped_rate" || rep.Rates[0].Baseline != 0.25 || rep.Rates[0].Candidate != 0.2 ||
		rep.Rates[0].ChangePct == nil || *rep.Rates[0].ChangePct >= 0 {
		t.Errorf("compare rates %+v: want capped_rate 0.25 → 0.2, lower", rep.Rates)
	}
	var ct bytes.Buffer
	comparison.WriteTable(&ct, rep)
	if !strings.Contains(ct.String(), "capped_rate  25.00%    20.00%     -20.0%") {
		t.Errorf("compare table lacks the capped_rate row:\n%s", ct.String())
	}
}

// oneRowTextHas checks that the terminal summary of sum, its throughput
// line labelled by rates (nil: the built-in table), holds want.
func oneRowTextHas(t *testing.T, sum *schema.Summary, rates []measure.RateMetric, want string) {
	t.Helper()
	var b bytes.Buffer
	if err := exporters.WriteTextOf(&b, &results.Summary{Summary: *sum}, rates); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), want) {
		t.Errorf("terminal summary lacks %q:\n%s", want, b.String())
	}
}
