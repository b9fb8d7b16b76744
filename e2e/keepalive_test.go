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

// llama.cpp closes the connection after every streamed response without
// saying so (no Connection: close). A closed loop of 8 against its 4 slots
// used to lose about a third of its requests to "server closed idle
// connection"; a request whose reused idle connection fails before any
// response byte is now sent again on a fresh one, so none is lost, and the
// summary counts the retries.
func TestServerClosingEveryConnectionLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("5 s of load")
	}
	cfg := sim.DefaultConfig()
	cfg.Profile, cfg.Slots = sim.ProfileLlamaCpp, 4
	// The close comes after the last byte, as on the real server, and late
	// enough that a client reusing the connection always hits it.
	cfg.CloseDelay = 20 * time.Millisecond
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, 2*time.Millisecond
	srv := simtest.Start(t, cfg)
	recs := run(t, context.Background(), srv.URL, loadgen.Options{Closed: true,
		Stages: []loadgen.Stage{{Concurrency: 8, Duration: 5 * time.Second}}}, 8)
	if len(recs) < 200 {
		t.Fatalf("only %d requests in 5 s", len(recs))
	}
	m := measure.NewMetrics()
	for _, r := range recs {
		m.Add(r)
		if !r.OK() {
			t.Errorf("request %d failed: %s: %s (retries %d)", r.Seq, r.ErrorKind, r.Error, r.Retries)
		}
	}
	s := m.Summary(loadgen.Info{}, schema.SummaryMeta{})
	if s.Requests.Errors != 0 || s.Requests.OK != int64(len(recs)) {
		t.Errorf("%d errors of %d: %v", s.Requests.Errors, len(recs), s.Requests.ErrorsByKind)
	}
	t.Logf("%d requests, %d retries", len(recs), s.Requests.Retries)
}
