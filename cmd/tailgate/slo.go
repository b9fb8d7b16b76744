package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// cmdSLO holds the SLO file's operate-phase tools; today one: rules.
func cmdSLO(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	const use = "Usage: tailgate slo rules --slo FILE [--format prometheus|prometheusrule|alertmanager|sloth]\n\n" +
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
	format := fs.String("format", "prometheus", "prometheus: a rule file for Prometheus' rule_files;\n"+
		"prometheusrule: the same groups as a Prometheus Operator PrometheusRule;\n"+
		"alertmanager: the Alertmanager route and inhibition rules for these alerts (one outage, one page);\n"+
		"sloth: a Sloth prometheus/v1 spec, for teams that generate rules with Sloth")
	selector := fs.String("selector", "", "extra label matchers every tailgate series the rules read must carry, e.g. 'job=\"tailgate-canary\"'\n(keeps pushed runs, job \"tailgate\" on the Pushgateway, out of the canary's SLI)")
	noCanary := fs.Bool("no-canary-alerts", false, "leave out the canary's own alerts (down, reload failed, state file not written, no recent success),\nwhen another SLO file's rules already carry them")
	downFor := fs.Duration("canary-down-for", 2*time.Minute, "how long the canary's series must be gone before TailgateCanaryDown pages")
	namespace := fs.String("namespace", "", "metadata.namespace of the PrometheusRule (--format prometheusrule)")
	ruleLabels := fs.StringToString("rule-label", nil, "metadata label of the PrometheusRule, for the Prometheus' ruleSelector (repeatable: release=kube-prometheus-stack)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate slo rules --slo slo.yaml [--format prometheus|sloth] > slo.rules.yaml\n\n"+
			"Writes to stdout, for every objective the canary counts as good/bad events\n"+
			"(tailgate_slo_events_total), Sloth-convention recording rules (slo:sli_error:ratio_rate5m …\n"+
			"and the SLO window, slo:objective:ratio, slo:period_error_budget_remaining:ratio, …) and\n"+
			"multiwindow, multi-burn-rate page and ticket alerts, their factors from the SLO window.\n"+
			"Floor objectives and queue_delay have no events in operate: they are left out, with a warning;\n"+
			"so is an objective whose budget no burn rate can spend fast enough to page (a 90%% target needs 144%% bad events for 14.4×).\n"+
			"The canary's own alerts come too: TailgateCanaryDown (page), TailgateCanaryConfigReloadFailed,\n"+
			"TailgateCanaryStateWriteFailing and TailgateCanaryNoRecentSuccess (tickets). --format alertmanager writes the route and inhibition for them.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *sloPath == "" || fs.NArg() != 0 {
		return usageErr("want --slo FILE and no arguments\nRun 'tailgate help slo' for the flags.")
	}
	switch *format {
	case "prometheus", "prometheusrule", "alertmanager", "sloth":
	default:
		return usageErr("--format %q: want prometheus, prometheusrule, alertmanager or sloth", *format)
	}
	spec, err := slo.LoadSpec(*sloPath)
	if err != nil {
		return err
	}
	r, err := rules.Generate(spec, rules.Options{Version: version.Version, Selector: *selector, NoCanaryAlerts: *noCanary, CanaryDownFor: *downFor})
	if err != nil {
		return err
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(stderr, "warning: %s: %s\n", *sloPath, s)
	}
	for _, w := range r.Warnings {
		fmt.Fprintf(stderr, "warning: %s: %s\n", *sloPath, w)
	}
	var out []byte
	switch *format {
	case "prometheus":
		out, err = r.Prometheus()
	case "prometheusrule":
		out, err = r.PrometheusRule(*namespace, *ruleLabels)
	case "alertmanager":
		out, err = r.Alertmanager()
	case "sloth":
		out, err = r.Sloth()
	}
	if err != nil {
		return err
	}
	_, err = stdout.Write(out)
	return err
}
