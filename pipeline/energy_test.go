package pipeline

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// Energy per token against a server whose energy is known: the simulated
// board draws nothing idle and 300 W busy, so its counter grows only while
// the run keeps it busy, and the run's energy is its increase over the
// run. The joules, the tokens of the same window, the joules per token and
// the cost per million tokens at a given GPU-hour price agree with it
// within 1%.
func TestEnergyAgainstTheSimulatorsCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.GPUIdleWatts, cfg.GPUMaxWatts = 0, 300
	srv := simtest.Start(t, cfg)
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: cfg.Model, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	var tokens int64
	count := Func(func(r *loadgen.Record) {
		if r.OK() {
			tokens += int64(r.OutputTokens)
		}
	})
	before := srv.EnergyJoules()
	res, err := Run(context.Background(), Spec{Client: c, Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c", Text: "hi"}},
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: 20, Duration: 3 * time.Second}}, Arrival: loadgen.ArrivalConstant,
			Timeout: 10 * time.Second},
		Telemetry:      &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 200 * time.Millisecond},
		GPUHourCostUSD: 2.5, Validity: slo.Unbounded()}, count)
	if err != nil {
		t.Fatal(err)
	}
	truth := srv.EnergyJoules() - before
	e := res.Summary.Energy["main"]
	if e == nil {
		t.Fatalf("no energy: %q", res.Summary.EnergyUnavailable)
	}
	if e.Source != telemetry.EnergyCounter || e.GPUs != 1 || truth <= 0 || math.Abs(e.Joules/truth-1) > 0.01 {
		t.Fatalf("energy %+v, the simulator's counter rose %.1f J", e.EnergyWindow, truth)
	}
	if e.OutputTokens != tokens || e.JoulesPerOutputToken == nil || math.Abs(*e.JoulesPerOutputToken/(truth/float64(tokens))-1) > 0.01 {
		t.Errorf("%d tokens in the window (%d sent back), %v J/token, want %.4f", e.OutputTokens, tokens, e.JoulesPerOutputToken, truth/float64(tokens))
	}
	hours := (e.ToS - e.FromS) / 3600
	want := 2.5 * hours / float64(tokens) * 1e6
	if e.CostPerMillionOutputTokensUSD == nil || math.Abs(*e.CostPerMillionOutputTokensUSD/want-1) > 0.01 {
		t.Errorf("cost %v $/M tokens, want %.4f", e.CostPerMillionOutputTokensUSD, want)
	}
	// Without an energy source the figures are absent, and the summary
	// says why.
	res, err = Run(context.Background(), Spec{Client: okClient, Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c"}},
		Options:   loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: 20, Duration: time.Second}}},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/nothing"}}, Interval: 200 * time.Millisecond},
		Validity:  slo.Unbounded()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Energy != nil || res.Summary.EnergyUnavailable == "" {
		t.Errorf("no energy source: %+v %q", res.Summary.Energy, res.Summary.EnergyUnavailable)
	}
}
