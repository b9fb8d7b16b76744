package comparison

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// records makes n streamed requests of 8 tokens whose step (ITL) is drawn
// lognormal around stepMs × scale, TTFT around 3 steps.
func records(n int, seed uint64, scale float64) []loadgen.Record {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]loadgen.Record, n)
	for i := range out {
		r := &out[i]
		r.Stage, r.Class, r.Intended = "main", "chat", time.Duration(i)*10*time.Millisecond
		r.Sent = r.Intended
		t := r.Intended + time.Duration(scale*3e6*(0.8+0.4*rng.Float64()))
		for k := 0; k < 8; k++ {
			r.Chunks = append(r.Chunks, loadgen.Chunk{At: t, Tokens: 1})
			t += time.Duration(scale * 1e6 * (0.7 + 0.6*rng.Float64()))
		}
		r.End, r.OutputTokens = t, 8
	}
	return out
}

func side(dir string, recs []loadgen.Record) *Side {
	s := &Side{Dir: dir, Stages: map[string][]loadgen.Record{"main": recs}, Order: []string{"main"},
		Load:    map[string]Load{"main": {Mode: "open", Arrival: "poisson", OfferedPerS: 100}},
		Classes: map[string]map[string]int{"main": {"chat": len(recs)}}}
	return s
}

func TestSameDistributionNoChangeSlowerRegression(t *testing.T) {
	base := side("a", records(800, 1, 1))
	// Ten candidates drawn from the same distribution: with simultaneous
	// 95% intervals over 12 rows, none should show a change (a flaky
	// failure here would be a 5%-per-comparison event happening often).
	for seed := uint64(2); seed < 12; seed++ {
		rep, err := Compare(base, side("b", records(800, seed, 1)), Options{Tolerance: 0.05, Resamples: 1000, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Regressions+rep.Improvements > 0 || rep.ExitCode != 0 {
			var b strings.Builder
			WriteTable(&b, rep)
			t.Errorf("seed %d, same distribution:\n%s", seed, b.String())
		}
	}
	slow := side("b", records(800, 99, 1.2))
	slow.Changes = []string{"CHG-42"}
	rep, err := Compare(base, slow, Options{Tolerance: 0.05, Resamples: 1000})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteTable(&b, rep)
	if !strings.Contains(b.String(), "candidate: b (800 requests), changes CHG-42") {
		t.Errorf("the table does not pin the change:\n%s", b.String())
	}
	if rep.ExitCode != 1 || rep.Regressions < 6 {
		t.Errorf("20%% slower, want regressions beyond 5%%:\n%s", b.String())
	}
	for _, r := range rep.Rows {
		if r.Verdict == Regression && (r.CILowPct > 20 || r.CIHighPct < 20) && r.Percentile == 0.5 {
			t.Errorf("%s p50: interval [%.1f, %.1f] misses the true +20%%", r.Metric, r.CILowPct, r.CIHighPct)
		}
	}
	// More offered load: demand, not regression; no gate.
	c := side("b", records(800, 99, 1.2))
	c.Load["main"] = Load{Mode: "open", Arrival: "poisson", OfferedPerS: 130}
	rep, _ = Compare(base, c, Options{Tolerance: 0.05, Resamples: 500})
	if rep.ExitCode != 0 || len(rep.Demand) != 1 || !strings.Contains(rep.Demand[0], "offered 100 vs 130") {
		t.Errorf("demand change: exit %d, %v", rep.ExitCode, rep.Demand)
	}
	// A different mix is refused, unless forced.
	c.Classes["main"] = map[string]int{"rag": 800}
	if _, err := Compare(base, c, Options{}); err == nil || !strings.Contains(err.Error(), "request classes differ") {
		t.Errorf("different classes: %v", err)
	}
	if _, err := Compare(base, c, Options{Force: true, Resamples: 100}); err != nil {
		t.Errorf("forced: %v", err)
	}
	// Evidence packs of different plans are refused by hash.
	p1, p2 := side("a", records(100, 1, 1)), side("b", records(100, 2, 1))
	p1.PlanHash, p2.PlanHash = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"
	if _, err := Compare(p1, p2, Options{}); err == nil || !strings.Contains(err.Error(), "plans differ (sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb)") {
		t.Errorf("different plans: %v", err)
	}
	// A schedule of other rates is demand change, whatever was realized.
	p2.PlanHash = p1.PlanHash
	p1.Load["main"] = Load{Mode: "open", Arrival: "poisson", Levels: "10,50", OfferedPerS: 30}
	p2.Load["main"] = Load{Mode: "open", Arrival: "poisson", Levels: "10,80", OfferedPerS: 30}
	if rep, _ := Compare(p1, p2, Options{Resamples: 100}); len(rep.Demand) != 1 || !strings.Contains(rep.Demand[0], "rates 10,50 vs 10,80") {
		t.Errorf("demand: %v", rep.Demand)
	}
}
