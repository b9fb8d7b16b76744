package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// cmdSLO holds the SLO file's operate-phase tools; today one: rules.
func cmdSLO(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "Usage: tailgate slo rules --slo FILE [--format prometheus|sloth]\n\n" +
		"Subcommands:\n  rules   write Prometheus recording and burn-rate alert rules (or a Sloth spec) for an SLO file\n\n'tailgate slo rules --help' lists its flags.\n"
	if len(args) == 0 {
		return usageErr("want a subcommand\n%s", use)
	}
	switch args[0] {
	case "rules":
		return cmdSLORules(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, use)
		return errHelp
	}
	return usageErr("unknown subcommand %q\n%s", args[0], use)
}

func cmdSLORules(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("slo rules", pflag.ContinueOnError)
	sloPath := fs.String("slo", "", "SLO file (kind: SLO) to write rules for (required)")
	format := fs.String("format", "prometheus", "prometheus: a rule file for Prometheus' rule_files;\nsloth: a Sloth prometheus/v1 spec, for teams that generate rules with Sloth")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate slo rules --slo slo.yaml [--format prometheus|sloth] > slo.rules.yaml\n\n"+
			"Writes to stdout, for every objective the canary counts as good/bad events\n"+
			"(tailgate_slo_events_total), Sloth-convention recording rules (slo:sli_error:ratio_rate5m …\n"+
			"and the SLO window, slo:objective:ratio, slo:period_error_budget_remaining:ratio, …) and\n"+
			"multiwindow, multi-burn-rate page and ticket alerts, their factors from the SLO window.\n"+
			"Floor objectives and queue_delay have no events in operate: they are left out, with a warning.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *sloPath == "" || fs.NArg() != 0 {
		return usageErr("want --slo FILE and no arguments\nRun 'tailgate help slo' for the flags.")
	}
	if *format != "prometheus" && *format != "sloth" {
		return usageErr("--format %q: want prometheus or sloth", *format)
	}
	spec, err := slo.LoadSpec(*sloPath)
	if err != nil {
		return err
	}
	r, err := rules.Generate(spec, rules.Options{Version: version})
	if err != nil {
		return err
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(stderr, "warning: %s: %s\n", *sloPath, s)
	}
	out, err := r.Prometheus()
	if *format == "sloth" {
		out, err = r.Sloth()
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
