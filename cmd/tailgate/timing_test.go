//go:build timing && !race

// Timing tests: held against the simulator's model or its clock, they run
// without the race detector (which slows client and simulator 5-10x, and
// they would measure it), from `make test-timing` (go test -tags timing).

package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tailgate-llm/tailgate/capacity"
	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// Two runs of the same load that differ only in seed show no significant
// change; a simulator 20% slower (every step's cost × 1.2) is a regression
// and exits 1. The three runs go at once, each against its own simulator,
// so whatever else the shared test machine is doing slows them alike:
// run one after another, a build starting between two runs made the
// simulator's real-time steps measurably slower. At 30 req/s of 16-token answers the steps last
// 2 ms / (1 − 30 × 16 × 0.5 ms) = 2.6 ms (capacity/sweep_test.go), slower
// 2.4 ms / (1 − 30 × 16 × 0.6 ms) = 3.4 ms: ITL and TPOT +28%.
func TestCompareSeedAndSlowerSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	fast := simtest.Start(t, capacitySim())
	fast2 := simtest.Start(t, capacitySim())
	slowCfg := capacitySim()
	slowCfg.DecodeBase, slowCfg.DecodePerSeq = slowCfg.DecodeBase*12/10, slowCfg.DecodePerSeq*12/10
	slow := simtest.Start(t, slowCfg)
	dir := t.TempDir()
	var wg sync.WaitGroup
	failed := make([]string, 3)
	run := func(i int, name, target, seed string) string {
		out := filepath.Join(dir, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, _, e := tgCmd("run", "--target", target, "--rate", "30", "--duration", "12s", "--warmup", "1s",
				"--max-tokens", "16", "--seed", seed, "--self-check", "warn", "--metrics-url", "off", "--out", out)
			if code != exitOK {
				failed[i] = fmt.Sprintf("run %s: %d %s", name, code, e)
			}
		}()
		return out
	}
	a := run(0, "a", fast.URL, "1")
	b := run(1, "b", fast2.URL, "2")
	c := run(2, "c", slow.URL, "3")
	wg.Wait()
	for _, f := range failed {
		if f != "" {
			t.Fatal(f)
		}
	}
	verdicts := func(base, cand string) (int, map[string]string, string) {
		t.Helper()
		code, stdout, stderr := tgCmd("compare", base, cand)
		_, js, _ := tgCmd("compare", "--json", base, cand)
		var rep comparison.Report
		if err := json.Unmarshal([]byte(js), &rep); err != nil {
			t.Fatalf("compare --json: %v\n%s\n%s", err, js, stderr)
		}
		v := map[string]string{}
		for _, r := range rep.Rows {
			v[fmt.Sprintf("%s p%g", r.Metric, 100*r.Percentile)] = r.Verdict
		}
		return code, v, stdout
	}
	code, v, table := verdicts(a, b)
	t.Logf("seed only:\n%s", table)
	for row, verdict := range v {
		if verdict != comparison.NoChange && verdict != comparison.NotEnoughData {
			t.Errorf("seed only: %s: %s", row, verdict)
		}
	}
	if code != exitOK || v["itl p50"] != comparison.NoChange || v["e2e p90"] != comparison.NoChange {
		t.Errorf("seed only: exit %d, %v", code, v)
	}
	code, v, table = verdicts(a, c)
	t.Logf("20%% slower:\n%s", table)
	if code != exitFailed {
		t.Errorf("20%% slower: exit %d", code)
	}
	for _, row := range []string{"itl p50", "tpot p50", "e2e p50"} {
		if v[row] != comparison.Regression {
			t.Errorf("20%% slower: %s: %s, want a regression", row, v[row])
		}
	}
	if code, _, e := tgCmd("compare", a); code != exitUsage || !strings.Contains(e, "BASELINE and CANDIDATE") {
		t.Errorf("one argument: %d %s", code, e)
	}
}

func TestSweepCommand(t *testing.T) {
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
	if code != exitOK {
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
	res, err := capacity.Read(results.Dir(out))
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
	if code, _, e := tgCmd(args...); code != exitUsage || !strings.Contains(e, "already holds results") {
		t.Errorf("second sweep: %d %s", code, e)
	}
	// The list above capacity only: no SLO-max, exit 1.
	args = append(args[:len(args)-1], filepath.Join(dir, "o2"))
	args[6] = "200"
	if code, stdout, _ := tgCmd(args...); code != exitFailed || !strings.Contains(stdout, "SLO-max: none") {
		t.Errorf("nothing passes: %d\n%s", code, stdout)
	}
}

// Two sweeps compared whole: against a simulator 20% slower (every step
// × 1.2) the SLO-max moves down, with the interval each search leaves it
// in, and the shared levels regress: exit 1. The same sweep against itself
// shows nothing: exit 0. Derived boundaries (TPOT ≤ 10 ms at p90, 16
// tokens): s = D0/(1 − λ·N·d) ≤ 10 ms while λ ≤ 100 req/s, slower ≤ 79.
func TestCompareSweepCommand(t *testing.T) {
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
	if codeA != exitOK || codeB != exitOK {
		t.Fatalf("sweeps: %d %d\n%s\n%s", codeA, codeB, outA, outB)
	}
	// Which levels pass near a boundary depends on the machine's load
	// (the simulator runs in real time beside the client): the intervals
	// are not pinned, only that the candidate's lies wholly below.
	code, stdout, stderr := tgCmd("compare", a, b)
	if code != exitFailed || !strings.Contains(stdout, "verdict   LOWER: change between -") || !strings.Contains(stdout, "baseline  [") ||
		!strings.Contains(stdout, "candidate [") {
		t.Errorf("20%% slower: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, stdout, stderr := tgCmd("compare", a, a); code != exitOK || !strings.Contains(stdout, "NOT SHOWN TO DIFFER") {
		t.Errorf("the same sweep twice: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := tgCmd("compare", a, filepath.Join(a, "levels", "r50")); code != exitUsage || !strings.Contains(stderr, "is a sweep and") {
		t.Errorf("a sweep against a run: %d %s", code, stderr)
	}
}
