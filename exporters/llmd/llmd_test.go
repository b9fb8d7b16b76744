package llmd

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

func summary() *results.Summary {
	var s results.Summary
	s.Tool = loadgen.NewTool("1.2.3")
	s.Run = loadgen.RunInfo{Started: "2026-01-02T03:04:05Z", Ended: "2026-01-02T03:04:55Z", DurationS: 49.97,
		Target: "https://gw.example:8443/v1", Model: "m", Load: map[string]any{"mode": "open", "stages": "5@10s,10@10s"}}
	s.Requests = loadgen.Counts{Sent: 10, OK: 9, Errors: 1, CutAtEnd: 1}
	s.LatencyMs = map[string]loadgen.Hist{loadgen.MetricE2E: {Count: 9, Mean: 12, P99: 20}, loadgen.MetricITL: {}}
	s.Throughput = loadgen.Throughput{RequestsPerS: 3, OutputTokensPerS: 30, MeasuredWindowS: 3}
	return &s
}

// What tailgate did not measure is absent, not zero: ITL with no events,
// input and total token rates without input counts, and a rate for a run
// of several stages.
func TestUnmeasuredIsAbsent(t *testing.T) {
	t.Parallel()
	r := FromSummary(summary(), []byte("{}"))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"inter_token_latency", "time_to_first_token", "input_token_rate", "total_token_rate", "rate_qps", "concurrency"} {
		if strings.Contains(string(b), `"`+k+`"`) {
			t.Errorf("%s written: %s", k, b)
		}
	}
	agg := r.Results.RequestPerformance.Aggregate
	if agg.Latency.RequestLatency == nil || *agg.Latency.RequestLatency.P99 != 20 || agg.Requests.Incomplete != 1 {
		t.Errorf("aggregate %+v", agg)
	}
	if r.Run.Time.Duration != "PT49.97S" || r.Scenario.Load.Native.Config["target_host"] != "gw.example:8443" {
		t.Errorf("run %+v, config %v", r.Run, r.Scenario.Load.Native.Config)
	}
}

// One stage states its level: a rate open, a concurrency closed.
func TestLoadLevel(t *testing.T) {
	t.Parallel()
	q, c := loadLevel(map[string]any{"mode": "open", "stages": "12.5@30s~5s"})
	if q == nil || *q != 12.5 || c != nil {
		t.Errorf("open: %v %v", q, c)
	}
	q, c = loadLevel(map[string]any{"mode": "closed", "stages": "c8@1m0s"})
	if c == nil || *c != 8 || q != nil {
		t.Errorf("closed: %v %v", q, c)
	}
	if q, c = loadLevel(map[string]any{"mode": "trace", "stages": "trace@10s"}); q != nil || c != nil {
		t.Errorf("trace: %v %v", q, c)
	}
}
