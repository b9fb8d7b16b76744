package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/report"
	"github.com/tailgate-llm/tailgate/results"
)

func cmdReport(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("report", pflag.ContinueOnError)
	out := fs.String("out", "", "file to write (default: stdout)")
	format := fs.String("format", report.FormatHTML, "html (one self-contained page with plots) or md (a Markdown summary)")
	title := fs.String("title", "", "page title (default: the directories)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate report DIR... [--out FILE.html] [--format html|md]\n\n"+
			"Writes one report of results directories (run, validate or sweep): summary and verdicts, the latency\n"+
			"percentile spectrum of every run overlaid, latency and throughput over time with stage boundaries,\n"+
			"per class, GPU utilisation beside queue delay and TTFT (metric theater marked), and for a sweep\n"+
			"latency and goodput against load with the SLO-max and knee. The HTML needs no network and no\n"+
			"JavaScript. validate and sweep write DIR/report.html themselves.\n\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return usageErr("want at least one results directory\nRun 'tailgate help report' for the flags.")
	}
	if *format != report.FormatHTML && *format != report.FormatMarkdown {
		return usageErr("--format %q: want html or md", *format)
	}
	opt := report.Options{Title: *title, Version: version}
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
	err := report.Write(dir.Path(report.File), report.FormatHTML, []string{string(dir)}, report.Options{Version: version})
	var we *results.WriteError
	switch {
	case err == nil:
		fmt.Fprintf(stderr, "report in %s\n", dir.Path(report.File))
	case errors.As(err, &we):
		return err
	default:
		fmt.Fprintf(stderr, "warning: no report.html: %v\n", err)
	}
	return nil
}
