package exporters

import (
	"bytes"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

func TestWriteVerdictTable(t *testing.T) {
	t.Parallel()
	r := sampleReport(t)
	var buf bytes.Buffer
	if err := WriteVerdictTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"OBJECTIVE  STAGE     CLASS  MEASURED",
		"ttft-p99   normal    -      100% (p99 100ms)  ≤ 500ms",
		"WAIVED (FAIL)",
		"errors     normal    -      0%                ≤ 1%",
		"manual     failover",
		"PENDING",
		"itl-p95/normal: waived by alice until 2026-12-31",
		"e2e-p90/normal: waiver by bob expired 2026-01-31 (old): no longer waives",
		"The run is invalid:",
		"Result: INVALID (exit 3)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}

// TestVerdictTableSources: the table says where its quantiles came from,
// prints a quantile in a server histogram's first bucket as such, and an
// error-rate verdict says how many requests it left out (JUnit too).
func TestVerdictTableSources(t *testing.T) {
	t.Parallel()
	spec, err := slo.ParseSpec("slo.yaml", []byte(`
kind: SLO
name: s
owner: o
objectives:
  - {name: ttft, metric: ttft, threshold: 500ms, target: 99%}
  - {name: queue, metric: queue_delay, threshold: 300ms, target: 99%}
  - {name: errors, metric: error_rate, threshold: 1%}
`))
	if err != nil {
		t.Fatal(err)
	}
	var recs []loadgen.Record
	for i := 0; i < 10; i++ {
		start := time.Duration(i) * 100 * time.Millisecond
		recs = append(recs, loadgen.Record{Seq: int64(i), Intended: start, Sent: start, End: start + time.Second, OutputTokens: 1,
			Chunks: []loadgen.Chunk{{At: start + 200*time.Millisecond, Tokens: 1}}})
	}
	recs = append(recs, loadgen.Record{Seq: 10, Intended: 0, Sent: 0, End: 2 * time.Second, ErrorKind: loadgen.ErrCutAtEnd})
	q := &promhist.Histogram{Source: "vllm:request_queue_time_seconds", Count: 10,
		Buckets: []promhist.Bucket{{LeSeconds: 0.3, Count: 10}, {LeSeconds: 0.5, Count: 10}, {LeSeconds: math.Inf(1), Count: 10}}}
	r := slo.Assess(nil, spec, slo.Input{Records: recs, Now: now, QueueDelay: map[string]*promhist.Histogram{"": q}})
	var buf bytes.Buffer
	if err := WriteVerdictTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"100% (p99 ≤ 300ms, first bucket)",
		"errors/: left out: 1 cut_at_end",
		"Quantiles in MEASURED are from HDR histograms of the records (3 significant digits) and from server histogram buckets",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
	buf.Reset()
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"left out 1 (not failures of the server)", "cut at end 1", "quantile from an HDR histogram"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("JUnit: missing %q in\n%s", want, buf.String())
		}
	}
}
