package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/exporters/llmd"
	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
	"github.com/tailgate-llm/tailgate/report"
	"github.com/tailgate-llm/tailgate/results"
)

func cmdReport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	out := fs.String("out", "", "file to write (default: stdout)")
	format := fs.String("format", report.FormatHTML, "html (one self-contained page with plots), md (a Markdown summary) or llm-d (llm-d-benchmark's report v"+llmd.Version+" as "+llmd.FileName+" beside each summary.json: the run's, or one per stage of a validate pack or level of a sweep)")
	title := fs.String("title", "", "page title (default: the directories)")
	since := fs.String("since", "", "a periodic review instead: every run, validate, sweep and saved canary /status under DIR\nfrom this long ago (30d, 4w, 720h): SLO performance, changes, capacity and forecast,\nefficiency, regressions against the previous result of the same plan or mix, open waivers")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate report DIR... [--out FILE.html] [--format html|md]\n"+
			"       tailgate report --since 30d DIR [--out FILE.html] [--format html|md]\n"+
			"       tailgate report --format llm-d DIR... [--out FILE.json|-]\n\n"+
			"Writes one report of results directories (run, validate or sweep): summary and verdicts, the latency\n"+
			"percentile spectrum of every run overlaid, latency and throughput over time with stage boundaries,\n"+
			"per class, GPU utilisation beside queue delay and TTFT (metric theater marked), and for a sweep\n"+
			"latency and goodput against load with the SLO-max and knee. The HTML needs no network and no\n"+
			"JavaScript. validate and sweep write DIR/"+results.ReportFile+" themselves.\n\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("want at least one results directory\nRun 'tailgate help report' for the flags.")
	}
	if *format == formatLLMD {
		return writeLLMDReports(fs.Args(), *out, stdout, stderr)
	}
	if *format != report.FormatHTML && *format != report.FormatMarkdown {
		return usageErr("--format %q: want html, md or llm-d", *format)
	}
	opt := report.Options{Title: *title, Version: version.Version}
	if *since != "" {
		d, err := yamlwalk.ParseDuration(*since)
		if err != nil || d <= 0 {
			return usageErr("--since %q: want a positive duration such as 30d, 4w or 720h", *since)
		}
		if fs.NArg() != 1 {
			return usageErr("--since reviews one directory of results, not %d", fs.NArg())
		}
		rv, err := report.ReadReview(fs.Arg(0), d, time.Now(), comparison.Brief)
		if err != nil {
			return err
		}
		var b bytes.Buffer
		if err := report.WriteReview(&b, rv, *format, opt); err != nil {
			return err
		}
		if *out == "" {
			_, err = stdout.Write(b.Bytes())
			return err
		}
		if err := atomicfile.Write(*out, b.Bytes()); err != nil {
			return &results.WriteError{Path: *out, Err: err}
		}
		fmt.Fprintf(stderr, "review of %d results in %s\n", len(rv.Results), *out)
		return nil
	}
	if *out != "" {
		return report.Write(*out, *format, fs.Args(), opt)
	}
	var srcs []*report.Source
	for _, d := range fs.Args() {
		s, err := report.Read(d)
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
	}
	var b bytes.Buffer
	var err error
	if *format == report.FormatMarkdown {
		err = report.WriteMarkdown(&b, srcs, opt)
	} else {
		err = report.WriteHTML(&b, srcs, opt)
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(b.Bytes())
	return err
}

// writeDefaultReport writes DIR/report.html after a sweep. A report that
// cannot be written is results not written (exit 3); one that cannot be
// made is said and left out.
func writeDefaultReport(dir results.Dir, stderr io.Writer) error {
	err := report.Write(dir.Path(results.ReportFile), report.FormatHTML, []string{string(dir)}, report.Options{Version: version.Version})
	var we *results.WriteError
	switch {
	case err == nil:
		fmt.Fprintf(stderr, "report in %s\n", dir.Path(results.ReportFile))
	case errors.As(err, &we):
		return err
	default:
		fmt.Fprintf(stderr, "warning: no "+results.ReportFile+": %v\n", err)
	}
	return nil
}

// formatLLMD is report's --format for llm-d-benchmark's report.
const formatLLMD = "llm-d"

// writeLLMDReports writes each directory's llm-d benchmark reports (one
// per stage of a validate pack, per level of a sweep, else the run's) into
// the run directories, or, with --out, the one directory's reports to that
// file ("-": stdout): a run's report as one object, a pack's as an array.
func writeLLMDReports(dirs []string, out string, stdout, stderr io.Writer) error {
	if out != "" && len(dirs) != 1 {
		return usageErr("--format llm-d --out writes one directory's report, not %d", len(dirs))
	}
	for _, d := range dirs {
		dir := results.Dir(d)
		if _, err := os.Stat(dir.Path(results.ManifestFile)); err == nil && out == "" {
			// Files added to an evidence pack after its manifest would fail
			// verify; validate --llm-d-report writes them before it.
			return usageErr("%s is an evidence pack (%s): reports written into it would not be in its manifest, and verify would fail it; "+
				"write them with --out FILE, or run validate with --llm-d-report", dir, results.ManifestFile)
		}
		if out == "" {
			parts, err := llmd.Write(dir)
			if err != nil {
				return err
			}
			for _, p := range parts {
				fmt.Fprintf(stderr, "llm-d report in %s\n", p.Dir.Path(llmd.FileName))
			}
			continue
		}
		parts, err := llmd.Reports(dir)
		if err != nil {
			return err
		}
		var v any = parts[0].Report
		if len(parts) > 1 || parts[0].Dir != dir {
			rs := make([]*llmd.Report, len(parts))
			for i, p := range parts {
				rs[i] = p.Report
			}
			v = rs
		}
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if out == "-" {
			_, err = stdout.Write(b)
			return err
		}
		if err := atomicfile.Write(out, b); err != nil {
			return &results.WriteError{Path: out, Err: err}
		}
		fmt.Fprintf(stderr, "llm-d report in %s\n", out)
	}
	return nil
}
