package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/slo"

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
	if raceEnabled {
		t.Skip("held against the simulator's model: run without -race (make test runs it again without)")
	}
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
	if code, _, e := tgCmd("compare", a); code != slo.ExitUsage || !strings.Contains(e, "BASELINE and CANDIDATE") {
		t.Errorf("one argument: %d %s", code, e)
	}
}
