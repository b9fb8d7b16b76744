package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/slo"
)

// Nothing is decided from nothing: a run that sent no request
// (--duration 1ns) with an SLO is INVALID, exit 3, in run, check of its
// directory, validate and merge alike, and its latency table names the
// metrics with no sample instead of printing zeros.
func TestNoRequestIsNeverPass(t *testing.T) {
	if testing.Short() {
		t.Skip("runs against the simulator")
	}
	srv := fastSim(t)
	base := t.TempDir()
	sloFile, err := filepath.Abs("../../testdata/slo/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mix, _ := filepath.Abs("../../testdata/mixes/chat.yaml")
	load := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "5", "--duration", "1ns",
		"--metrics-url", "off", "--nvml", "off", "--slo", sloFile}

	runDir := filepath.Join(base, "run")
	code, stdout, stderr := runCmd(t, append(load, "--out", runDir)...)
	if code != slo.ExitInvalid || !strings.Contains(stdout, "Result: INVALID (exit 3)") {
		t.Errorf("run: exit %d, want %d (INVALID)\n%s\n%s", code, slo.ExitInvalid, stdout, stderr)
	}
	if !strings.Contains(stdout, "no sample: ttft, icl, itl, tpot, e2e, schedule_lag") {
		t.Errorf("run's table does not name the metrics with no sample:\n%s", stdout)
	}
	for _, line := range strings.Split(stdout, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[0] == "ttft" && f[1] == "0" {
			t.Errorf("a row of zeros for a metric with no sample: %q", line)
		}
	}
	if c, out, errOut := tgCmd("check", "--slo", sloFile, runDir); c != slo.ExitInvalid {
		t.Errorf("check of the run: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, out, errOut)
	}

	shard := filepath.Join(base, "shard")
	start := time.Now().Add(100 * time.Millisecond).UTC().Format(time.RFC3339Nano)
	if c, out, errOut := runCmd(t, append(load, "--out", shard, "--shard", "0/1", "--start-at", start)...); c != slo.ExitInvalid {
		t.Errorf("shard run: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, out, errOut)
	}
	merged := filepath.Join(base, "merged")
	if c, out, errOut := tgCmd("merge", "--slo", sloFile, "--out", merged, shard); c != slo.ExitInvalid {
		t.Errorf("merge: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, out, errOut)
	}

	plan := filepath.Join(base, "plan.yaml")
	os.WriteFile(plan, []byte("kind: Plan\nname: p\ntarget: "+srv.URL+"\nmodel: sim-llama-8b\nslo: "+sloFile+"\nmix: "+mix+
		"\nstages:\n  - {name: main, rate: 5, duration: 1ns}\n"), 0o644)
	valDir := filepath.Join(base, "validate")
	if c, out, errOut := tgCmd("validate", "--plan", plan, "--out", valDir, "--metrics-url", "off", "--nvml", "off", "--self-check", "warn"); c != slo.ExitInvalid {
		t.Errorf("validate: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, out, errOut)
	}
	if c, out, errOut := tgCmd("check", "--slo", sloFile, valDir); c != slo.ExitInvalid {
		t.Errorf("check of the validate: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, out, errOut)
	}
}
