package exporters

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/telemetry"
)

func TestWriteTextReport(t *testing.T) {
	t.Parallel()
	m := measure.NewMetrics()
	for i := 0; i < 4; i++ {
		r := &loadgen.Record{Class: []string{"chat", "rag"}[i%2], Intended: 0, Sent: 0, End: 100 * time.Millisecond,
			Chunks: []loadgen.Chunk{{At: 20 * time.Millisecond}, {At: 40 * time.Millisecond}}}
		r.Finalize()
		m.Add(r)
	}
	m.Add(&loadgen.Record{Seq: 7, Class: "chat", ErrorKind: loadgen.ErrRateLimited, End: time.Millisecond,
		Error: "HTTP 429: slow down\n" + strings.Repeat("x", 400)})
	s := m.Summary(loadgen.Info{Started: time.Unix(0, 0), Elapsed: time.Second, Interrupted: true},
		schema.SummaryMeta{Version: "v", Target: "http://x", API: "openai-chat", Model: "m"})
	var b bytes.Buffer
	if err := WriteText(&b, &results.Summary{Summary: *s}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"target http://x", "INTERRUPTED", "sent 5  ok 4  errors 1", "rate_limited=1",
		"ttft", "e2e", "class", "chat", "rag", "first rate_limited: request 7: HTTP 429: slow down x"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, strings.Repeat("x", 300)) {
		t.Errorf("first error not cut to a line:\n%s", out)
	}
	// The class table's rate columns are the rate table's rows: their
	// labels head them, and each class's own figures fill them.
	head := []string{"class", "ok", "err"}
	for _, name := range []string{measure.MetricRequestsPerS, measure.MetricOutputTokensPerS} {
		head = append(head, measure.FindRateIn(measure.RateMetrics(), name).Label)
	}
	rag := fmt.Sprintf("rag 2 0 %.2f %.1f", s.Classes["rag"].Throughput.RequestsPerS, s.Classes["rag"].Throughput.OutputTokensPerS)
	if flat := strings.Join(strings.Fields(out), " "); !strings.Contains(flat, strings.Join(head, " ")) || !strings.Contains(flat, rag) {
		t.Errorf("class table lacks the header %q or the row %q:\n%s", head, rag, out)
	}
	if strings.Contains(out, "ttfat") {
		t.Errorf("ttfat shown though no reasoning tokens:\n%s", out)
	}
	// The throughput line is the rate table's floors, by their labels.
	th := s.Throughput
	line := fmt.Sprintf("throughput out tok/s %.1f  in tok/s %.1f  completed/s %.2f  goodput/s %.2f  (measured window",
		th.OutputTokensPerS, th.InputTokensPerS, th.RequestsPerS, *th.GoodputPerS)
	if !strings.Contains(out, line) {
		t.Errorf("report lacks the throughput line %q:\n%s", line, out)
	}
}

// A run with agent sessions prints their figures; one without, none.
func TestWriteTextSessions(t *testing.T) {
	t.Parallel()
	m := measure.NewMetrics()
	for i, call := range []string{"a", "b"} {
		r := &loadgen.Record{Session: "s0", Call: call, Turn: i, Intended: time.Duration(i) * 150 * time.Millisecond,
			Sent: time.Duration(i) * 150 * time.Millisecond, End: time.Duration(i)*150*time.Millisecond + 100*time.Millisecond,
			Chunks: []loadgen.Chunk{{At: time.Duration(i)*150*time.Millisecond + 20*time.Millisecond}}, SessionLast: i == 1}
		r.Finalize()
		m.Add(r)
	}
	text := func(m *measure.Metrics) string {
		var b bytes.Buffer
		s := m.Summary(loadgen.Info{Started: time.Unix(0, 0), Elapsed: time.Second}, schema.SummaryMeta{})
		if err := WriteText(&b, &results.Summary{Summary: *s}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	out := text(m)
	for _, want := range []string{"sessions 1  ok 1  failed 0", "duration      1  250.05", "turn 0 ttft", "turn 1+ e2e"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if out := text(measure.NewMetrics()); strings.Contains(out, "sessions") {
		t.Errorf("sessions shown for a run without:\n%s", out)
	}
}

// The server's queue-delay p99 in the first bucket reads as below its
// bound, beside the exact mean, and the Triton model is named.
func TestTelemetryLineFirstBucketAndServerModel(t *testing.T) {
	t.Parallel()
	mean, lo, hi := 0.8, 0.0, 300.0
	pre, hit := 3.0, 0.314
	line := telemetryLine(&telemetry.Summary{Family: "triton", ServerModel: "ensemble",
		QueueDelay: &telemetry.HistogramSummary{MeanMs: &mean, P99Bkt: []*float64{&lo, &hi}},
		Capacity:   &telemetry.Capacity{Preemptions: &pre, PrefixCacheHitRate: &hit}})
	for _, want := range []string{"triton (model ensemble)", "queue delay mean 0.8 ms, p99 ≤ 300 ms (below the first bucket bound)",
		"3 preemptions", "prefix cache hits 31%"} {
		if !strings.Contains(line, want) {
			t.Errorf("line %q lacks %q", line, want)
		}
	}
}

// A metric with no sample is absent from the latency table, named on a
// "no sample" line, never a row of zeros; in the class table it is "-".
func TestWriteTextNoSampleAbsent(t *testing.T) {
	t.Parallel()
	m := measure.NewMetrics()
	for i := 0; i < 2; i++ {
		// One content chunk each: TTFT and E2E, but no gap for ICL or
		// ITL and too few tokens for TPOT.
		r := &loadgen.Record{Class: []string{"chat", "rag"}[i], End: 50 * time.Millisecond,
			Chunks: []loadgen.Chunk{{At: 20 * time.Millisecond, Tokens: 1}}}
		r.Finalize()
		m.Add(r)
	}
	s := m.Summary(loadgen.Info{Started: time.Unix(0, 0), Elapsed: time.Second}, schema.SummaryMeta{Version: "v", Target: "http://x"})
	var b bytes.Buffer
	if err := WriteText(&b, &results.Summary{Summary: *s}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "no sample: icl, itl, tpot") {
		t.Errorf("no \"no sample\" line naming icl, itl and tpot:\n%s", out)
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "icl" || f[0] == "itl" || f[0] == "tpot") {
			t.Errorf("row for a metric with no sample: %q", line)
		}
		if len(f) > 8 && (f[0] == "chat" || f[0] == "rag") && (f[7] != "-" || f[8] != "-") {
			t.Errorf("class row shows an ITL with no sample as a figure: %q", line)
		}
	}
	if !strings.Contains(out, "ttft") || !strings.Contains(out, "e2e") {
		t.Errorf("the measured metrics are missing:\n%s", out)
	}
}
