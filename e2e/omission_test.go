package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// stallServer serves fixed 20 ms responses (TTFT 10 ms, 2 tokens 10 ms
// apart) and freezes everything for 2 s, 3 s into the run.
func stallServer(t *testing.T) *simtest.Server {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 10*time.Millisecond, 10*time.Millisecond
	cfg.StallAt, cfg.StallFor = 3*time.Second, 2*time.Second
	cfg.TruthLimit = 2000
	return simtest.Start(t, cfg)
}

// p99E2E is the p99 E2E that tailgate reports: summary.json's figure,
// from the HDR histogram.
func p99E2E(recs []*loadgen.Record) float64 {
	m := measure.NewMetrics()
	for _, r := range recs {
		m.Add(r)
	}
	return m.Summary(loadgen.Info{}, schema.SummaryMeta{}).LatencyMs[measure.MetricE2E].P99
}

// TestCoordinatedOmission: a 10 s open-loop run at 50 req/s against a
// server that stalls every response for 2 s once. Every request due during
// the stall waits for its end, so the true latency from the intended start
// is (stall end − intended) + service time; the reported p99 must match
// that within 5%. The closed loop over the same server reports a p99 near
// the service time, because its few workers stop sending during the stall
// (docs/figures.md, "Open loop versus closed loop").
func TestCoordinatedOmission(t *testing.T) {
	if raceEnabled {
		t.Skip("timing accuracy is checked without -race (make test runs e2e again without it)")
	}
	if testing.Short() {
		t.Skip("20 s of load")
	}
	const service = 20 * time.Millisecond
	srv := stallServer(t)
	recs := run(t, context.Background(), srv.URL, loadgen.Options{Arrival: loadgen.ArrivalConstant,
		Stages: []loadgen.Stage{{Rate: 50, Duration: 10 * time.Second}}}, 2)
	if len(recs) != 500 {
		t.Fatalf("%d requests, want 500", len(recs))
	}
	// The stall starts StallAt after the first request reaches the server;
	// place it on the run's clock through that request's server arrival.
	var first sim.Truth
	for _, tr := range srv.Truth() {
		if tr.Seq == 1 {
			first = tr
		}
	}
	if first.Seq != 1 {
		t.Fatal("no truth for the first request")
	}
	epoch := recs[0].Epoch()
	stallFrom := first.Arrived.Sub(epoch) + 3*time.Second
	stallTo := stallFrom + 2*time.Second
	var expected []float64
	for _, r := range recs {
		lat := service
		switch end := r.Intended + service; {
		case r.Intended >= stallFrom && r.Intended < stallTo:
			lat = stallTo - r.Intended + service
		case r.Intended < stallFrom && end > stallFrom:
			lat = service + 2*time.Second // frozen mid-response
		}
		expected = append(expected, float64(lat)/float64(time.Millisecond))
	}
	want, got := quantile(expected, 0.99), p99E2E(recs)
	t.Logf("open loop: p99 E2E %.1f ms, expected from intended starts %.1f ms", got, want)
	if got < want*0.95 || got > want*1.05 {
		t.Errorf("open loop p99 E2E %.1f ms, want %.1f ms ± 5%% (the stall must show)", got, want)
	}

	srv2 := stallServer(t)
	closed := run(t, context.Background(), srv2.URL, loadgen.Options{Closed: true,
		Stages: []loadgen.Stage{{Concurrency: 2, Duration: 10 * time.Second}}}, 2)
	cp99 := p99E2E(closed)
	t.Logf("closed loop (2 workers): %d requests, p99 E2E %.1f ms", len(closed), cp99)
	if cp99 > want/4 {
		t.Errorf("closed loop p99 %.1f ms: expected it to hide most of the stall (≪ %.1f ms)", cp99, want)
	}
}
