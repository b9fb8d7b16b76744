package capacity

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// A sweep reports joules per output token and the cost per million output
// tokens per level, and they match the simulator's own energy counter and
// the given price within 1%. The simulated board draws nothing idle, so
// its counter grows only while a level keeps it busy: a level's energy is
// the counter's rise from its start to the next level's.
func TestSweepEnergyAndCostPerLevel(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	simCfg := simConfig()
	simCfg.GPUIdleWatts, simCfg.GPUMaxWatts = 0, 300
	srv := simtest.Start(t, simCfg)
	cfg := sweepConfig(t, srv, Search{Levels: []Level{{Rate: 20}, {Rate: 40}}})
	cfg.Warmup, cfg.GPUHourCostUSD = 0, 3.0
	var starts []float64
	cfg.Progress = func(string) pipeline.Progress {
		starts = append(starts, srv.EnergyJoules())
		return nil
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	starts = append(starts, srv.EnergyJoules())
	// A level that was invalid or undecided runs again: every run of a
	// level is a results.SweepLevel, and its start a reading.
	if len(res.Levels) < 2 || len(starts) != len(res.Levels)+1 {
		t.Fatalf("%d levels, %d readings", len(res.Levels), len(starts))
	}
	for i, l := range res.Levels {
		e := l.Energy
		if e == nil || e.JoulesPerOutputToken == nil || e.CostPerMillionOutputTokensUSD == nil {
			t.Fatalf("level %s: energy %+v (%s)", l.Name, e, l.EnergyUnavailable)
		}
		truth := starts[i+1] - starts[i]
		if math.Abs(e.Joules/truth-1) > 0.01 {
			t.Errorf("level %s: %.1f J, the simulator's counter rose %.1f J", l.Name, e.Joules, truth)
		}
		if want := truth / float64(e.OutputTokens); math.Abs(*e.JoulesPerOutputToken/want-1) > 0.01 {
			t.Errorf("level %s: %.4f J/token, want %.4f", l.Name, *e.JoulesPerOutputToken, want)
		}
		want := 3.0 * (e.ToS - e.FromS) / 3600 / float64(e.OutputTokens) * 1e6
		if math.Abs(*e.CostPerMillionOutputTokensUSD/want-1) > 0.01 {
			t.Errorf("level %s: $%.4f per million tokens, want $%.4f", l.Name, *e.CostPerMillionOutputTokensUSD, want)
		}
	}
	if res.SLOMax != nil && res.SLOMax.Energy == nil {
		t.Error("the SLO-max carries no energy")
	}
	var b strings.Builder
	WriteTable(&b, res)
	if !strings.Contains(b.String(), "energy per output token: r20 ") {
		t.Errorf("table:\n%s", b.String())
	}
}
