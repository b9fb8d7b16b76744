package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/exporters/llmd"
	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	var tf targetFlags
	var lf loadFlags
	var tel telemetryFlags
	tf.dial, tel.dial = dialFrom(ctx), dialFrom(ctx)
	var sc scaleFlags
	tf.register(fs)
	tf.registerAnswer(fs)
	lf.register(fs)
	tel.register(fs)
	sc.register(fs)
	prompt := fs.String("prompt", "Write a short story about a lighthouse keeper.", "prompt text when no --mix or --prompts is given")
	mixPath := fs.String("mix", "", "prompt mix file (kind: Mix): weighted classes, datasets, synthetic lengths, traces, sessions")
	promptsPath := fs.String("prompts", "", "prompt file sent as one class: OpenAI chat JSONL, ShareGPT JSON, or a trace")
	timeScale := fs.Float64("time-scale", 0, "trace replay: multiply trace timestamps (0.5 = twice as fast; default the mix's)")
	sloPath := fs.String("slo", "", "judge the run against this SLO file (kind: SLO), as check does: exit 1 if an objective fails")
	outDir := fs.String("out", "", "directory for "+results.SummaryFile+", "+results.RecordsFile+", "+results.HlogFile+" and "+results.TelemetryFile)
	force := fs.Bool("force", false, "replace the results already in --out")
	asJSON := fs.Bool("json", false, "print "+results.SummaryFile+" to stdout instead of the table")
	llmdReport := fs.Bool("llm-d-report", false, "also write --out/"+llmd.FileName+", llm-d-benchmark's report v"+llmd.Version+" of the run")
	noProgress := fs.Bool("no-progress", false, "no live progress bar (it is off anyway when stderr is not a terminal)")
	var lo liveOutputs
	lo.register(fs, true)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate run [flags]\n\nSend load to an OpenAI-compatible endpoint and report TTFT, ITL, TPOT, E2E and throughput.\n"+
			"Exit 0 ok, 1 an --slo objective failed, 2 usage, 3 run invalid (too many errors, nothing measured,\n"+
			"generator distorted the figures, interrupted, results not written).\n\n%s", fs.FlagUsages())
	}
	changes := registerChanges(fs)
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
	var spec *slo.Spec
	if *sloPath != "" {
		s, err := slo.LoadSpec(*sloPath)
		if err != nil {
			return err
		}
		for _, w := range s.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
		spec = s
	}
	out := results.Dir(*outDir)
	if *llmdReport && out == "" {
		return usageErr("--llm-d-report writes into the results directory: give --out")
	}
	if out != "" && out.HasResults() && !*force {
		return usageErr("--out %s already holds results (--force to replace them)", out)
	}
	// A run of a given length reads of a trace only what it will send
	// (plus a look-ahead), not the whole file.
	var horizon time.Duration
	if fs.Changed("duration") && lf.stages == "" {
		horizon = lf.duration
	}
	mix, err := loadPrompts(fs, *mixPath, *promptsPath, lf.seed, *timeScale, horizon)
	if err != nil {
		return err
	}
	trace := mix != nil && mix.IsTrace()
	if trace && !fs.Changed("duration") && lf.stages == "" {
		// Replay the whole trace, then let its last requests finish.
		lf.duration = mix.Span() + time.Second
	}
	opts, err := lf.options(fs, trace)
	if err != nil {
		return err
	}
	if trace && (lf.rate > 0 || lf.concurrency > 0) {
		return usageErr("%s is a trace: its timestamps set the arrivals; drop --rate/--concurrency", mix.Name())
	}
	if sh, _, err := sc.shardOptions(); err == nil {
		o := opts
		o.Shard = sh
		if err := checkConnections(plannedConnections(tf.api, o), readHostLimits()); err != nil {
			return err
		}
		defer startMemoryLimit(tf.api, o)()
	}
	src := loadgen.Source(&loadgen.Repeat{Prompt: prompts.Prompt{Class: "default", Text: *prompt}})
	opts.AcceptEmpty = tf.acceptEmpty
	if mix != nil {
		opts.AcceptEmptyClasses = mix.AcceptEmpty()
		src = mix.WithHeaders(mix.Source(mix.Seed()))
		fmt.Fprintf(stderr, "mix %s (sha256 %s):\n%s\n", mix.Name(), mix.Hash()[:12], strings.TrimRight(mix.Describe(), "\n"))
	}
	notices := &pipeline.Notices{}
	client, err := tf.open(ctx, func(msg string) {
		fmt.Fprintln(stderr, "warning:", msg)
		notices.Add(msg)
	})
	if err != nil {
		return err
	}
	if mix != nil {
		if err := protocol.CheckModels(ctx, client, mix.Models()); err != nil {
			return invalidErr("%w", redact.Wrap(redact.Text(err.Error(), tf.apiKey), err))
		}
	}
	tel.dial = tf.dialer()
	telCfg, err := tel.config(tf.target, tf.model, tf.auth(), stderr)
	if err != nil {
		return err
	}
	bounds, err := lf.validity.bounds(slo.DefaultValidity())
	if err != nil {
		return err
	}
	ps := pipeline.Spec{Client: client, Source: src, Options: opts, Out: out, Telemetry: telCfg, GPUHourCostUSD: tel.gpuHourCost,
		Streaming: tf.stream, Validity: &bounds, Changes: cleanChanges(*changes), Notices: notices,
		Meta: schema.SummaryMeta{Version: version.Version, Target: redact.URL(tf.target), API: tf.api, Model: tf.model, Load: opts.Describe()}}
	if mix != nil {
		ps.PlannedLengths = mix.Lengths()
	}
	if err := sc.apply(&ps, promptIdentity(mix, *prompt), stderr); err != nil {
		return usageErr("%w", err)
	}
	if spec != nil {
		ps.SLO = &pipeline.Judging{Spec: spec}
	}
	if isTerminal(stderr) && !*noProgress {
		ps.Progress = newProgress(stderr, "")
	}
	sinks, err := lo.sinks(ctx, spec, &tf, sc.shard, stderr)
	if err != nil {
		return err
	}
	if *force && out != "" {
		if err := out.Replace(stderr); err != nil {
			return err
		}
	}
	res, err := pipeline.Run(ctx, ps, sinks...)
	// The final OTLP export comes before anything else can return: an
	// interrupted or failed run's figures so far are still sent.
	lo.flush(ctx, stderr)
	if res == nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(res.Summary)
	} else {
		exporters.WriteText(stdout, res.Summary)
		if res.Summary.SLO != nil {
			fmt.Fprintln(stdout)
			exporters.WriteVerdictTable(stdout, res.Summary.SLO)
		}
	}
	if out != "" {
		fmt.Fprintf(stderr, "results in %s\n", out)
	}
	outcome := runOutcome(res, err, stderr)
	if *llmdReport && out != "" {
		if _, lerr := llmd.Write(out); lerr != nil {
			// A report not written is results not delivered: 3, as for
			// summary.json.
			fmt.Fprintf(stderr, "tailgate run: %v\n", lerr)
			if exitCode(outcome) != slo.ExitInvalid {
				outcome = &exitError{code: slo.ExitInvalid, err: lerr}
			}
		} else {
			fmt.Fprintf(stderr, "llm-d report in %s\n", out.Path(llmd.FileName))
		}
	}
	if perr := lo.pushResults(ctx, stderr); perr != nil {
		// Metrics that did not reach the Pushgateway are results not
		// delivered: 3, whatever the verdict (as for results not written).
		if exitCode(outcome) != slo.ExitInvalid {
			return perr
		}
		fmt.Fprintf(stderr, "tailgate run: %v\n", perr)
	}
	return outcome
}

// runOutcome is a finished run's exit, through results.Exit: the
// pipeline's one judgement (validity, then the SLO report). Every sink
// failure is said on stderr.
func runOutcome(res *pipeline.Result, runErr error, stderr io.Writer) error {
	for _, e := range res.SinkErrors {
		fmt.Fprintf(stderr, "tailgate: %v", e.Err)
		if e.Lost > 0 {
			fmt.Fprintf(stderr, " (%d records not written from there on)", e.Lost)
		}
		fmt.Fprintln(stderr)
	}
	if res.Stopped != nil {
		fmt.Fprintf(stderr, "tailgate: %v\n", res.Stopped)
	}
	code, why := results.Exit(&res.Summary.Validity, res.Summary.SLO)
	if code == slo.ExitOK && (runErr != nil || res.WriteErr() != nil) {
		// Written after the summary: results not delivered.
		code, why = slo.ExitInvalid, fmt.Sprintf("results incomplete on disk (the summary above is complete, from memory): %v", cmpError(runErr, res.WriteErr()))
	}
	return judgedExit(code, why)
}

func cmpError(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// loadPrompts loads --mix or --prompts (nil, nil when neither is given);
// every file error names file, line and field, before anything is sent.
//
// horizon, if not zero, is the run's length: a trace is read only as far
// as the run needs (prompts.LoadOptions.Horizon).
func loadPrompts(fs *pflag.FlagSet, mixPath, promptsPath string, seed uint64, timeScale float64, horizon time.Duration) (*prompts.Mix, error) {
	if mixPath != "" && promptsPath != "" {
		return nil, fmt.Errorf("--mix and --prompts: give one")
	}
	if timeScale < 0 {
		return nil, fmt.Errorf("--time-scale %v: must be positive", timeScale)
	}
	opts := prompts.LoadOptions{TimeScale: timeScale, Horizon: horizon}
	if fs.Changed("seed") {
		opts.Seed = int64(seed)
	}
	switch {
	case mixPath != "":
		return prompts.LoadMix(mixPath, opts)
	case promptsPath != "":
		return prompts.LoadPromptsFile(promptsPath, opts)
	}
	return nil, nil
}
