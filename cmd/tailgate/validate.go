package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/acceptance"
	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/exporters/llmd"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

func cmdValidate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("validate", pflag.ContinueOnError)
	var tf targetFlags
	var tel telemetryFlags
	tf.dial, tel.dial = dialFrom(ctx), dialFrom(ctx)
	var sc scaleFlags
	tf.register(fs)
	tf.registerAnswer(fs)
	tel.register(fs)
	sc.registerShard(fs)
	planPath := fs.String("plan", "", "acceptance plan (kind: Plan) (required)")
	outDir := fs.String("out", "", "evidence directory for every result (required)")
	record := fs.String("record", "", "record a manual stage's result instead of running: STAGE=pass|fail")
	by := fs.String("by", "", "with --record: who tested it")
	note := fs.String("note", "", "with --record: what was seen")
	timeout := fs.Duration("timeout", 2*time.Minute, "per-request timeout")
	maxInFlight := fs.Int("max-inflight", loadgen.DefaultMaxInFlight, "open loop: cap on requests in flight")
	var grace time.Duration
	registerGrace(fs, &grace)
	var vf validityFlags
	vf.register(fs, true)
	force := fs.Bool("force", false, "run into an --out directory that already holds results")
	llmdReport := fs.Bool("llm-d-report", false, "also write llm-d-benchmark's report v"+llmd.Version+" of each stage (--out/stages/*/"+llmd.FileName+"), in the manifest")
	noProgress := fs.Bool("no-progress", false, "no live progress bar (it is off anyway when stderr is not a terminal)")
	var lo liveOutputs
	lo.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate validate --plan plan.yaml --out DIR [flags]\n"+
			"       tailgate validate --plan plan.yaml --out DIR --record STAGE=pass|fail --by NAME\n\n"+
			"Checks the target and model, runs the plan's stages in order, judges every objective on each,\n"+
			"prints the verdicts and writes DIR: "+results.VerdictFile+", "+results.JUnitFile+", "+results.RecordsFile+", per-stage summaries\n"+
			"and histograms, the input files, "+results.EnvironmentFile+" and "+results.ManifestFile+" (sign it with tailgate sign).\n"+
			"Open-loop stages use Poisson arrivals unless the plan says otherwise (as run does).\n"+
			"Exit 0 all pass or waived, 1 an objective failed or a manual stage is pending, 2 usage, 3 run invalid.\n\n%s", fs.FlagUsages())
	}
	changes := registerChanges(fs)
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *planPath == "" || *outDir == "" {
		return usageErr("--plan and --out are required\nRun 'tailgate help validate' for the flags.")
	}
	if err := tel.check(); err != nil {
		return err
	}
	if err := lo.check(); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	plan, err := slo.LoadPlan(*planPath)
	if err != nil {
		return err
	}
	for _, w := range plan.SLO.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	bounds, err := vf.bounds(plan.Validity) // flags over the plan's validity: block
	if err != nil {
		return err
	}
	out := results.Dir(*outDir)
	if *record != "" {
		return recordManual(plan, out, *record, *by, *note, stdout, stderr)
	}
	if out.HasResults() && !*force {
		return usageErr("%s already holds results (--force to replace them)", out)
	}
	if !fs.Changed("target") {
		if tf.target, err = plan.TargetURL(); err != nil {
			return err
		}
	}
	if !fs.Changed("model") && plan.Model != "" {
		tf.model = plan.Model
	}
	if !fs.Changed("api") && plan.API != "" {
		tf.api = plan.API
	}
	mix, err := prompts.LoadMix(plan.Resolve(plan.MixPath), prompts.LoadOptions{Seed: int64(plan.Seed)})
	if err != nil {
		return err
	}
	sh, _, err := sc.shardOptions()
	if err != nil {
		return err
	}
	peak := loadgen.Options{Shard: sh}
	for _, st := range plan.Stages {
		if st.Concurrency > 0 {
			peak.Closed = true
			peak.Stages = append(peak.Stages, loadgen.Stage{Concurrency: st.Concurrency})
		}
	}
	if err := checkConnections(plannedConnections(tf.api, peak), readHostLimits()); err != nil {
		return err
	}
	peak.MaxInFlight = *maxInFlight
	defer startMemoryLimit(tf.api, peak)()
	client, err := tf.client(func(msg string) { fmt.Fprintln(stderr, "warning:", msg) })
	if err != nil {
		return err
	}
	tel.dial = tf.dialer()
	telCfg, err := tel.config(tf.target, tf.model, tf.auth(), stderr)
	if err != nil {
		return err
	}
	cfg := acceptance.Config{Plan: plan, PlanPath: *planPath, Mix: mix, Out: out, Force: *force, LLMDReport: *llmdReport,
		Client: client, Target: redact.URL(tf.target), API: tf.api, Model: tf.model, Streaming: tf.stream,
		Timeout: *timeout, Grace: graceOption(grace), MaxInFlight: *maxInFlight, AcceptEmpty: tf.acceptEmpty, Validity: &bounds, Telemetry: telCfg, GPUHourCostUSD: tel.gpuHourCost,
		Changes: cleanChanges(*changes),
		GPUs:    gpusForEvidence(telCfg), Version: version.Version, Args: os.Args, Log: stderr,
		Server: func(ctx context.Context) *evidence.Server {
			info := client.DescribeServer(ctx)
			return &info
		},
		Preflight: func(ctx context.Context) error { return tf.preflight(ctx, client) },
	}
	if cfg.Shard, cfg.StartAt, err = sc.shardOptions(); err != nil {
		return usageErr("%w", err)
	}
	if isTerminal(stderr) && !*noProgress {
		cfg.Progress = func(label string) pipeline.Progress { return newProgress(stderr, label) }
	}
	if cfg.Sinks, err = lo.sinks(ctx, plan.SLO, &tf, sc.shard, stderr); err != nil {
		return err
	}
	rep, err := acceptance.Run(ctx, cfg)
	// Every stage's records are in; the final export (also after Ctrl-C),
	// bounded, whatever the verdict.
	lo.flush(ctx, stderr)
	if rep != nil {
		if perr := lo.pushResults(ctx, stderr); perr != nil {
			if err == nil {
				err = perr // results not delivered: 3, whatever the verdict
			} else {
				fmt.Fprintf(stderr, "tailgate validate: %v\n", perr)
			}
		}
	}
	if rep != nil {
		exporters.WriteVerdictTable(stdout, rep)
		fmt.Fprintf(stderr, "evidence in %s (sign it: tailgate sign --key KEY %s)\n", out, out)
	}
	if err != nil {
		return err
	}
	return judgedExit(results.Exit(nil, rep))
}

// gpusForEvidence lists NVML's devices (model, UUID, serial, driver) for
// the evidence pack.
func gpusForEvidence(cfg *telemetry.Config) []evidence.GPU {
	if cfg == nil || cfg.GPU == nil {
		return nil
	}
	var out []evidence.GPU
	for _, d := range cfg.GPU.Devices() {
		out = append(out, evidence.GPU{Index: d.Index, Model: d.Name, UUID: d.UUID, Serial: d.Serial,
			Driver: d.DriverVersion, Source: "nvml"})
	}
	return out
}

// recordManual adds a person's result for a manual stage and re-judges the
// saved run.
func recordManual(plan *slo.Plan, out results.Dir, rec, by, note string, stdout, stderr io.Writer) error {
	name, result, ok := strings.Cut(rec, "=")
	switch {
	case !ok || (result != "pass" && result != "fail"):
		return usageErr("--record %q: want STAGE=pass or STAGE=fail", rec)
	case strings.TrimSpace(by) == "":
		return usageErr("--record needs --by NAME: who tested it")
	}
	m := slo.ManualRecord{Stage: name, Pass: result == "pass", By: by, At: time.Now().UTC(), Note: note}
	rep, err := acceptance.RecordManual(out, plan, m, version.Version)
	if rep == nil {
		return err
	}
	fmt.Fprintf(stdout, "recorded %s=%s by %s\n\n", name, result, by)
	exporters.WriteVerdictTable(stdout, rep)
	fmt.Fprintf(stderr, "evidence in %s (sign it: tailgate sign --key KEY %s)\n", out, out)
	if err != nil {
		return err
	}
	return judgedExit(results.Exit(nil, rep))
}
