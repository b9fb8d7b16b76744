package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

func cmdCompare(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("compare", pflag.ContinueOnError)
	tolerance := fs.String("tolerance", "5%", "slowdown a regression must exceed, with confidence, to fail the comparison (exit 1)")
	metrics := fs.String("metrics", strings.Join(measure.Compared(measure.LatencyMetrics()), ","),
		"latency metrics to compare")
	pcts := fs.String("percentiles", "50,90,99", "percentiles to compare")
	resamples := fs.Int("resamples", 2000, "bootstrap resamples")
	seed := fs.Uint64("seed", 1, "bootstrap seed (the same seed gives the same intervals)")
	force := fs.Bool("force", false, "compare results of different plans or mixes")
	asJSON := fs.Bool("json", false, "print the comparison as JSON")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate compare BASELINE CANDIDATE [flags]\n\n"+
			"Two sweep directories ("+results.SweepFile+") are compared whole: each SLO-max with the interval its search\n"+
			"leaves it in (a lower one gates), each knee, and every load level both ran, compared as runs.\n\n"+
			"Compares two results directories (run or validate) of the same plan or mix, per stage, metric and\n"+
			"percentile: the change, its interval (%s; 95%% for all rows together) and\n"+
			"a verdict. A stage whose offered load or class mix differs is demand change, not regression.\n"+
			"Shows the change ids recorded on each side (--change). Exit 0 no regression beyond --tolerance,\n"+
			"1 a significant regression beyond it, 2 usage or different plans/mixes without --force, 4 no row had\n"+
			"enough requests to be judged.\n\n%s", comparison.Method, fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		return usageErr("want BASELINE and CANDIDATE directories\nRun 'tailgate help compare' for the flags.")
	}
	tol, err := parseShare(*tolerance)
	if err != nil {
		return usageErr("--tolerance: %v", err)
	}
	opt := comparison.Options{Tolerance: tol, Resamples: *resamples, Seed: *seed, Force: *force}
	for _, m := range strings.Split(*metrics, ",") {
		if m = strings.TrimSpace(m); m != "" {
			opt.Metrics = append(opt.Metrics, m)
		}
	}
	for _, p := range strings.Split(*pcts, ",") {
		v, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(p), "p"), 64)
		if err != nil || v <= 0 || v >= 100 {
			return usageErr("--percentiles %q: %q is not a percentile between 0 and 100", *pcts, p)
		}
		opt.Percentiles = append(opt.Percentiles, v/100)
	}
	bd, cd := results.Dir(fs.Arg(0)), results.Dir(fs.Arg(1))
	switch {
	case bd.HasSweep() && cd.HasSweep():
		rep, err := comparison.CompareSweeps(fs.Arg(0), fs.Arg(1), opt)
		if err != nil {
			var me *comparison.MismatchSweepError
			if errors.As(err, &me) {
				return usageErr("%w", err)
			}
			return err
		}
		return printed(stdout, *asJSON, rep, func() { comparison.WriteSweepTable(stdout, rep) }, rep.ExitCode)
	case bd.HasSweep() || cd.HasSweep():
		sweep, other := fs.Arg(0), fs.Arg(1)
		if cd.HasSweep() {
			sweep, other = other, sweep
		}
		return usageErr("%s is a sweep and %s is not: compare two sweeps, or two runs (a sweep's "+results.LevelsDir+"/NAME directories are runs)", sweep, other)
	}
	base, err := comparison.Read(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("baseline: %w", err)
	}
	cand, err := comparison.Read(fs.Arg(1))
	if err != nil {
		return fmt.Errorf("candidate: %w", err)
	}
	rep, err := comparison.Compare(base, cand, opt)
	if err != nil {
		var me *comparison.MismatchError
		if errors.As(err, &me) {
			return usageErr("%w", err)
		}
		return err
	}
	return printed(stdout, *asJSON, rep, func() { comparison.WriteTable(stdout, rep) }, rep.ExitCode)
}

// printed writes a comparison as JSON or as its table, and exits with
// its code.
func printed(stdout io.Writer, asJSON bool, rep any, table func(), code int) error {
	if asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		table()
	}
	return exit(code)
}

// parseShare reads "5%" or "0.05".
func parseShare(s string) (float64, error) {
	s = strings.TrimSpace(s)
	pct := strings.HasSuffix(s, "%")
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q: want a share, 5%% or 0.05", s)
	}
	if pct {
		v /= 100
	}
	return v, nil
}
