package capacity

import (
	"bytes"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// The sweep table's latency columns are the metric table's: a made-up row
// with a TableSweep column gets one, after the table's own.
func TestSweepTableColumnsFromTheMetricTable(t *testing.T) {
	t.Parallel()
	rows := append(loadgen.LatencyMetrics(), loadgen.LatencyMetric{Name: "ttst", Label: "TTST",
		Columns: map[string][]float64{loadgen.TableSweep: {0.5}}})
	sw := &results.Sweep{Levels: []results.SweepLevel{{Name: "c2", Concurrency: 2, AchievedPerS: 9, Pass: true, Valid: true,
		LatencyMs: map[string]loadgen.Hist{"ttft": {Count: 5, P99: 12.5}, "ttst": {Count: 5, P50: 33.3}}}}}
	var b bytes.Buffer
	writeTable(&b, sw, rows)
	head, row, _ := strings.Cut(b.String(), "\n")
	if !strings.Contains(head, "E2E p99  TTST p50  GPU util") {
		t.Errorf("header %q: want TTST p50 after E2E p99", head)
	}
	if !strings.Contains(row, "12.5 ms") || !strings.Contains(row, "33.3 ms") {
		t.Errorf("row %q: want TTFT p99 12.5 ms and TTST p50 33.3 ms", row)
	}
}
