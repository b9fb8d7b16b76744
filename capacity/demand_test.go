package capacity

// Floors against demand, lower bounds and interruption, against the
// simulator on the fake clock (see sweep_synctest_test.go).

import (
	"context"
	"errors"
	"fmt"
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

// chatLikeSLO holds testdata/slo/chat.yaml's two floors beside latency
// objectives the batching simulator of sweep_test.go meets far above 2
// req/s: at 2 req/s × 16 tokens no server reaches 300 tok/s.
const chatLikeSLO = `kind: SLO
name: chat-like
owner: capacity
goodput: {tpot: 10ms}
objectives:
  - {name: tpot, metric: tpot, threshold: 10ms, target: 95%}
  - {name: errors, metric: error_rate, threshold: 1%}
  - {name: output-tokens, metric: output_tokens_per_s, threshold: 300}
  - {name: goodput, metric: goodput_per_s, threshold: 2}
`

func specOf(t *testing.T, y string) *slo.Spec {
	t.Helper()
	s, err := slo.ParseSpec("slo.yaml", []byte(y))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func table(r *results.Sweep) string {
	var b strings.Builder
	WriteTable(&b, r)
	return b.String()
}

func verdictNamed(l *results.SweepLevel, name string) slo.Verdict {
	for _, v := range l.Verdicts {
		if v.Objective == name {
			return v
		}
	}
	return slo.Verdict{}
}

func TestSweepFloorsBeyondDemandAreNotApplicable(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		srv := simtest.StartPipe(t, simConfig())
		cfg := sweepConfig(t, srv, Search{Levels: []Level{{Rate: 2}, {Rate: 40}, {Rate: 200}}})
		cfg.SLO, cfg.CurrentRate, cfg.Growth = specOf(t, chatLikeSLO), 0, nil
		cfg.MaxDuration = 200 * time.Second // r2 measures 299 requests in 164 s
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		out := table(res)
		t.Logf("sweep:\n%s", out)
		r2 := levelNamed(res, "r2")
		if !r2.Pass || !slices.Contains(r2.NotApplicable, "output-tokens") {
			t.Fatalf("r2: pass %v, N/A %v: want PASS with output-tokens N/A", r2.Pass, r2.NotApplicable)
		}
		v := verdictNamed(r2, "output-tokens")
		if v.Status != slo.NotApplicable || !strings.Contains(v.Note, "× max 16 tokens can reach at most 32.1 tok/s") {
			t.Errorf("r2 output-tokens: %s %q", v.Status, v.Note)
		}
		// 329 requests offered over the 164 s window can show 2.006/s:
		// in reach, so judged (and met: the server serves them all).
		if g := verdictNamed(r2, "goodput"); g.Status != slo.Pass || g.ReachablePerS < 2 {
			t.Errorf("r2 goodput: %s reach %g %q: want judged and PASS", g.Status, g.ReachablePerS, g.Note)
		}
		for _, o := range []string{"tpot", "errors"} {
			if s := verdictNamed(r2, o).Status; s != slo.Pass {
				t.Errorf("r2 %s: %s, want PASS (floors never stand in for latency)", o, s)
			}
		}
		// At 40 req/s the floors are in reach, judged, and met.
		r40 := levelNamed(res, "r40")
		if !r40.Pass || len(r40.NotApplicable) != 0 || verdictNamed(r40, "output-tokens").Status != slo.Pass {
			t.Errorf("r40: pass %v N/A %v tokens %s", r40.Pass, r40.NotApplicable, verdictNamed(r40, "output-tokens").Status)
		}
		if res.SLOMax == nil || res.SLOMax.Level != "r40" || res.LowerBound {
			t.Fatalf("SLO-max %+v lower bound %v: want r40, bounded by the saturated r200", res.SLOMax, res.LowerBound)
		}
		for _, want := range []string{"SLO-max: r40 (", "PASS (1 N/A)", "floors out of reach of the offered load are N/A"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		if strings.Contains(out, "not monotone") || strings.Contains(out, "below r2") {
			t.Errorf("table blames the floors:\n%s", out)
		}
		// Without a demand (a closed loop offers what the server serves)
		// the same floors apply: the level's verdict.json agrees with the
		// sweep, since both come from the pipeline's judge.
		got, err := cfg.Out.Level("r2").ReadSummary()
		if err != nil || got.SLO == nil {
			t.Fatalf("r2 summary: %v", err)
		}
	})
}

// A sweep whose every level passed has found a lower bound, and says so.
func TestSweepEveryLevelPassedIsALowerBound(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		srv := simtest.StartPipe(t, simConfig())
		cfg := sweepConfig(t, srv, Search{From: Level{Rate: 20}, To: Level{Rate: 60}})
		cfg.MaxDuration = 30 * time.Second
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		out := table(res)
		t.Logf("sweep:\n%s", out)
		if res.SLOMax == nil || res.SLOMax.Level != "r60" || !res.LowerBound || !res.SLOMax.LowerBound {
			t.Fatalf("SLO-max %+v lower bound %v: want r60 as a lower bound", res.SLOMax, res.LowerBound)
		}
		if len(res.Levels) != 2 {
			t.Errorf("%d levels: the top passed, nothing is left to search", len(res.Levels))
		}
		for _, want := range []string{"SLO-max ≥ r60 (", "went up to the top of the range and no level failed", "headroom: at least 50% headroom", "in at least"} {
			if !strings.Contains(out, want) {
				t.Errorf("table lacks %q", want)
			}
		}
		back, err := cfg.Out.ReadSweep()
		if err != nil || !back.LowerBound || back.Headroom == nil || !back.Headroom.LowerBound {
			t.Errorf("sweep.json: %v lower_bound %v headroom %+v", err, back != nil && back.LowerBound, back.Headroom)
		}
	})
}

// The 8-slot server of slots_test.go with 32-token answers (102 ms to the
// first, 3 ms each after: 195 ms a request), levels 2, 4, 8, 16 well below
// its 41 req/s, an E2E objective and a 300 tok/s floor: only r16 (16 × 32
// = 512 tok/s) can reach the floor. Every level passes what applies: no
// FAIL, no "not monotone" advice, and the SLO-max is a lower bound.
func TestSweepFloorAtLowLevelsIsNotNonMonotone(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		sc := sim.DefaultConfig()
		sc.Mode, sc.FixedTTFT, sc.FixedITL, sc.HTTPThreads = sim.ModeFixed, 102*time.Millisecond, 3*time.Millisecond, slotsN
		sc.TruthLimit = -1
		srv := simtest.StartPipe(t, sc)
		spec := specOf(t, slotsSLO+"  - {name: output-tokens, metric: output_tokens_per_s, threshold: 300}\n")
		ls, _ := ParseLevels("2,4,8,16")
		cfg := Config{Client: simClient(t, srv, 32), SLO: spec, Arrival: loadgen.ArrivalConstant, Seed: 1, Search: Search{Levels: ls},
			Source: func() loadgen.Source {
				return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hello there"}}
			},
			Warmup: 500 * time.Millisecond, MinDuration: time.Second, MaxDuration: 200 * time.Second,
			Timeout: 10 * time.Second, Grace: 2 * time.Second, Validity: warnOnly(),
			Out: results.Dir(filepath.Join(t.TempDir(), "sweep"))}
		res, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		out := table(res)
		t.Logf("sweep:\n%s", out)
		for _, name := range []string{"r2", "r4", "r8"} {
			l := levelNamed(res, name)
			if !l.Pass || !slices.Contains(l.NotApplicable, "output-tokens") {
				t.Errorf("%s: pass %v N/A %v, want PASS with the floor N/A", name, l.Pass, l.NotApplicable)
			}
		}
		if l := levelNamed(res, "r16"); !l.Pass || verdictNamed(l, "output-tokens").Status != slo.Pass {
			t.Errorf("r16: pass %v floor %s, want the floor judged and met", l.Pass, verdictNamed(l, "output-tokens").Status)
		}
		for _, l := range res.Levels {
			if !l.Pass {
				t.Errorf("%s failed", l.Name)
			}
		}
		if strings.Contains(out, "not monotone") {
			t.Errorf("wrong advice:\n%s", out)
		}
		if res.SLOMax == nil || res.SLOMax.Level != "r16" || !res.LowerBound || !strings.Contains(out, "SLO-max ≥ r16 (") {
			t.Errorf("SLO-max %+v lower bound %v, want ≥ r16", res.SLOMax, res.LowerBound)
		}
	})
}

// An interrupted sweep says which level it cut and what it kept, keeps
// the completed levels in sweep.json, and still reads as a cancellation.
func TestSweepInterruptedSaysWhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	synctest.Test(t, func(t *testing.T) {
		srv := simtest.StartPipe(t, simConfig())
		cfg := sweepConfig(t, srv, Search{Levels: []Level{{Rate: 40}, {Rate: 50}}})
		cfg.CurrentRate, cfg.Growth = 0, nil
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		// r40 lasts 0.5 s warm-up + 1.1 × 299 / 40 = 8.2 s measured, plus
		// the tail: 13 s lands inside r50.
		time.AfterFunc(13*time.Second, cancel)
		res, err := Run(ctx, cfg)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v: want one that is context.Canceled", err)
		}
		msg := err.Error()
		want := fmt.Sprintf("sweep interrupted during level r50 (1 of 2 levels run completed): 1 completed level(s) and the interrupted one are in %s", cfg.Out.Path(results.SweepFile))
		if !strings.HasPrefix(msg, want) {
			t.Errorf("message %q\nwant it to begin %q", msg, want)
		}
		if res == nil || !res.Interrupted {
			t.Fatalf("result %+v: want interrupted", res)
		}
		back, rerr := cfg.Out.ReadSweep()
		if rerr != nil || !back.Interrupted || len(back.Levels) != 2 || !back.Levels[0].Valid || back.Levels[0].Name != "r40" || back.Levels[1].Valid {
			t.Fatalf("sweep.json: %v %+v", rerr, back)
		}
		if back.SLOMax == nil || back.SLOMax.Level != "r40" || !back.LowerBound || !strings.Contains(back.SLOMax.Note, "interrupted") {
			t.Errorf("SLO-max after the interruption: %+v lower bound %v: want ≥ r40, said as cut short", back.SLOMax, back.LowerBound)
		}
	})
}

// A level failing only on floors below every pass is too little demand:
// a list goes on, a range looks higher, and no "not monotone" advice.
func TestSearchReadsFloorsOnlyAsLowDemand(t *testing.T) {
	f := func(_ context.Context, l Level, _ int) (Outcome, error) {
		switch {
		case l.Rate < 8:
			return Outcome{FloorsOnly: true}, nil
		case l.Rate <= 30:
			return Outcome{Pass: true, Score: l.Rate / 40}, nil
		}
		return Outcome{Score: l.Rate / 40}, nil
	}
	ls, _ := ParseLevels("2,4,8,16,64")
	best, ok, _, _ := Search{Levels: ls}.run(context.Background(), f)
	if !ok || best.Rate != 16 {
		t.Errorf("list: best %v %v, want r16", best, ok)
	}
	best, ok, _, _ = Search{From: Level{Rate: 2}, To: Level{Rate: 64}, Precision: 0.05}.run(context.Background(), f)
	if !ok || best.Rate > 30 || best.Rate < 30/1.05 {
		t.Errorf("range: best %v %v, want within 5%% below r30", best, ok)
	}
	lv := func(name string, rate float64, pass, floors bool) results.SweepLevel {
		return results.SweepLevel{Name: name, RatePerS: rate, Pass: pass, FloorsOnly: floors, Valid: true}
	}
	if w := monotoneWarnings([]results.SweepLevel{lv("r2", 2, false, true), lv("r16", 16, true, false)}); len(w) != 0 {
		t.Errorf("floors-only r2 below a pass: %v", w)
	}
	if w := monotoneWarnings([]results.SweepLevel{lv("r2", 2, false, false), lv("r16", 16, true, false)}); len(w) != 1 {
		t.Errorf("a latency failure below a pass: %v, want the advice", w)
	}
	// Above a pass, a floors-only failure is a failure.
	g := func(_ context.Context, l Level, _ int) (Outcome, error) {
		return Outcome{Pass: l.Rate <= 8, FloorsOnly: l.Rate > 8}, nil
	}
	if best, ok, _, _ := (Search{Levels: ls}).run(context.Background(), g); !ok || best.Rate != 8 {
		t.Errorf("floors failing above a pass: best %v %v, want r8", best, ok)
	}
}
