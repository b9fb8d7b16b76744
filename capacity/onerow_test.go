package capacity

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// The sweep table's latency columns are the metric table's: a made-up row
// with a TableSweep column gets one, after the table's own.
func TestSweepTableColumnsFromTheMetricTable(t *testing.T) {
	t.Parallel()
	rows := append(measure.LatencyMetrics(), measure.LatencyMetric{Name: "ttst", Label: "TTST",
		Columns: map[string][]float64{measure.TableSweep: {0.5}}})
	sw := &results.Sweep{Levels: []results.SweepLevel{{Name: "c2", Concurrency: 2, AchievedPerS: 9, Pass: true, Valid: true,
		LatencyMs: map[string]schema.Hist{"ttft": {Count: 5, P99: 12.5}, "ttst": {Count: 5, P50: 33.3}}}}}
	var b bytes.Buffer
	writeTable(&b, sw, rows, measure.RateMetrics())
	head, row, _ := strings.Cut(b.String(), "\n")
	if !strings.Contains(head, "E2E p99  TTST p50  GPU util") {
		t.Errorf("header %q: want TTST p50 after E2E p99", head)
	}
	if !strings.Contains(row, "12.5 ms") || !strings.Contains(row, "33.3 ms") {
		t.Errorf("row %q: want TTFT p99 12.5 ms and TTST p50 33.3 ms", row)
	}
}

// A made-up floor marked Sweep with a TableSweep column is kept by a level
// and shown in the sweep table after goodput/s; the built-in rates keep
// their own fields and add nothing.
func TestSweepKeepsAndShowsAMadeUpRate(t *testing.T) {
	t.Parallel()
	rates := append(measure.RateMetrics(), measure.NewRateMetric(measure.RateMetric{Name: "total_tokens_per_s", Label: "total tok/s",
		Sweep: true, Columns: []string{measure.TableSweep}}, func(r *loadgen.Record) int64 { return int64(r.InputTokens + r.OutputTokens) }))
	th := schema.Throughput{RequestsPerS: 9, OutputTokensPerS: 90, Extra: map[string]float64{"total_tokens_per_s": 123.45}}
	lv := results.SweepLevel{Name: "c2", Concurrency: 2, AchievedPerS: 9, Pass: true, Valid: true}
	keepRates(&lv, &th, measure.RateMetrics())
	if lv.Rates != nil {
		t.Errorf("built-in rates kept %v: they have fields of their own", lv.Rates)
	}
	keepRates(&lv, &th, rates)
	if len(lv.Rates) != 1 || lv.Rates["total_tokens_per_s"] != 123.45 {
		t.Errorf("level rates %v, want total_tokens_per_s 123.45 alone", lv.Rates)
	}
	var b bytes.Buffer
	writeTable(&b, &results.Sweep{Levels: []results.SweepLevel{lv}}, measure.LatencyMetrics(), rates)
	head, row, _ := strings.Cut(b.String(), "\n")
	if !strings.Contains(head, "goodput/s  total tok/s  TTFT p99") {
		t.Errorf("header %q: want total tok/s after goodput/s", head)
	}
	if !strings.Contains(row, "123.5") {
		t.Errorf("row %q: want total tok/s 123.5", row)
	}
}
