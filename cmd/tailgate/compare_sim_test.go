package main

// Commands against simulators in a synctest bubble (inBubble): exact on the
// fake clock, whatever the machine's load.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// Two runs of the same load that differ only in seed show no significant
// change; a simulator 20% slower (every step's cost × 1.2) is a regression
// and exits 1. The runs go in a synctest bubble (inBubble), where the
// simulators' steps are exact on the fake clock. At 30 req/s of 16-token answers the steps last
// 2 ms / (1 − 30 × 16 × 0.5 ms) = 2.6 ms (capacity/sweep_test.go), slower
// 2.4 ms / (1 − 30 × 16 × 0.6 ms) = 3.4 ms: ITL and TPOT +28%.
func TestCompareSeedAndSlowerSimulator(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	slowCfg := capacitySim()
	slowCfg.DecodeBase, slowCfg.DecodePerSeq = slowCfg.DecodeBase*12/10, slowCfg.DecodePerSeq*12/10
	inBubble(t, map[string]sim.Config{"fast": capacitySim(), "fast2": capacitySim(), "slow": slowCfg}, func(t *testing.T, sims map[string]*simtest.Server, bctx context.Context) {
		fast, fast2, slow := sims["fast"], sims["fast2"], sims["slow"]
		dir := t.TempDir()
		var wg sync.WaitGroup
		failed := make([]string, 3)
		run := func(i int, name, target, seed string) string {
			out := filepath.Join(dir, name)
			wg.Add(1)
			go func() {
				defer wg.Done()
				code, _, e := tgCmdCtx(bctx, "run", "--target", target, "--rate", "30", "--duration", "12s", "--warmup", "1s",
					"--max-tokens", "16", "--seed", seed, "--self-check", "warn", "--metrics-url", "off", "--out", out)
				if code != slo.ExitOK {
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
			code, stdout, stderr := tgCmdCtx(bctx, "compare", base, cand)
			_, js, _ := tgCmdCtx(bctx, "compare", "--json", base, cand)
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
		if code != slo.ExitOK || v["itl p50"] != comparison.NoChange || v["e2e p90"] != comparison.NoChange {
			t.Errorf("seed only: exit %d, %v", code, v)
		}
		code, v, table = verdicts(a, c)
		t.Logf("20%% slower:\n%s", table)
		if code != slo.ExitFailed {
			t.Errorf("20%% slower: exit %d", code)
		}
		for _, row := range []string{"itl p50", "tpot p50", "e2e p50"} {
			if v[row] != comparison.Regression {
				t.Errorf("20%% slower: %s: %s, want a regression", row, v[row])
			}
		}
		if code, _, e := tgCmdCtx(bctx, "compare", a); code != slo.ExitUsage || !strings.Contains(e, "BASELINE and CANDIDATE") {
			t.Errorf("one argument: %d %s", code, e)
		}
	})
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
	slowCfg := capacitySim()
	slowCfg.DecodeBase, slowCfg.DecodePerSeq = slowCfg.DecodeBase*12/10, slowCfg.DecodePerSeq*12/10
	inBubble(t, map[string]sim.Config{"fast": capacitySim(), "slow": slowCfg}, func(t *testing.T, sims map[string]*simtest.Server, bctx context.Context) {
		fast, slow := sims["fast"], sims["slow"]
		dir := t.TempDir()
		sloFile := filepath.Join(dir, "slo.yaml")
		os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"), 0o644)
		sweep := func(target, out string) (int, string) {
			code, stdout, stderr := tgCmdCtx(bctx, "sweep", "--target", target, "--slo", sloFile, "--levels", "50,70,90,110", "--arrival", "constant",
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
		// The intervals are not pinned, only that the candidate's lies wholly
		// below.
		code, stdout, stderr := tgCmdCtx(bctx, "compare", a, b)
		if code != slo.ExitFailed || !strings.Contains(stdout, "verdict   LOWER: change between -") || !strings.Contains(stdout, "baseline  [") ||
			!strings.Contains(stdout, "candidate [") {
			t.Errorf("20%% slower: exit %d\n%s%s", code, stdout, stderr)
		}
		if code, stdout, stderr := tgCmdCtx(bctx, "compare", a, a); code != slo.ExitOK || !strings.Contains(stdout, "NOT SHOWN TO DIFFER") {
			t.Errorf("the same sweep twice: exit %d\n%s%s", code, stdout, stderr)
		}
		if code, _, stderr := tgCmdCtx(bctx, "compare", a, filepath.Join(a, "levels", "r50")); code != slo.ExitUsage || !strings.Contains(stderr, "is a sweep and") {
			t.Errorf("a sweep against a run: %d %s", code, stderr)
		}
	})
}
