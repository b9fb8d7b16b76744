package main

import (
	"slices"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

// run --change ID (repeatable) records change-record ids in summary.json,
// for compare to show; blanks are dropped.
func TestRunRecordsChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "10", "--duration", "500ms",
		"--max-tokens", "2", "--change", "CHG-101", "--change", " ", "--change", "CHG-102", "--out", dir)
	if code != slo.ExitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	if got := readSummary(t, dir).Changes; !slices.Equal(got, []string{"CHG-101", "CHG-102"}) {
		t.Errorf("changes %q", got)
	}
}
