package main

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// capacitySim steps in 2 ms + 0.5 ms per running sequence, with free prefill:
// 16-token answers saturate it at 1/(16 × 0.5 ms) = 125 req/s (see
// capacity/sweep_test.go for the derivation).
func capacitySim() sim.Config {
	c := sim.DefaultConfig()
	c.PrefillBase, c.PrefillPerToken = 0, 0
	c.DecodeBase, c.DecodePerSeq = 2*time.Millisecond, 500*time.Microsecond
	c.TruthLimit = -1
	return c
}

func TestSweepCommand(t *testing.T) {
	if raceEnabled {
		t.Skip("held against the simulator's model: run without -race (make test runs it again without)")
	}
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, capacitySim())
	dir := t.TempDir()
	sloFile := filepath.Join(dir, "slo.yaml")
	os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"), 0o644)
	out := filepath.Join(dir, "out")
	args := []string{"sweep", "--target", srv.URL, "--slo", sloFile, "--levels", "40,200", "--arrival", "constant",
		"--max-tokens", "16", "--warmup", "200ms", "--min-duration", "1s", "--grace", "1s", "--self-check", "warn",
		"--current-rate", "20", "--forecast-growth", "8%/month", "--change", "CHG-1", "--out", out}
	code, stdout, stderr := tgCmd(args...)
	if code != slo.ExitOK {
		t.Fatalf("sweep: %d\n%s\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"SLO-max: r40", "FAIL saturated", "headroom: 100% headroom", "months"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, stdout)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "report.html")); err != nil {
		t.Errorf("sweep wrote no report.html: %v", err)
	}
	res, err := results.Dir(out).ReadSweep()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Changes) != 1 || res.Changes[0] != "CHG-1" || len(res.Levels) != 2 {
		t.Errorf("sweep.json: changes %v, %d levels", res.Changes, len(res.Levels))
	}
	s, err := results.Dir(out).Level("r40").ReadSummary()
	if err != nil || s.SLO == nil || len(s.Changes) != 1 {
		t.Fatalf("level summary: %v %+v", err, s)
	}
	// Again without --force: refused.
	if code, _, e := tgCmd(args...); code != slo.ExitUsage || !strings.Contains(e, "already holds results") {
		t.Errorf("second sweep: %d %s", code, e)
	}
	// The list above capacity only: no SLO-max, exit 1.
	args = append(args[:len(args)-1], filepath.Join(dir, "o2"))
	args[6] = "200"
	if code, stdout, _ := tgCmd(args...); code != slo.ExitFailed || !strings.Contains(stdout, "SLO-max: none") {
		t.Errorf("nothing passes: %d\n%s", code, stdout)
	}
}

func TestSweepUsage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sweep", "--from", "5", "--to", "10"}, "--slo and --out are required"},
		{[]string{"sweep", "--slo", "x", "--out", "y"}, "give a range"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--from", "c4", "--to", "10"}, "both rates or both concurrencies"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--levels", "c4,10"}, "mix rates and concurrencies"},
		{[]string{"sweep", "--slo", "x", "--out", "y", "--levels", "5", "--forecast-growth", "8%/month"}, "needs --current-rate"},
	} {
		code, _, e := tgCmd(c.args...)
		if code != slo.ExitUsage || !strings.Contains(e, c.want) {
			t.Errorf("%v: %d %q, want usage error %q", c.args, code, e, c.want)
		}
	}
}

// Two sweeps compared whole: against a simulator 20% slower (every step
// × 1.2) the SLO-max moves down, with the interval each search leaves it
// in, and the shared levels regress: exit 1. The same sweep against itself
// shows nothing: exit 0. Derived boundaries (TPOT ≤ 10 ms at p90, 16
// tokens): s = D0/(1 − λ·N·d) ≤ 10 ms while λ ≤ 100 req/s, slower ≤ 79.
func TestCompareSweepCommand(t *testing.T) {
	if raceEnabled {
		t.Skip("held against the simulator's model: run without -race (make test runs it again without)")
	}
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	fast := simtest.Start(t, capacitySim())
	slowCfg := capacitySim()
	slowCfg.DecodeBase, slowCfg.DecodePerSeq = slowCfg.DecodeBase*12/10, slowCfg.DecodePerSeq*12/10
	slow := simtest.Start(t, slowCfg)
	dir := t.TempDir()
	sloFile := filepath.Join(dir, "slo.yaml")
	os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"), 0o644)
	sweep := func(target, out string) (int, string) {
		code, stdout, stderr := tgCmd("sweep", "--target", target, "--slo", sloFile, "--levels", "50,70,90,110", "--arrival", "constant",
			"--max-tokens", "16", "--warmup", "200ms", "--min-duration", "1s", "--grace", "1s", "--self-check", "warn", "--out", out)
		return code, stdout + stderr
	}
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	var wg sync.WaitGroup
	var codeA, codeB int
	var outA, outB string
	wg.Add(2)
	go func() { defer wg.Done(); codeA, outA = sweep(fast.URL, a) }()
	go func() { defer wg.Done(); codeB, outB = sweep(slow.URL, b) }()
	wg.Wait()
	if codeA != slo.ExitOK || codeB != slo.ExitOK {
		t.Fatalf("sweeps: %d %d\n%s\n%s", codeA, codeB, outA, outB)
	}
	// Which levels pass near a boundary depends on the machine's load
	// (the simulator runs in real time beside the client): the intervals
	// are not pinned, only that the candidate's lies wholly below.
	code, stdout, stderr := tgCmd("compare", a, b)
	if code != slo.ExitFailed || !strings.Contains(stdout, "verdict   LOWER: change between -") || !strings.Contains(stdout, "baseline  [") ||
		!strings.Contains(stdout, "candidate [") {
		t.Errorf("20%% slower: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := tgCmd("compare", a, a); code != slo.ExitOK || !strings.Contains(stdout, "NOT SHOWN TO DIFFER") {
		t.Errorf("the same sweep twice: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := tgCmd("compare", a, filepath.Join(a, "levels", "r50")); code != slo.ExitUsage || !strings.Contains(stderr, "is a sweep and") {
		t.Errorf("a sweep against a run: %d %s", code, stderr)
	}
}
