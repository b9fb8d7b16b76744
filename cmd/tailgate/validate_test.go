package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// vSLO's targets are ones a few seconds of load decide at 95% confidence
// (0.5¹⁰ = 0.001: ten requests without a miss pass 50%); a 99% target
// would need 299 requests and be INCONCLUSIVE here.
const vSLO = `kind: SLO
name: t
owner: team
objectives:
  - {name: ttft, metric: ttft, threshold: 2s, target: 50%}
  - {name: errors, metric: error_rate, threshold: 50%}
  - {name: itl, metric: itl, threshold: ITL, target: 50%}
`

func vPlan(target, mix string, manual bool) string {
	p := "kind: Plan\nname: t\ntarget: " + target + "\nmodel: sim-llama-8b\nslo: slo.yaml\nmix: " + mix + "\nseed: 3\nstages:\n" +
		"  - {name: normal, rate: 5, duration: 2s}\n  - {name: peak, rate: 10, duration: 2s, objectives: [ttft, errors]}\n"
	if manual {
		p += "  - {name: failover, manual: true}\n"
	}
	return p
}

func writePlan(t *testing.T, target, itl string, manual bool) string {
	t.Helper()
	mix, err := filepath.Abs("../../testdata/mixes/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "slo.yaml"), []byte(strings.Replace(vSLO, "ITL", itl, 1)), 0o644)
	p := filepath.Join(dir, "plan.yaml")
	os.WriteFile(p, []byte(vPlan(target, mix, manual)), 0o644)
	return p
}

func TestValidateEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.DefaultConfig())

	// Lenient ITL, manual stage pending: exit 1; recorded as passed: exit 0.
	plan := writePlan(t, srv.URL, "1s", true)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := tgCmd("validate", "--plan", plan, "--out", out, "--self-check", "warn")
	if code != exitFailed || !strings.Contains(stdout, "PENDING") {
		t.Fatalf("pending manual stage: %d\n%s\n%s", code, stdout, stderr)
	}
	for _, f := range []string{"verdict.json", "junit.xml", "manifest.json", "environment.json",
		"inputs/plan-plan.yaml", "inputs/slo-slo.yaml", "inputs/mix-chat.yaml", "inputs/mix.canonical.json",
		"stages/normal/summary.json", "stages/peak/latency.hlog", "stages/normal/requests.jsonl", "stages/peak/requests.jsonl"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("evidence lacks %s", f)
		}
	}
	// The records are written once, per stage: no plan-wide copy.
	if _, err := os.Stat(filepath.Join(out, "requests.jsonl")); !os.IsNotExist(err) {
		t.Errorf("a plan-wide requests.jsonl beside the stages' (%v)", err)
	}
	if code, _, stderr := tgCmd("validate", "--plan", plan, "--out", out, "--record", "failover=pass"); code != exitUsage || !strings.Contains(stderr, "--by") {
		t.Fatalf("--record without --by: %d %s", code, stderr)
	}
	code, stdout, stderr = tgCmd("validate", "--plan", plan, "--out", out, "--record", "failover=pass", "--by", "carol")
	if code != exitOK || !strings.Contains(stdout, "recorded by carol") {
		t.Fatalf("recorded: %d\n%s\n%s", code, stdout, stderr)
	}
	// check on the saved results gives the same verdict.
	sloFile := filepath.Join(filepath.Dir(plan), "slo.yaml")
	if code, stdout, _ := tgCmd("check", "--slo", sloFile, out); code != exitOK {
		t.Fatalf("check: %d\n%s", code, stdout)
	}
	// Sign, verify, tamper.
	key := filepath.Join(t.TempDir(), "k.pem")
	tgCmd("sign", "--keygen", "--key", key)
	if code, _, e := tgCmd("sign", "--key", key, out); code != exitOK {
		t.Fatalf("sign: %s", e)
	}
	pub := strings.TrimSuffix(key, ".pem") + ".pub"
	if code, _, e := tgCmd("verify", "--pub", pub, out); code != exitOK {
		t.Fatalf("verify: %s", e)
	}
	peak := filepath.Join(out, "stages", "peak", "requests.jsonl")
	b, _ := os.ReadFile(peak)
	b[len(b)/2] ^= 1
	os.WriteFile(peak, b, 0o644)
	if code, _, e := tgCmd("verify", "--pub", pub, out); code != exitFailed || !strings.Contains(e, "stages/peak/requests.jsonl: modified") {
		t.Fatalf("tampered: %d %s", code, e)
	}

	// A strict ITL objective fails: exit 1; results already there: exit 2.
	strict := writePlan(t, srv.URL, "1us", false)
	if code, stdout, _ := tgCmd("validate", "--plan", strict, "--out", out, "--self-check", "warn"); code != exitUsage {
		t.Fatalf("existing results: %d %s", code, stdout)
	}
	code, stdout, _ = tgCmd("validate", "--plan", strict, "--out", out, "--force", "--self-check", "warn")
	if code != exitFailed || !strings.Contains(stdout, "FAIL (exit 1)") {
		t.Fatalf("strict: %d\n%s", code, stdout)
	}

	// Nothing listening: exit 3 from the preflight, before any stage.
	down := writePlan(t, "http://127.0.0.1:1", "1s", false)
	t0 := time.Now()
	if code, _, e := tgCmd("validate", "--plan", down, "--out", filepath.Join(t.TempDir(), "o")); code != exitInvalid || !strings.Contains(e, "does not answer") || strings.Contains(e, "stage ") {
		t.Fatalf("unreachable: %d\n%s", code, e)
	}
	if el := time.Since(t0); el > 10*time.Second {
		t.Errorf("unreachable target took %s to report", el)
	}
	// A broken plan: exit 2 with file and line.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte("kind: Plan\nname: x\nstages: [{name: a, rate: 5, duration: 3 minutes}]\n"), 0o644)
	if code, _, e := tgCmd("validate", "--plan", bad, "--out", t.TempDir()); code != exitUsage || !strings.Contains(e, "bad.yaml:3: stages[0].duration") {
		t.Fatalf("bad plan: %d %s", code, e)
	}
}
