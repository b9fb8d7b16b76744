package capacity

// The sweeps against the simulator's model run in a synctest bubble over
// in-memory connections (simtest.StartPipe): the simulator's steps, the
// arrivals and every measured instant are on the bubble's fake clock, so
// the SLO-max and the knee come out of the model exactly, whatever the
// machine's load, and the minutes of load take seconds of CPU.

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
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
	synctest.Test(t, func(t *testing.T) {
		srv := simtest.StartPipe(t, simConfig())
		cfg := sweepConfig(t, srv, Search{From: Level{Rate: 50}, To: Level{Rate: 200}})
		res := runSweep(t, cfg)
		within(t, "open-loop SLO-max rate", res.SLOMax.RatePerS, derivedRate, 0.05)
		if res.MinRequests != 299 { // 0.99²⁹⁹ ≤ 0.05: the 1% error rate is the strictest
			t.Errorf("min requests %d, want 299 to decide a 1%% error rate at 95%%", res.MinRequests)
		}
		top := levelNamed(res, "r200")
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
		got, err := cfg.Out.ReadSweep()
		if err != nil || got.SLOMax == nil || got.SLOMax.Level != res.SLOMax.Level || len(got.Levels) != len(res.Levels) {
			t.Fatalf("sweep.json read back: %v %+v", err, got)
		}
		// The knee is the lower level of the first pair whose slope
		// passes 1, and the model's slope passes 1 at 62.5 req/s: the
		// level below the knee lies under it, the one above over it.
		k := res.Knee
		if k == nil {
			t.Fatal("no knee")
		}
		var rates []float64
		for _, l := range res.Levels {
			if !l.Saturated {
				rates = append(rates, l.RatePerS)
			}
		}
		slices.Sort(rates)
		i := slices.Index(rates, k.RatePerS)
		if i < 0 || i+1 >= len(rates) || rates[i+1] <= derivedKneeRate || (i > 0 && rates[i-1] >= derivedKneeRate) {
			t.Errorf("knee %+v among unsaturated levels %v: want the derived %g req/s between the levels either side of it", k, rates, derivedKneeRate)
		}
		if h := res.Headroom; h == nil || h.MonthsToSLOMax == nil || *h.MonthsToSLOMax <= 0 {
			t.Errorf("headroom: %+v", h)
		}
	})
}

func TestSweepFindsSLOMaxClosedLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		srv := simtest.StartPipe(t, simConfig())
		cfg := sweepConfig(t, srv, Search{From: Level{Concurrency: 4}, To: Level{Concurrency: 64}})
		res := runSweep(t, cfg)
		// c* lies in [16, 17] (see derivedConc), and a level is claimed
		// only when its sample shows it passes at 95% confidence, so a
		// level just under the boundary, which misses only slightly less
		// often than the 5% allowed, may not be: at or below c17 and
		// within 20% of c16.
		if c := float64(res.SLOMax.Concurrency); c > derivedConc+1 || c < 0.8*derivedConc {
			t.Errorf("closed-loop SLO-max concurrency %g: want at or below the derived %g (c* lies in [16, 17]) and within 20%% of it", c, derivedConc)
		} else {
			t.Logf("closed-loop SLO-max concurrency: found %g, derived %g (%+.1f%%)", c, derivedConc, 100*(c/derivedConc-1))
		}
		if k := res.Knee; k == nil || k.Concurrency != 4 {
			t.Errorf("knee %+v: want c4 (derived c = D0/d = 4)", k)
		}
	})
}

func TestSweepFindsFixedSlotCapacity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		cfg := sim.DefaultConfig()
		cfg.Mode, cfg.FixedTTFT, cfg.FixedITL, cfg.HTTPThreads = sim.ModeFixed, slotTTFT, slotITL, slotsN
		cfg.TruthLimit = -1
		srv := simtest.StartPipe(t, cfg)
		spec, err := slo.ParseSpec("slo.yaml", []byte(slotsSLO))
		if err != nil {
			t.Fatal(err)
		}
		sc := Config{Client: simClient(t, srv, slotTokens), SLO: spec, Arrival: loadgen.ArrivalConstant, Seed: 1,
			Search: Search{From: Level{Rate: 20}, To: Level{Rate: 60}, MaxLevels: 10},
			Source: func() loadgen.Source {
				return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hello there"}}
			},
			Warmup: 500 * time.Millisecond, MinDuration: time.Second, MaxDuration: 20 * time.Second,
			Timeout: 10 * time.Second, Grace: 2 * time.Second,
			Out: results.Dir(filepath.Join(t.TempDir(), "sweep"))}
		res := runSweep(t, sc)
		within(t, "fixed 8-slot SLO-max rate", res.SLOMax.RatePerS, slotsDerived, 0.05)
		if len(res.Levels) > 10 {
			t.Errorf("%d levels run, bound 10", len(res.Levels))
		}
	})
}

// runSweep runs cfg, logs its table and fails the test without an
// SLO-max.
func runSweep(t *testing.T, cfg Config) *results.Sweep {
	t.Helper()
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
	return res
}
