package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/acceptance"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
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
			"it, so a reviewer can reproduce the verdict. A torn last line is skipped and said; a run that\n"+
			"was cut short (no "+results.SummaryFile+") is judged on what it wrote and is invalid.\n"+
			"Exit 0 pass, 1 objective failed, 2 usage, 3 run invalid.\n\nFlags:\n%s", fs.FlagUsages())
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
	rep.Tool = loadgen.NewTool(version.Version)
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
