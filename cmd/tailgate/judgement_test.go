package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/slo"
)

// lenientSLO passes a server that fails one request in five: the run's
// validity (5% errors by default) decides, not an objective.
const lenientSLO = "kind: SLO\nname: lenient\nowner: team\nobjectives:\n" +
	"  - {name: ttft, metric: ttft, threshold: 5s, target: 50%}\n" +
	"  - {name: errors, metric: error_rate, threshold: 50%}\n"

// One judgement: the same faulted traffic (20% HTTP 503) gets the same
// verdict and exit code from run, validate, check and merge, with the
// default bounds (invalid: 20% > 5%), with --max-error-rate 0.3 (pass),
// and with an objective that fails (exit 1) — and check of each directory
// agrees with the command that wrote it.
func TestOneJudgementAcrossCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t, sim.FaultRule{Kind: sim.FaultHTTP503, Every: 5})
	mix, err := filepath.Abs("../../testdata/mixes/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	load := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "25", "--arrival", "constant", "--duration", "2s",
		"--max-tokens", "4", "--metrics-url", "off", "--nvml", "off", "--self-check", "warn"}

	type outcome struct {
		cmd    string
		code   int
		status string // verdict.json's
		dir    string
	}
	var sloFile, planFile string
	check := func(t *testing.T, o outcome) {
		t.Helper()
		code, stdout, stderr := tgCmd("check", "--slo", sloFile, o.dir)
		if code != o.code {
			t.Errorf("%s exited %d, check of its directory %d\n%s\n%s", o.cmd, o.code, code, stdout, stderr)
		}
		if o.status != "" && !strings.Contains(stdout, "Result: "+o.status) {
			t.Errorf("%s said %s; check says:\n%s", o.cmd, o.status, stdout)
		}
	}
	status := func(t *testing.T, dir string) string {
		t.Helper()
		rep, err := results.Dir(dir).ReadReport()
		if err != nil {
			t.Fatal(err)
		}
		return rep.Status
	}
	// strict fails the 20% errors as an objective: exit 1 once the run is
	// valid.
	strict := strings.Replace(lenientSLO, "threshold: 50%", "threshold: 1%", 1)
	for _, c := range []struct {
		name  string
		slo   string
		extra []string
		code  int
	}{{"default bounds", lenientSLO, nil, slo.ExitInvalid}, {"max-error-rate 0.3", lenientSLO, []string{"--max-error-rate", "0.3"}, slo.ExitOK},
		{"objective fails", strict, []string{"--max-error-rate", "0.3"}, slo.ExitFailed}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			sloFile, planFile = filepath.Join(dir, "slo.yaml"), filepath.Join(dir, "plan.yaml")
			os.WriteFile(sloFile, []byte(c.slo), 0o644)
			os.WriteFile(planFile, []byte("kind: Plan\nname: p\ntarget: "+srv.URL+"\nmodel: sim-llama-8b\nslo: slo.yaml\nmix: "+mix+
				"\nseed: 3\nstages:\n  - {name: main, rate: 25, duration: 2s, arrival: constant}\n"), 0o644)
			var got []outcome

			runDir := filepath.Join(dir, "run")
			code, stdout, stderr := tgCmd(append(append([]string{"run", "--slo", sloFile, "--out", runDir}, load...), c.extra...)...)
			got = append(got, outcome{"run", code, status(t, runDir), runDir})
			if code != c.code {
				t.Errorf("run: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			s := readSummary(t, runDir)
			if s.Validity.Valid != (c.code != slo.ExitInvalid) || s.Validity.Bounds == nil || (c.code == slo.ExitInvalid && !strings.Contains(strings.Join(s.Validity.Reasons, ";"), "errors")) {
				t.Errorf("run summary validity %+v", s.Validity)
			}

			valDir := filepath.Join(dir, "validate")
			code, stdout, stderr = tgCmd(append([]string{"validate", "--plan", planFile, "--out", valDir,
				"--metrics-url", "off", "--nvml", "off", "--self-check", "warn"}, c.extra...)...)
			if _, err := os.Stat(filepath.Join(valDir, "verdict.json")); err != nil {
				t.Fatalf("validate: exit %d\n%s\n%s", code, stdout, stderr)
			}
			got = append(got, outcome{"validate", code, status(t, valDir), valDir})
			if code != c.code {
				t.Errorf("validate: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			// The stage's own summary agrees with the plan's verdict.
			if st := readSummary(t, filepath.Join(valDir, "stages", "main")); st.Validity.Valid != (c.code != slo.ExitInvalid) {
				t.Errorf("validate: stages/main/summary.json validity %+v, verdict exit %d", st.Validity, code)
			}

			shard := filepath.Join(dir, "shard0")
			start := time.Now().Add(300 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			if code, stdout, stderr := tgCmd(append(append([]string{"run", "--slo", sloFile, "--out", shard, "--shard", "0/1", "--start-at", start}, load...), c.extra...)...); code != c.code {
				t.Errorf("shard run: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			merged := filepath.Join(dir, "merged")
			code, stdout, stderr = tgCmd("merge", "--slo", sloFile, "--out", merged, shard)
			got = append(got, outcome{"merge", code, status(t, merged), merged})
			if code != c.code {
				t.Errorf("merge: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}

			for _, o := range got {
				check(t, o)
				if o.status != "" && (o.status == slo.ReportInvalid) != (c.code == slo.ExitInvalid) {
					t.Errorf("%s: verdict.json %s with exit %d", o.cmd, o.status, o.code)
				}
			}
		})
	}
}
