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

// invalidConfig is a sweep of one level whose every run is INVALID for a
// reason of the run, not the server: its warm-up (100000 requests)
// outlasts the level (MaxDuration 500 ms), so nothing is measured.
func invalidConfig(t *testing.T) Config {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	spec, err := slo.ParseSpec("slo.yaml", []byte(tpotSLO))
	if err != nil {
		t.Fatal(err)
	}
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	return Config{Client: c, SLO: spec, Search: Search{Levels: []Level{{Rate: 20}}}, Arrival: loadgen.ArrivalConstant, Seed: 1,
		Source: func() loadgen.Source {
			return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hi"}}
		},
		WarmupRequests: 100000, MaxDuration: 500 * time.Millisecond, Timeout: 2 * time.Second, Grace: 200 * time.Millisecond,
		Validity: warnOnly(), Out: results.Dir(filepath.Join(t.TempDir(), "sweep"))}
}

// A level INVALID for a reason of the run is said so with its reason (not
// "FAIL"), run again a bounded number of times, and no conclusion about
// the SLO-max is drawn from it.
func TestInvalidLevelIsRerunAndNotAFailure(t *testing.T) {
	var log strings.Builder
	cfg := invalidConfig(t)
	cfg.Log = &log
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Levels) != MaxInvalidAttempts {
		t.Fatalf("%d runs of an invalid level, want %d:\n%s", len(res.Levels), MaxInvalidAttempts, log.String())
	}
	seen := map[string]bool{}
	for _, l := range res.Levels {
		if l.Valid || l.Pass || !strings.HasPrefix(levelLine(&l), "INVALID: ") || !strings.Contains(levelLine(&l), "no_requests") || seen[l.Name] {
			t.Errorf("level %s: valid %v pass %v line %q", l.Name, l.Valid, l.Pass, levelLine(&l))
		}
		seen[l.Name] = true
	}
	w := strings.Join(res.Warnings, "\n")
	if res.SLOMax != nil || strings.Contains(w, "no level met every objective") || !strings.Contains(w, "r20 was INVALID") {
		t.Errorf("SLO-max %+v, warnings:\n%s", res.SLOMax, w)
	}
	var table strings.Builder
	WriteTable(&table, res)
	if !strings.Contains(table.String(), "INVALID (no_requests)") || strings.Contains(table.String(), "FAIL") {
		t.Errorf("table:\n%s", table.String())
	}
}

// Ctrl-C during a level: the level is INVALID (interrupted), it is not run
// again, and no SLO-max conclusion is drawn from it.
func TestInterruptedLevelIsInvalid(t *testing.T) {
	cfg := invalidConfig(t)
	cfg.WarmupRequests, cfg.MaxDuration = 0, 10*time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{}, 1000)
	inner := cfg.Client
	cfg.Client = loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
		started <- struct{}{}
		inner.Do(ctx, p, rec)
	})
	go func() {
		for range 5 {
			<-started
		}
		cancel()
	}()
	res, _ := Run(ctx, cfg)
	if !res.Interrupted || len(res.Levels) != 1 {
		t.Fatalf("interrupted %v, %d levels", res.Interrupted, len(res.Levels))
	}
	l := res.Levels[0]
	if l.Valid || l.Pass || !strings.Contains(levelLine(&l), "interrupted") {
		t.Errorf("level %+v: %s", l, levelLine(&l))
	}
	w := strings.Join(res.Warnings, "\n")
	if res.SLOMax != nil || strings.Contains(w, "below") || !strings.Contains(w, "no conclusion is drawn") {
		t.Errorf("warnings:\n%s", w)
	}
}

// --max-levels stopping a range search before the precision is said.
func TestMaxLevelsStopIsSaid(t *testing.T) {
	f := func(_ context.Context, l Level, _ int) (Outcome, error) {
		return Outcome{Pass: l.Rate <= 50, Score: l.Rate / 50}, nil
	}
	if _, ok, limited, _ := (Search{From: Level{Rate: 10}, To: Level{Rate: 1000}, MaxLevels: 3}).run(context.Background(), f); !ok || !limited {
		t.Errorf("3 levels over 10..1000: ok %v limited %v, want both", ok, limited)
	}
	if _, _, limited, _ := (Search{From: Level{Rate: 10}, To: Level{Rate: 1000}}).run(context.Background(), f); limited {
		t.Error("16 levels reach 5% precision: not limited")
	}
}

// A target that fails every request at the lowest load is broken, not
// saturated: the sweep claims no SLO-max "below" it and exits INVALID (3),
// as run does for the same traffic.
func TestFailingTargetIsBrokenNotSaturated(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 1}}
	srv := simtest.Start(t, cfg)
	spec, err := slo.ParseSpec("slo.yaml", []byte(tpotSLO))
	if err != nil {
		t.Fatal(err)
	}
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), Config{Client: c, SLO: spec, Search: Search{Levels: []Level{{Rate: 20}, {Rate: 40}}},
		Arrival: loadgen.ArrivalConstant, Seed: 1,
		Source: func() loadgen.Source { return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hi"}} },
		Warmup: time.Millisecond, MinDuration: 500 * time.Millisecond, MaxDuration: 2 * time.Second, Timeout: 2 * time.Second,
		Grace: 200 * time.Millisecond, Out: results.Dir(filepath.Join(t.TempDir(), "sweep"))})
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(res.Warnings, "\n")
	if res.SLOMax != nil || res.Broken == "" || strings.Contains(w, "SLO-max is below") {
		t.Errorf("SLO-max %+v, broken %q, warnings:\n%s", res.SLOMax, res.Broken, w)
	}
	if code, why := results.SweepExit(res); code != slo.ExitInvalid || !strings.Contains(why, "failed every request at the lowest load") {
		t.Errorf("exit %d %q, want 3 naming the failing target", code, why)
	}
}
