package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

const emptySLO = `kind: SLO
name: empty
owner: a@example.com
objectives:
  - {name: ttft, metric: ttft, threshold: 500ms, target: 90%}
  - {name: errors, metric: error_rate, threshold: 1%}
`

// Against a server whose answers are 90% empty (no output token, usage 0)
// run --slo fails the error-rate and TTFT objectives, streamed or not, and
// check agrees; with --accept-empty the same answers pass.
func TestRunEmptyAnswersFail(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultEmpty, Rate: 0.9}}
	srv := simtest.Start(t, cfg)
	sloPath := filepath.Join(t.TempDir(), "slo.yaml")
	if err := os.WriteFile(sloPath, []byte(emptySLO), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, extra ...string) (int, string, string) {
		t.Helper()
		dir := t.TempDir()
		args := append([]string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "100", "--arrival", "constant",
			"--duration", "2s", "--max-tokens", "8", "--slo", sloPath, "--out", dir}, extra...)
		code, stdout, stderr := runCmd(t, args...)
		return code, stdout + stderr, dir
	}
	for _, stream := range []string{"--stream=true", "--stream=false"} {
		t.Run(stream, func(t *testing.T) {
			// The errors are beyond the 5% validity bound: INVALID, with
			// both objectives failing.
			code, out, dir := run(t, stream)
			if code != slo.ExitInvalid || !strings.Contains(out, "2 fail") {
				t.Errorf("exit %d, want %d (INVALID: 2 fail)\n%s", code, slo.ExitInvalid, out)
			}
			s := readSummary(t, dir)
			if n := s.Requests.ErrorsByKind[string(loadgen.ErrEmptyAnswer)]; n < 150 || n != s.Requests.Errors {
				t.Errorf("%d empty_answer of %d errors in %d sent; want about 180, all the errors", n, s.Requests.Errors, s.Requests.Sent)
			}
			if !strings.Contains(out, "failed as empty_answer") {
				t.Errorf("no warning naming empty_answer:\n%s", out)
			}
			// With no validity bound on errors, the objectives decide: FAIL.
			code, out, dir = run(t, stream, "--max-error-rate", "1")
			if code != slo.ExitFailed {
				t.Errorf("--max-error-rate 1: exit %d, want %d (FAIL)\n%s", code, slo.ExitFailed, out)
			}
			if c, cout, _ := tgCmd("check", "--slo", sloPath, dir); c != slo.ExitFailed {
				t.Errorf("check: exit %d, want %d\n%s", c, slo.ExitFailed, cout)
			}
		})
	}
	t.Run("accept-empty", func(t *testing.T) {
		// 16 answers with a token and 200 requests decide neither
		// objective at 95%: INCONCLUSIVE, never FAIL or INVALID.
		code, out, dir := run(t, "--accept-empty")
		if code != slo.ExitOK && code != slo.ExitInconclusive {
			t.Errorf("exit %d, want %d or %d (nothing failed)\n%s", code, slo.ExitOK, slo.ExitInconclusive, out)
		}
		if s := readSummary(t, dir); s.Requests.Errors != 0 {
			t.Errorf("%d errors with --accept-empty: %v", s.Requests.Errors, s.Requests.ErrorsByKind)
		}
	})
}
