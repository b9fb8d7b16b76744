//go:build timing && !race

// Timing tests: held against the simulator's model or its clock, they run
// without the race detector (which slows client and simulator 5-10x, and
// they would measure it), from `make test-timing` (go test -tags timing).

package capacity

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

func TestSweepFindsSLOMaxOpenLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, simConfig())
	cfg := sweepConfig(t, srv, Search{From: Level{Rate: 50}, To: Level{Rate: 200}})
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, res)
	t.Logf("sweep:\n%s", b.String())
	if res.SLOMax == nil {
		t.Fatal("no SLO-max found")
	}
	within(t, "open-loop SLO-max rate", res.SLOMax.RatePerS, derivedRate, 0.10)
	if res.MinRequests != 299 { // 0.99²⁹⁹ ≤ 0.05: the 1% error rate is the strictest
		t.Errorf("min requests %d, want 299 to decide a 1%% error rate at 95%%", res.MinRequests)
	}
	top := res.level("r200")
	if !top.Saturated || top.Pass {
		t.Errorf("r200 (1.6× the 125 req/s capacity) not saturated: %+v", top.Saturation)
	}
	for _, l := range res.Levels {
		if !l.Short && l.Requests.Sent < int64(l.MinRequests) {
			t.Errorf("level %s measured %d requests, fewer than %d, and is not marked short", l.Name, l.Requests.Sent, l.MinRequests)
		}
		if l.GPUUtilization == nil || l.QueueDelay == nil {
			t.Errorf("level %s lacks telemetry: gpu %v queue %v", l.Name, l.GPUUtilization, l.QueueDelay)
		}
	}
	if len(res.Levels) > 9 {
		t.Errorf("%d levels run; bisection alone needs 8 for 5%% over 50..200, plus the confirmation", len(res.Levels))
	}
	got, err := Read(cfg.Out)
	if err != nil || got.SLOMax == nil || got.SLOMax.Level != res.SLOMax.Level || len(got.Levels) != len(res.Levels) {
		t.Fatalf("sweep.json read back: %v %+v", err, got)
	}
	if k := res.Knee; k == nil || k.RatePerS > derivedKneeRate {
		t.Errorf("knee %+v: want the level at or below the derived %g req/s", k, derivedKneeRate)
	}
	if h := res.Headroom; h == nil || h.MonthsToSLOMax == nil || *h.MonthsToSLOMax <= 0 {
		t.Errorf("headroom: %+v", h)
	}
}

func TestSweepFindsSLOMaxClosedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, simConfig())
	cfg := sweepConfig(t, srv, Search{From: Level{Concurrency: 4}, To: Level{Concurrency: 64}})
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, res)
	t.Logf("sweep:\n%s", b.String())
	if res.SLOMax == nil {
		t.Fatal("no SLO-max found")
	}
	// TPOT rises smoothly through the boundary, so a level just below it
	// misses only slightly less often than the 5% allowed, and a level is
	// claimed only when its sample shows it passes at 95% confidence (the
	// simulator's real-time steps also run a little slower than its
	// model): the SLO-max lies at or below the derived c16–c17, never
	// above it, and within 20% of it.
	if c := float64(res.SLOMax.Concurrency); c > derivedConc+1 || c < 0.8*derivedConc {
		t.Errorf("closed-loop SLO-max concurrency %g: want at or below the derived %g (c* lies in [16, 17]) and within 20%% of it", c, derivedConc)
	} else {
		t.Logf("closed-loop SLO-max concurrency: found %g, derived %g (%+.1f%%)", c, derivedConc, 100*(c/derivedConc-1))
	}
	if k := res.Knee; k == nil || k.Concurrency != 4 {
		t.Errorf("knee %+v: want c4 (derived c = D0/d = 4)", k)
	}
}

func TestSweepFindsFixedSlotCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.Mode, cfg.FixedTTFT, cfg.FixedITL, cfg.HTTPThreads = sim.ModeFixed, slotTTFT, slotITL, slotsN
	cfg.TruthLimit = -1
	srv := simtest.Start(t, cfg)
	spec, err := slo.ParseSpec("slo.yaml", []byte(slotsSLO))
	if err != nil {
		t.Fatal(err)
	}
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "sim-llama-8b", MaxTokens: slotTokens})
	if err != nil {
		t.Fatal(err)
	}
	sc := Config{Client: c, SLO: spec, Arrival: loadgen.ArrivalConstant, Seed: 1,
		Search: Search{From: Level{Rate: 20}, To: Level{Rate: 60}, MaxLevels: 10},
		Source: func() loadgen.Source {
			return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hello there"}}
		},
		Warmup: 500 * time.Millisecond, MinDuration: time.Second, MaxDuration: 20 * time.Second,
		Timeout: 10 * time.Second, Grace: 2 * time.Second,
		Out: results.Dir(filepath.Join(t.TempDir(), "sweep"))}
	res, err := Run(context.Background(), sc)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, res)
	t.Logf("sweep:\n%s", b.String())
	if res.SLOMax == nil {
		t.Fatal("no SLO-max found")
	}
	within(t, "fixed 8-slot SLO-max rate", res.SLOMax.RatePerS, slotsDerived, 0.10)
	if len(res.Levels) > 10 {
		t.Errorf("%d levels run, bound 10", len(res.Levels))
	}
}
