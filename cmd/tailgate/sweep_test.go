package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
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
func TestSweepCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	inBubble(t, map[string]sim.Config{"sim": capacitySim()}, func(t *testing.T, sims map[string]*simtest.Server, bctx context.Context) {
		srv := sims["sim"]
		dir := t.TempDir()
		sloFile := filepath.Join(dir, "slo.yaml")
		os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"), 0o644)
		out := filepath.Join(dir, "out")
		args := []string{"sweep", "--target", srv.URL, "--slo", sloFile, "--levels", "40,200", "--arrival", "constant",
			"--max-tokens", "16", "--warmup", "200ms", "--min-duration", "1s", "--grace", "1s", "--self-check", "warn",
			"--current-rate", "20", "--forecast-growth", "8%/month", "--change", "CHG-1", "--out", out}
		code, stdout, stderr := tgCmdCtx(bctx, args...)
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
		// check of the sweep directory re-judges each level and reads
		// the sweep's verdict: the sweep's exit, and r200 (above the
		// SLO-max, failing as the sweep judged it) does not count apart.
		if c, cout, cerr := tgCmdCtx(bctx, "check", "--slo", sloFile, out); c != code || !strings.Contains(cout, "level r40") ||
			!strings.Contains(cout, "level r200") || strings.Contains(cout+cerr, "counts by its own exit") {
			t.Errorf("check of the sweep: exit %d, sweep's %d\n%s\n%s", c, code, cout, cerr)
		}
		// A level whose records were lost makes the check invalid.
		os.WriteFile(filepath.Join(out, "levels", "r40", results.RecordsFile), nil, 0o644)
		if c, cout, cerr := tgCmdCtx(bctx, "check", "--slo", sloFile, out); c != slo.ExitInvalid || !strings.Contains(cout+cerr, "records_disagree") {
			t.Errorf("check of the sweep with r40's records emptied: exit %d, want %d\n%s\n%s", c, slo.ExitInvalid, cout, cerr)
		}
		// Again without --force: refused.
		if code, _, e := tgCmdCtx(bctx, args...); code != slo.ExitUsage || !strings.Contains(e, "already holds results") {
			t.Errorf("second sweep: %d %s", code, e)
		}
		// The list above capacity only: no SLO-max, exit 1.
		args = append(args[:len(args)-1], filepath.Join(dir, "o2"))
		args[6] = "200"
		if code, stdout, _ := tgCmdCtx(bctx, args...); code != slo.ExitFailed || !strings.Contains(stdout, "SLO-max: none") {
			t.Errorf("nothing passes: %d\n%s", code, stdout)
		}
	})
}

// An interrupted sweep ends saying which level it cut and what it kept,
// exit 3, with the completed levels in sweep.json and report.html.
func TestSweepInterruptedSaysWhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	inBubble(t, map[string]sim.Config{"sim": capacitySim()}, func(t *testing.T, sims map[string]*simtest.Server, bctx context.Context) {
		dir := t.TempDir()
		sloFile := filepath.Join(dir, "slo.yaml")
		os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"), 0o644)
		out := filepath.Join(dir, "out")
		ctx, cancel := context.WithCancel(bctx)
		defer cancel()
		// Each level lasts its 200 ms warm-up and 5 s measured on the fake
		// clock (the 29 requests a 90% target needs take less): 7 s is
		// inside r50.
		time.AfterFunc(7*time.Second, cancel)
		var o, e strings.Builder
		err := cmdSweep(ctx, []string{"--target", sims["sim"].URL, "--slo", sloFile, "--levels", "40,50", "--arrival", "constant",
			"--max-tokens", "16", "--warmup", "200ms", "--min-duration", "5s", "--grace", "1s", "--self-check", "warn", "--no-progress", "--out", out}, &o, &e)
		code := finish("sweep", err, &e)
		if code != slo.ExitInvalid || !errors.Is(err, context.Canceled) {
			t.Fatalf("exit %d, err %v: want 3 and a cancellation\n%s\n%s", code, err, o.String(), e.String())
		}
		want := "tailgate sweep: sweep interrupted during level r50 (1 of 2 levels run completed): 1 completed level(s) and the interrupted one are in " + filepath.Join(out, results.SweepFile)
		if !strings.Contains(e.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, e.String())
		}
		t.Logf("stderr:\n%s", e.String())
		if strings.Contains(e.String(), "tailgate sweep: context canceled") {
			t.Errorf("a bare cancellation:\n%s", e.String())
		}
		res, rerr := results.Dir(out).ReadSweep()
		if rerr != nil || !res.Interrupted || len(res.Levels) != 2 || !res.Levels[0].Valid {
			t.Fatalf("sweep.json: %v %+v", rerr, res)
		}
		if _, serr := os.Stat(filepath.Join(out, results.ReportFile)); serr != nil {
			t.Errorf("no report of the completed levels: %v", serr)
		}
	})
}
