package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/acceptance"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdCheck(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("check", pflag.ContinueOnError)
	sloPath := fs.String("slo", "", "SLO file to judge the saved results against (required)")
	planPath := fs.String("plan", "", "plan file: which objectives apply to which stage, waivers, validity bounds\n(default: the plan copy in DIR/"+results.InputsDir+", if the run saved one)")
	at := fs.String("at", "", "judge waiver expiry at this RFC 3339 time or date, or \"now\"\n(default: when the run was judged, from DIR/"+results.VerdictFile+"; else now)")
	outDir := fs.String("out", "", "write "+results.VerdictFile+" and "+results.JUnitFile+" to this directory (default: write nothing)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate check --slo slo.yaml [flags] DIR\n\n"+
			"Re-judges a saved run (DIR/"+results.RecordsFile+", read as a stream) against an SLO without re-running\n"+
			"it, so a reviewer can reproduce the verdict. Records that disagree with "+results.SummaryFile+"'s\n"+
			"count or checksum (emptied, torn, changed) make it invalid; a run that was cut short (no\n"+
			results.SummaryFile+") is judged on what it wrote, a torn last line skipped and said, and is invalid.\n"+
			"DIR may be a sweep's: each level is re-judged and the sweep's verdict read from "+results.SweepFile+";\n"+
			"a level re-judged as the sweep judged it leaves the sweep's verdict to decide, one judged otherwise\n"+
			"(records lost or changed, another SLO) counts by its own. The exit is the worst of them.\n"+
			"Exit 0 pass, 1 objective failed, 2 usage, 3 run invalid, 4 inconclusive.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 || *sloPath == "" {
		return usageErr("want --slo FILE and one results directory\nRun 'tailgate help check' for the flags.")
	}
	dir := results.Dir(fs.Arg(0))
	if st, err := os.Stat(string(dir)); err != nil || !st.IsDir() {
		return usageErr("%s: not a results directory", dir)
	}
	spec, err := slo.LoadSpec(*sloPath)
	if err != nil {
		return err
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *planPath == "" {
		if m, _ := filepath.Glob(filepath.Join(string(dir), results.InputsDir, "plan-*")); len(m) == 1 {
			*planPath = m[0]
			fmt.Fprintf(stderr, "tailgate check: using the run's plan %s\n", m[0])
		}
	}
	var plan *slo.Plan
	if *planPath != "" {
		b, err := os.ReadFile(*planPath)
		if err == nil {
			plan, err = slo.ParsePlan(*planPath, b)
		}
		if err == nil {
			err = plan.Check(spec)
		}
		if err != nil {
			return err
		}
	}
	if dir.HasSweep() {
		if _, err := os.Stat(dir.RecordsPath()); err != nil {
			return checkSweep(dir, spec, plan, *at, *sloPath, *outDir, stdout, stderr)
		}
	}
	prev, _ := dir.ReadReport()
	now, err := judgeTime(*at, prev)
	if err != nil {
		return usageErr("--at %q: want an RFC 3339 time (2026-12-01T15:04:05Z), a date (2026-12-01) or \"now\"", *at)
	}
	rep, saved, err := acceptance.Check(dir, spec, plan, now)
	if err != nil {
		return err
	}
	for _, n := range saved.Notes {
		fmt.Fprintln(stderr, "tailgate check:", n)
	}
	rep.Tool = version.NewTool(version.Version)
	fmt.Fprintf(stdout, "tailgate check %s against %s (waivers judged at %s)\n\n", dir, *sloPath, now.Format(time.RFC3339))
	if err := exporters.WriteVerdictTable(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "tailgate check:", err)
	}
	if *outDir != "" {
		if err := exporters.WriteVerdicts(results.Dir(*outDir), rep); err != nil {
			return err
		}
	}
	return judgedExit(results.Exit(nil, rep))
}

// judgeTime is --at, or the time the run was judged, or now.
func judgeTime(at string, prev *slo.Report) (time.Time, error) {
	switch {
	case at == "now":
		return time.Now().UTC(), nil
	case at != "":
		if t, err := time.Parse(time.RFC3339, at); err == nil {
			return t, nil
		}
		return time.Parse(time.DateOnly, at)
	case prev != nil && !prev.EvaluatedAt.IsZero():
		return prev.EvaluatedAt, nil
	}
	return time.Now().UTC(), nil
}

// checkSweep re-judges every level of the sweep in dir against spec and
// reads the sweep's own verdict (results.SweepExit). A level judged as the
// sweep judged it is the sweep's to weigh (a level above the SLO-max
// fails by design); one judged otherwise (its records lost or changed, or
// another SLO) counts by its own exit. The exit is the worst of them.
func checkSweep(dir results.Dir, spec *slo.Spec, plan *slo.Plan, at, sloPath, outDir string, stdout, stderr io.Writer) error {
	sw, err := dir.ReadSweep()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "tailgate check %s (a sweep of %d levels) against %s\n", dir, len(sw.Levels), sloPath)
	code, why := results.SweepExit(sw)
	var whys []string
	if why != "" {
		whys = append(whys, why)
	}
	for _, l := range sw.Levels {
		if l.Dir == "" {
			fmt.Fprintf(stdout, "\nlevel %s: no results directory in %s: not re-judged\n", l.Name, results.SweepFile)
			continue
		}
		ld := results.Dir(filepath.Join(string(dir), l.Dir))
		prev, _ := ld.ReadReport()
		now, err := judgeTime(at, prev)
		if err != nil {
			return usageErr("--at %q: want an RFC 3339 time (2026-12-01T15:04:05Z), a date (2026-12-01) or \"now\"", at)
		}
		// Open loop: the level's rate is its demand, as the sweep judged it.
		var demand *slo.Demand
		if l.Concurrency == 0 && l.RatePerS > 0 {
			demand = &slo.Demand{OfferedPerS: l.RatePerS}
		}
		fmt.Fprintf(stdout, "\nlevel %s (%s, judged %s by the sweep):\n", l.Name, ld, l.Status)
		rep, saved, err := acceptance.CheckDemand(ld, spec, plan, now, demand)
		if err != nil {
			// A level that cannot be re-judged is not one that passed.
			fmt.Fprintf(stdout, "  cannot re-judge: %v\n", err)
			code = worseExit(code, slo.ExitInvalid)
			whys = append(whys, "level "+l.Name+": "+err.Error())
			continue
		}
		for _, n := range saved.Notes {
			fmt.Fprintf(stderr, "tailgate check: level %s: %s\n", l.Name, n)
		}
		rep.Tool = version.NewTool(version.Version)
		if err := exporters.WriteVerdictTable(stdout, rep); err != nil {
			fmt.Fprintln(stderr, "tailgate check:", err)
		}
		if outDir != "" {
			od := results.Dir(filepath.Join(outDir, l.Dir))
			if err := od.Create(); err != nil {
				return err
			}
			if err := exporters.WriteVerdicts(od, rep); err != nil {
				return err
			}
		}
		if rep.Status == l.Status {
			continue
		}
		lc, lwhy := results.Exit(nil, rep)
		fmt.Fprintf(stdout, "level %s: re-judged %s, the sweep said %s: it counts by its own exit (%d)\n", l.Name, rep.Status, l.Status, lc)
		code = worseExit(code, lc)
		if lwhy != "" {
			whys = append(whys, "level "+l.Name+": "+lwhy)
		}
	}
	sc, _ := results.SweepExit(sw)
	fmt.Fprintf(stdout, "\nsweep verdict (%s): exit %d; check: exit %d\n", results.SweepFile, sc, code)
	if code == slo.ExitOK {
		return nil
	}
	return judgedExit(code, strings.Join(whys, "; "))
}

// worseExit is the worse of two judged exits: invalid, then failed, then
// inconclusive, then pass.
func worseExit(a, b int) int {
	rank := func(c int) int {
		switch c {
		case slo.ExitInvalid:
			return 3
		case slo.ExitFailed:
			return 2
		case slo.ExitInconclusive:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}
