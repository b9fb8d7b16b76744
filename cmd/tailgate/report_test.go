package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/report/reporttest"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// validate writes report.html into its evidence, inside the manifest;
// report reads it back in both formats.
func TestValidateWritesReportAndReportCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.DefaultConfig())
	plan := writePlan(t, srv.URL, "1s", false)
	out := filepath.Join(t.TempDir(), "out")
	// Any verdict will do (a loaded machine can make the generator's
	// self-check call a stage invalid): the report is written whatever it is.
	if code, stdout, stderr := tgCmd("validate", "--plan", plan, "--out", out, "--self-check", "warn"); code == slo.ExitUsage {
		t.Fatalf("validate: %d\n%s\n%s", code, stdout, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "report.html"))
	if err != nil || !strings.Contains(string(b), "Verdicts") || !strings.Contains(string(b), "peak") {
		t.Fatalf("validate's report.html: %v", err)
	}
	reporttest.Screenshot(t, filepath.Join(out, "report.html"), filepath.Join(t.TempDir(), "validate.png"))
	if m, _ := os.ReadFile(filepath.Join(out, "manifest.json")); !strings.Contains(string(m), "report.html") {
		t.Error("report.html is not in the manifest")
	}
	md := filepath.Join(t.TempDir(), "r.md")
	if code, _, e := tgCmd("report", out, "--format", "md", "--out", md); code != slo.ExitOK {
		t.Fatalf("report md: %d %s", code, e)
	}
	if b, _ := os.ReadFile(md); !strings.Contains(string(b), "| objective |") {
		t.Errorf("markdown:\n%s", b)
	}
	if code, stdout, _ := tgCmd("report", out); code != slo.ExitOK || !strings.HasPrefix(stdout, "<!DOCTYPE html>") {
		t.Errorf("report to stdout: %d", code)
	}
	if code, _, e := tgCmd("report", t.TempDir()); code != slo.ExitUsage || !strings.Contains(e, "neither summary.json nor requests.jsonl") {
		t.Errorf("empty directory: %d %s", code, e)
	}
}

func TestReportSinceUsage(t *testing.T) {
	dir := t.TempDir()
	if code, _, e := tgCmd("report", "--since", "a month", dir); code != slo.ExitUsage || !strings.Contains(e, "want a positive duration") {
		t.Errorf("bad --since: %d %s", code, e)
	}
	if code, _, e := tgCmd("report", "--since", "30d", dir, dir); code != slo.ExitUsage || !strings.Contains(e, "one directory") {
		t.Errorf("two directories: %d %s", code, e)
	}
	out := filepath.Join(dir, "review.html")
	if code, _, e := tgCmd("report", "--since", "30d", "--out", out, dir); code != slo.ExitOK || !strings.Contains(e, "review of 0 results") {
		t.Fatalf("empty directory: %d %s", code, e)
	}
	if b, err := os.ReadFile(out); err != nil || !strings.Contains(string(b), "no results in the period") {
		t.Errorf("review: %v", err)
	}
}
