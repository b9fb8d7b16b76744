package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/capacity"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdSweep(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("sweep", pflag.ContinueOnError)
	var tf targetFlags
	var tel telemetryFlags
	tf.dial, tel.dial = dialFrom(ctx), dialFrom(ctx)
	tf.register(fs)
	tf.registerAnswer(fs)
	tel.register(fs)
	prompt := fs.String("prompt", "Write a short story about a lighthouse keeper.", "prompt text when no --mix or --prompts is given")
	mixPath := fs.String("mix", "", "prompt mix file (kind: Mix)")
	promptsPath := fs.String("prompts", "", "prompt file sent as one class: OpenAI chat JSONL, ShareGPT JSON")
	sloPath := fs.String("slo", "", "SLO file (kind: SLO) every level is judged against, as validate judges a stage (required)")
	from := fs.String("from", "", "bottom of the range: a rate (5) or a concurrency (c4)")
	to := fs.String("to", "", "top of the range: a rate (200) or a concurrency (c256)")
	levels := fs.String("levels", "", "instead of a range, levels to run in ascending order: 5,10,20 or c4,c16,c64")
	precision := fs.Float64("precision", 0.05, "a range search ends when the bracket's top is within this share of its bottom")
	maxLevels := fs.Int("max-levels", 16, "most levels to run")
	arrival := fs.String("arrival", string(loadgen.DefaultArrival), "open-loop arrivals: constant, poisson or gamma")
	burstiness := fs.Float64("burstiness", 1, "gamma shape: 1 = Poisson, <1 burstier, >1 smoother")
	seed := fs.Uint64("seed", 1, "seed for arrivals and prompt sampling (the same for every level)")
	warmup := fs.Duration("warmup", 5*time.Second, "open loop: start of each level left out of its figures (closed loop leaves out 2 × concurrency requests)")
	minDur := fs.Duration("min-duration", 10*time.Second, "open loop: shortest measured part of a level")
	maxDur := fs.Duration("max-duration", 5*time.Minute, "longest any level may run")
	timeout := fs.Duration("timeout", loadgen.DefaultTimeout, "per-request timeout")
	grace := fs.Duration("grace", 10*time.Second, "after a level's schedule ends, how long requests in flight may finish")
	maxInFlight := fs.Int("max-inflight", loadgen.DefaultMaxInFlight, "open loop: cap on requests in flight")
	var vf validityFlags
	vf.register(fs, true)
	current := fs.Float64("current-rate", 0, "today's demand in requests/s: the sweep reports the headroom to the SLO-max")
	growth := fs.String("forecast-growth", "", "with --current-rate: demand growth (8%/month, 2%/week) to say when it reaches the SLO-max")
	changes := registerChanges(fs)
	outDir := fs.String("out", "", "directory for "+results.SweepFile+", "+results.ReportFile+" and one results directory per level under "+results.LevelsDir+"/ (required)")
	force := fs.Bool("force", false, "replace a sweep already in --out")
	noReport := fs.Bool("no-report", false, "do not write "+results.ReportFile+" into --out")
	asJSON := fs.Bool("json", false, "print "+results.SweepFile+" to stdout instead of the table")
	noProgress := fs.Bool("no-progress", false, "no live progress bar")
	var lo liveOutputs
	lo.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate sweep --slo slo.yaml --from R --to R --out DIR [flags]\n"+
			"       tailgate sweep --slo slo.yaml --levels c4,c16,c64 --out DIR [flags]\n\n"+
			"Finds the highest load that meets every objective of the SLO (the SLO-max) and the knee of the\n"+
			"latency curve: each level is one run, judged as validate judges a stage, long enough that at least\n"+
			"10 measured requests fall beyond the highest quantile judged. Rules: capacity/doc.go and "+results.SweepFile+".\n"+
			"Exit 0 an SLO-max was found (and covers --current-rate), 1 no level met the SLO or the current rate\n"+
			"is past the SLO-max, 2 usage, 3 interrupted, the target failed every request at the lowest load, or\nresults not written.\n\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if err := tel.check(); err != nil {
		return err
	}
	if err := lo.check(); err != nil {
		return err
	}
	if *sloPath == "" || *outDir == "" {
		return usageErr("--slo and --out are required\nRun 'tailgate help sweep' for the flags.")
	}
	search := capacity.Search{Precision: *precision, MaxLevels: *maxLevels}
	switch {
	case *levels != "" && (*from != "" || *to != ""):
		return usageErr("--levels and --from/--to: give a list or a range")
	case *levels != "":
		ls, err := capacity.ParseLevels(*levels)
		if err != nil {
			return usageErr("--levels: %v", err)
		}
		search.Levels = ls
	case *from == "" || *to == "":
		return usageErr("give a range (--from and --to) or --levels")
	default:
		var err error
		if search.From, err = capacity.ParseLevel(*from); err != nil {
			return usageErr("--from: %v", err)
		}
		if search.To, err = capacity.ParseLevel(*to); err != nil {
			return usageErr("--to: %v", err)
		}
		if search.From.Closed() != search.To.Closed() || search.From.Value() >= search.To.Value() {
			return usageErr("--from %s --to %s: both rates or both concurrencies, the bottom below the top", *from, *to)
		}
	}
	if *precision <= 0 || *precision >= 1 {
		return usageErr("--precision %v: want a share between 0 and 1", *precision)
	}
	bounds, err := vf.bounds(slo.DefaultValidity())
	if err != nil {
		return err
	}
	var g *capacity.Growth
	if *growth != "" {
		if *current <= 0 {
			return usageErr("--forecast-growth needs --current-rate")
		}
		var err error
		if g, err = capacity.ParseGrowth(*growth); err != nil {
			return usageErr("--forecast-growth: %v", err)
		}
	}
	spec, err := slo.LoadSpec(*sloPath)
	if err != nil {
		return err
	}
	for _, w := range spec.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	out := results.Dir(*outDir)
	if out.HasResults() && !*force {
		return usageErr("--out %s already holds results (--force to replace them)", out)
	}
	mix, err := loadPrompts(fs, *mixPath, *promptsPath, *seed, 0, 0)
	if err != nil {
		return err
	}
	if mix != nil && mix.IsTrace() {
		return usageErr("%s is a trace: its timestamps set the load, which a sweep varies; use a mix of sampled classes", mix.Name())
	}
	source := func() loadgen.Source { return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "default", Text: *prompt}} }
	if mix != nil {
		source = func() loadgen.Source { return mix.WithHeaders(mix.Source(mix.Seed())) }
	}
	var acceptClasses []string
	if mix != nil {
		acceptClasses = mix.AcceptEmpty()
	}
	if err := checkConnections(sweepConnections(tf.api, search), readHostLimits()); err != nil {
		return err
	}
	defer startMemoryLimit(tf.api, sweepPeak(search, *maxInFlight))()
	client, err := tf.open(ctx, func(msg string) { fmt.Fprintln(stderr, "warning:", msg) })
	if err != nil {
		return err
	}
	tel.dial = tf.dialer()
	telCfg, err := tel.config(tf.target, tf.model, tf.auth(), stderr)
	if err != nil {
		return err
	}
	cfg := capacity.Config{Client: client, Source: source, SLO: spec, Search: search,
		Arrival: loadgen.Arrival(*arrival), Burstiness: *burstiness, Seed: *seed, Warmup: *warmup,
		MinDuration: *minDur, MaxDuration: *maxDur, Timeout: *timeout, Grace: graceOption(*grace),
		MaxInFlight: *maxInFlight, Validity: &bounds, AcceptEmpty: tf.acceptEmpty, AcceptEmptyClasses: acceptClasses,
		Telemetry: telCfg, GPUHourCostUSD: tel.gpuHourCost, Streaming: tf.stream, Out: out, Force: *force, CurrentRate: *current, Growth: g,
		Changes: cleanChanges(*changes), Log: stderr,
		Meta: schema.SummaryMeta{Version: version.Version, Target: redact.URL(tf.target), API: tf.api, Model: tf.model}}
	if mix != nil {
		cfg.PlannedLengths = mix.Lengths()
	}
	if isTerminal(stderr) && !*noProgress {
		cfg.Progress = func(label string) pipeline.Progress { return newProgress(stderr, label) }
	}
	if cfg.Sinks, err = lo.sinks(ctx, spec, &tf, "", stderr); err != nil {
		return err
	}
	res, err := capacity.Run(ctx, cfg)
	// Every level's records are in: the final export, bounded, also
	// after Ctrl-C.
	lo.flush(ctx, stderr)
	if res == nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res)
	} else {
		capacity.WriteTable(stdout, res)
	}
	// An interrupted sweep's completed levels are in sweep.json: the
	// report shows them too.
	stopped := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
	if (err == nil || stopped) && !*noReport {
		if rerr := writeDefaultReport(out, stderr); err == nil {
			err = rerr
		}
	}
	fmt.Fprintf(stderr, "sweep in %s\n", out)
	if err != nil {
		return invalidErr("%w", err)
	}
	return judgedExit(results.SweepExit(res))
}

// registerChanges adds --change ID (repeatable): change-record ids to
// record on the run, so compare can pin a regression to a change.
func registerChanges(fs *pflag.FlagSet) *[]string {
	return fs.StringArray("change", nil, "change-record id to record on the results (repeatable), shown by compare")
}

// cleanChanges trims and drops empty ids.
func cleanChanges(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	return out
}

// sweepPeak is the sweep's highest level as one load: the closed loop's
// concurrency when any level is closed, otherwise the open loop's cap on
// requests in flight.
func sweepPeak(s capacity.Search, maxInFlight int) loadgen.Options {
	var peak float64
	for _, l := range append([]capacity.Level{s.To}, s.Levels...) {
		if l.Closed() {
			peak = max(peak, l.Value())
		}
	}
	return loadgen.Options{Closed: peak > 0, Stages: []loadgen.Stage{{Concurrency: int(peak)}}, MaxInFlight: maxInFlight}
}

// sweepConnections is the connections the sweep's highest closed-loop
// level holds (see plannedConnections).
func sweepConnections(api string, s capacity.Search) int64 {
	var peak float64
	for _, l := range append([]capacity.Level{s.To}, s.Levels...) {
		if l.Closed() {
			peak = max(peak, l.Value())
		}
	}
	o := loadgen.Options{Closed: peak > 0, Stages: []loadgen.Stage{{Concurrency: int(peak)}}}
	return plannedConnections(api, o)
}
