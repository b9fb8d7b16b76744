package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/acceptance"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/merge"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdMerge(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("merge", pflag.ContinueOnError)
	outDir := fs.String("out", "", "directory for the merged result (required)")
	force := fs.Bool("force", false, "replace the results already in --out")
	records := fs.String("records", "", "merged "+results.RecordsFile+" form: full, compact or none (default: the shards')")
	compress := fs.String("records-compress", "", "merged "+results.RecordsFile+" compression: none, gzip or zstd (default: shard 0's)")
	sloPath := fs.String("slo", "", "judge the merged run against this SLO file, as check does ("+results.VerdictFile+"; exit 1 if an objective fails)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate merge --out DIR SHARD_DIR...\n\n"+
			"Merges the results of the shards of one schedule (run --shard I/N) into one result under the same\n"+
			results.SummaryFile+" contract: HDR histograms merged losslessly from each shard's "+results.HistogramsFile+", counters\n"+
			"summed, records merged into one "+results.RecordsFile+" (check judges it as a single run), "+results.HlogFile+"\n"+
			"intervals in time order, shard 0's telemetry. Refuses shards of different schedules (load, seed,\n"+
			"target, model, mix) and a shard index given twice or missing, naming the directories.\n"+
			"With --slo, the merged run is judged as check judges it (exit 1: an objective failed).\n"+
			"Exit 0 merged, 1 an --slo objective failed, 2 usage or refused, 3 the merged run is invalid or could not be written.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *outDir == "" || fs.NArg() == 0 {
		return usageErr("want --out DIR and the shards' directories\nRun 'tailgate help merge' for the flags.")
	}
	out := results.Dir(*outDir)
	if out.HasResults() && !*force {
		return usageErr("--out %s already holds results (--force to replace them)", out)
	}
	var dirs []results.Dir
	for _, a := range fs.Args() {
		if st, err := os.Stat(a); err != nil || !st.IsDir() {
			return usageErr("%s: not a results directory", a)
		}
		if a == *outDir {
			return usageErr("%s: is both a shard and --out", a)
		}
		dirs = append(dirs, results.Dir(a))
	}
	if *force {
		if err := out.Replace(stderr); err != nil {
			return err
		}
	}
	opts := merge.Options{Version: version.Version, Rejudge: acceptance.Rejudge,
		Judge: func(dir results.Dir, spec *slo.Spec) (*slo.Report, []string, error) {
			rep, saved, err := acceptance.Check(dir, spec, nil, time.Now().UTC())
			if err != nil {
				return nil, nil, err
			}
			return rep, saved.Notes, nil
		}}
	if *sloPath != "" {
		spec, err := slo.LoadSpec(*sloPath)
		if err != nil {
			return err
		}
		opts.SLO = spec
	}
	if *records != "" {
		f, err := results.ParseRecordsForm(*records)
		if err != nil {
			return usageErr("--records: %v", err)
		}
		opts.Records = f
	}
	if *compress != "" {
		c, err := results.ParseCompression(*compress)
		if err != nil {
			return usageErr("--records-compress: %v", err)
		}
		opts.Compression = &c
	}
	if merge.IsPlanRun(dirs[0]) {
		return mergePlan(dirs, out, opts, stdout, stderr)
	}
	res, err := merge.Merge(dirs, out, opts)
	if err != nil {
		var re *merge.RefusedError
		if errors.As(err, &re) {
			return usageErr("%w", err)
		}
		return err
	}
	exporters.WriteText(stdout, res.Summary)
	if res.Summary.SLO != nil {
		fmt.Fprintln(stdout)
		exporters.WriteVerdictTable(stdout, res.Summary.SLO)
	}
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	fmt.Fprintf(stderr, "merged %d shards (%d records) into %s\n", len(dirs), res.Records, out)
	return judgedExit(results.Exit(&res.Summary.Validity, res.Summary.SLO))
}

// mergePlan merges the evidence of a sharded validate and prints the one
// verdict; its exit is the verdict's, as validate's is.
func mergePlan(dirs []results.Dir, out results.Dir, opts merge.Options, stdout, stderr io.Writer) error {
	res, err := merge.Plan(dirs, out, opts)
	if err != nil {
		var re *merge.RefusedError
		if errors.As(err, &re) {
			return usageErr("%w", err)
		}
		if res == nil || res.Report == nil {
			return err
		}
	}
	exporters.WriteVerdictTable(stdout, res.Report)
	for _, n := range res.Notes {
		fmt.Fprintln(stderr, "note:", n)
	}
	fmt.Fprintf(stderr, "merged %d shards' evidence into %s (sign it: tailgate sign --key KEY %s)\n", len(dirs), out, out)
	if err != nil {
		return err
	}
	return judgedExit(results.Exit(nil, res.Report))
}
