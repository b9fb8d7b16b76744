package acceptance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	tgversion "github.com/tailgate-llm/tailgate/internal/version"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/exporters/llmd"
	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/report"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// Config is one acceptance run.
type Config struct {
	Plan     *slo.Plan
	PlanPath string
	Mix      *prompts.Mix
	Out      results.Dir
	// Force runs into an Out that already holds results.
	Force bool
	// Client sends the requests; Target, API and Model describe it for the
	// summaries (Target is redacted before it is written).
	Client             loadgen.Client
	Target, API, Model string
	Streaming          bool
	// Server describes the target for environment.json (nil: not asked).
	Server func(ctx context.Context) *evidence.Server
	// Preflight, if set, checks the target and model before the first stage
	// so an unreachable target fails in seconds, not after the plan.
	Preflight func(ctx context.Context) error
	// Timeout bounds each request; Grace is how long in-flight requests may
	// finish after a stage's schedule ends; MaxInFlight caps open loop.
	Timeout, Grace time.Duration
	MaxInFlight    int
	// AcceptEmpty makes answers with no output token successes
	// (loadgen.Options.AcceptEmpty); the mix's accept_empty classes are
	// accepted either way.
	AcceptEmpty bool
	// Validity is the bounds every stage is held to (nil: the plan's
	// validity: block, or slo.DefaultValidity); the flags' over the plan's.
	Validity  *slo.Validity
	Telemetry *telemetry.Config
	// GPUs are the accelerators to record in environment.json.
	GPUs []evidence.GPU
	// Version is tailgate's; Args the command line (redacted before it is
	// written).
	Version string
	Args    []string
	// GPUHourCostUSD prices each stage's GPU time beside its energy.
	GPUHourCostUSD float64
	// Changes are change-record ids recorded in every stage's summary.json,
	// so compare can pin a regression to a change.
	Changes []string
	// Log receives one line per stage and warnings (nil: discarded).
	Log io.Writer
	// Progress, if set, makes a progress display for each stage.
	Progress func(label string) pipeline.Progress
	// Shard runs one shard of every stage (see loadgen.Shard); tailgate
	// merge combines the shards' evidence into one verdict.
	Shard loadgen.Shard
	// StartAt, if set, is when the first stage starts; stage k starts at
	// StartAt + the durations and graces of the stages before it, plus
	// StageGap each (StageStarts), so the shards of every stage share an
	// epoch however fast each shard's previous stage drained.
	StartAt time.Time
	// LLMDReport writes llm-d-benchmark's report of each stage into the
	// pack (stages/*/benchmark_report.json) before the manifest is made,
	// so the manifest covers them.
	LLMDReport bool
	// Sinks get every stage's records too (the Prometheus sink of
	// --push). They are closed after each stage, so Close must leave them
	// usable for the next.
	Sinks []pipeline.Sink
}

// StageGap separates the stages of a run with a shared StartAt: the
// margin after a stage's grace for its results to be written.
const StageGap = 2 * time.Second

// StageStarts is when each non-manual stage of plan starts, by stage name,
// for a run starting at start whose in-flight requests may finish within
// grace (loadgen.Options.Grace: 0 is the default, negative none).
func StageStarts(plan *slo.Plan, start time.Time, grace time.Duration) map[string]time.Time {
	switch {
	case grace == 0:
		grace = loadgen.DefaultGrace
	case grace < 0:
		grace = 0
	}
	out := map[string]time.Time{}
	at := start
	for _, st := range plan.Stages {
		if st.Manual {
			continue
		}
		out[st.Name] = at
		at = at.Add(st.Duration + grace + StageGap)
	}
	return out
}

// Run runs every stage of the plan, judges every objective and writes the
// evidence pack into cfg.Out. The report's ExitCode is the command's exit
// status. An error is a run that could not start or finish writing: a
// *results.WriteError, an *InvalidError (target unreachable) or a
// configuration error.
//
// The steps: prepare the directory (after the preflight, so an unreachable
// target leaves it untouched), record the inputs and the environment, run
// the stages, judge the plan and finish the pack.
func Run(ctx context.Context, cfg Config) (*slo.Report, error) {
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	if err := prepare(ctx, cfg, log); err != nil {
		return nil, err
	}
	env, err := recordInputs(ctx, cfg)
	if err != nil {
		return nil, err
	}
	bounds := cfg.Plan.Validity
	if cfg.Validity != nil {
		bounds = *cfg.Validity
	}
	// Every stage judges its waivers at the same instant, the plan's start,
	// so check (which judges at verdict.json's evaluated_at) agrees.
	judgedAt := env.Started
	ran, err := runStages(ctx, cfg, env, bounds, judgedAt, log)
	if err != nil {
		return nil, err
	}
	if len(ran.queue) > 0 {
		if err := cfg.Out.WriteQueueDelay(ran.queue); err != nil && ran.writeErr == nil {
			ran.writeErr = err
		}
	}
	manual, err := cfg.Out.ReadManual()
	if err != nil {
		return nil, err
	}
	env.Ended = time.Now().UTC()
	rep := judge(ctx, cfg.Plan, ran, bounds, slo.Input{Now: judgedAt, Manual: manual})
	if err := finish(cfg.Out, rep, env, cfg.Version, cfg.LLMDReport); err != nil {
		return rep, err
	}
	if ran.writeErr != nil {
		return rep, ran.writeErr
	}
	return rep, nil
}

// prepare refuses an output directory that holds results unless forced,
// runs the preflight, then clears (when forced) and creates the directory.
func prepare(ctx context.Context, cfg Config, log io.Writer) error {
	out := cfg.Out
	if out.HasResults() && !cfg.Force {
		return &field.Error{Field: "Force", Hint: "{} to replace them", Err: fmt.Errorf("%s already holds results", out)}
	}
	if cfg.Preflight != nil {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := cfg.Preflight(pctx)
		cancel()
		if err != nil {
			return &InvalidError{fmt.Errorf("preflight: %w", err)}
		}
	}
	if cfg.Force {
		if err := out.Replace(log); err != nil {
			return err
		}
	}
	return out.Create()
}

// recordInputs copies the plan, SLO and mix files into the pack, writes
// the resolved mix, and returns the environment as far as it is known
// before the load: the host, the server's description and the GPUs.
func recordInputs(ctx context.Context, cfg Config) (*evidence.Environment, error) {
	plan, out := cfg.Plan, cfg.Out
	env := evidence.Fingerprint("tailgate", cfg.Version, cfg.Args)
	env.Started = time.Now().UTC()
	env.Inputs = map[string]evidence.Input{}
	for role, p := range map[string]string{"plan": cfg.PlanPath, "slo": plan.Resolve(plan.SLOPath), "mix": plan.Resolve(plan.MixPath)} {
		in, err := evidence.CopyInput(string(out), role, p)
		if err != nil {
			return nil, &results.WriteError{Path: filepath.Join(string(out), results.InputsDir), Err: err}
		}
		env.Inputs[role] = in
	}
	// The mix resolved: every setting and each data file by name and
	// SHA-256, so the prompts are reproducible from the evidence.
	canon := filepath.Join(string(out), results.InputsDir, results.CanonicalMixFile)
	if err := os.WriteFile(canon, append(cfg.Mix.Canonical(), '\n'), 0o644); err != nil {
		return nil, &results.WriteError{Path: canon, Err: err}
	}
	if cfg.Server != nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		env.Server = cfg.Server(pctx)
		cancel()
	}
	if len(cfg.GPUs) > 0 {
		env.GPUs = cfg.GPUs
	}
	return &env, nil
}

// stagesRun is what the stages left: each one's report and queue delay,
// the stages that ended in error, and the first write error (after which
// no stage ran).
type stagesRun struct {
	reports  map[string]*slo.Report
	queue    map[string]*telemetry.Histogram
	problems []slo.Problem
	writeErr error
}

// runStages runs the plan's load stages in order, each through its own
// pipeline into its own directory, the only copy of its records: readers
// of the whole plan read the stages in turn (results.Dir.ReadRunRecords).
// It stops at a write error, an interrupted stage or a cancelled ctx; the
// error is a stage that could not start at all.
func runStages(ctx context.Context, cfg Config, env *evidence.Environment, bounds slo.Validity, judgedAt time.Time, log io.Writer) (stagesRun, error) {
	plan, out := cfg.Plan, cfg.Out
	ran := stagesRun{reports: map[string]*slo.Report{}, queue: map[string]*telemetry.Histogram{}}
	stages := 0
	for _, st := range plan.Stages {
		if !st.Manual {
			stages++
		}
	}
	var starts map[string]time.Time
	if !cfg.StartAt.IsZero() {
		starts = StageStarts(plan, cfg.StartAt, cfg.Grace)
	}
	identity := map[string]string{"mix": cfg.Mix.Name() + " sha256:" + cfg.Mix.Hash()}
	for role, in := range env.Inputs {
		identity["input."+role] = in.SHA256
	}
	n := 0
	for i, st := range plan.Stages {
		if st.Manual {
			continue
		}
		n++
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(log, "stage %s: %s for %s\n", st.Name, loadText(st), st.Duration)
		opts := stageOptions(cfg, i, starts[st.Name])
		stage := st
		spec := pipeline.Spec{Client: cfg.Client, Source: cfg.Mix.Source(int64(plan.Seed) + int64(i)), Options: opts,
			Out: out.Stage(st.Name), Telemetry: cfg.Telemetry, Validity: &bounds,
			SLO:       &pipeline.Judging{Spec: plan.SLO, Stage: &stage, Waivers: plan.Waivers, Now: judgedAt},
			Streaming: cfg.Streaming, Identity: identity, Changes: cfg.Changes, GPUHourCostUSD: cfg.GPUHourCostUSD,
			PlannedLengths: plannedLengths(cfg.Mix),
			Meta:           schema.SummaryMeta{Version: cfg.Version, Target: cfg.Target, API: cfg.API, Model: cfg.Model, Load: opts.Describe()}}
		if cfg.Progress != nil {
			spec.Progress = cfg.Progress(fmt.Sprintf("stage %s %d/%d", st.Name, n, stages))
		}
		res, err := pipeline.Run(ctx, spec, cfg.Sinks...)
		if res == nil {
			return ran, fmt.Errorf("stage %s: %w", st.Name, err)
		}
		if err != nil {
			ran.problems = append(ran.problems, slo.Problem{Check: "stage_error", Detail: fmt.Sprintf("stage %s: %v", st.Name, err)})
		}
		ran.reports[st.Name] = res.Report
		if q := results.QueueDelay(res.QueueDelay[st.Name]); q != nil {
			ran.queue[st.Name] = q
		}
		for _, w := range res.Summary.Warnings {
			fmt.Fprintf(log, "stage %s: warning: %s\n", st.Name, w)
		}
		if we := res.WriteErr(); we != nil {
			ran.writeErr = we
			break
		}
		if res.Info.Interrupted {
			break
		}
	}
	return ran, nil
}

// stageOptions are the load options of the plan's stage i, starting at
// startAt (zero: when its turn comes).
func stageOptions(cfg Config, i int, startAt time.Time) loadgen.Options {
	st := cfg.Plan.Stages[i]
	opts := loadgen.Options{
		Stages:  []loadgen.Stage{{Name: st.Name, Rate: st.Rate, Concurrency: st.Concurrency, Duration: st.Duration}},
		Closed:  st.Concurrency > 0,
		Arrival: loadgen.ResolveArrival(loadgen.Arrival(st.Arrival), st.Concurrency > 0), Burstiness: st.Burstiness,
		// One seed per stage: the same plan sends the same prompts on
		// the same schedule, whatever earlier stages measured.
		Seed:           cfg.Plan.Seed + uint64(i),
		WarmupDuration: st.Warmup, Timeout: cfg.Timeout, Grace: cfg.Grace, MaxInFlight: cfg.MaxInFlight,
		Shard: cfg.Shard, StartAt: startAt,
		AcceptEmpty: cfg.AcceptEmpty, AcceptEmptyClasses: cfg.Mix.AcceptEmpty(),
	}
	return opts
}

// judge combines the stages' reports into the plan's, and makes it
// INVALID (exit 3) when results are missing, the run was stopped, or a
// stage ended in error: a verdict over part of the plan is no verdict.
func judge(ctx context.Context, plan *slo.Plan, ran stagesRun, bounds slo.Validity, in slo.Input) *slo.Report {
	rep := slo.Combine(plan, ran.reports, bounds, in)
	rep.Problems = append(rep.Problems, ran.problems...)
	switch {
	case ran.writeErr != nil:
		rep.Problems = append(rep.Problems, slo.Problem{Check: "results_incomplete", Detail: ran.writeErr.Error()})
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	case ctx.Err() != nil:
		rep.Problems = append(rep.Problems, slo.Problem{Check: "interrupted", Detail: "the run was stopped before every stage finished"})
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	case len(ran.problems) > 0:
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	}
	return rep
}

func loadText(st slo.Stage) string {
	if st.Concurrency > 0 {
		return fmt.Sprintf("%d concurrent", st.Concurrency)
	}
	return fmt.Sprintf("%g req/s %s", st.Rate, loadgen.ResolveArrival(loadgen.Arrival(st.Arrival), false))
}

// Finish writes the verdicts, the environment (if given), report.html
// and a new manifest into out. A signature over an older manifest is
// removed: it would no longer verify. llm-d reports already in the pack
// are written again: their experiment id is the new verdict's.
func Finish(out results.Dir, rep *slo.Report, env *evidence.Environment, version string) error {
	return finish(out, rep, env, version, false)
}

// hasLLMD says whether a stage of the pack holds an llm-d report.
func hasLLMD(out results.Dir, rep *slo.Report) bool {
	for _, st := range rep.Stages {
		if _, err := os.Stat(out.Stage(st.Name).Path(llmd.FileName)); err == nil {
			return true
		}
	}
	return false
}

func finish(out results.Dir, rep *slo.Report, env *evidence.Environment, version string, llmdReport bool) error {
	rep.Tool = tgversion.NewTool(version)
	// Each stage's start, from its summary: junit.xml's timestamps say
	// when the stages ran, however often the pack is judged again.
	for i := range rep.Stages {
		st := &rep.Stages[i]
		if st.Manual || !st.Started.IsZero() {
			continue
		}
		if s, err := out.Stage(st.Name).ReadSummary(); err == nil {
			if t, err := time.Parse(time.RFC3339Nano, s.Run.Started); err == nil {
				st.Started = t
			}
		}
	}
	if err := exporters.WriteVerdicts(out, rep); err != nil {
		return err
	}
	if env != nil {
		if err := evidence.WriteEnvironment(string(out), env); err != nil {
			return &results.WriteError{Path: out.Path(results.EnvironmentFile), Err: err}
		}
	}
	if llmdReport || hasLLMD(out, rep) {
		if _, err := llmd.Write(out); err != nil {
			var we *results.WriteError
			if !errors.As(err, &we) {
				err = &results.WriteError{Path: out.Path(results.StagesDir), Err: err}
			}
			return err
		}
	}
	// The report is part of the evidence, so the manifest covers it; one
	// that cannot be made is results not written.
	if err := report.Write(out.Path(results.ReportFile), report.FormatHTML, []string{string(out)}, report.Options{Version: version}); err != nil {
		var we *results.WriteError
		if !errors.As(err, &we) {
			err = &results.WriteError{Path: out.Path(results.ReportFile), Err: err}
		}
		return err
	}
	os.Remove(out.Path(results.SignatureFile))
	if _, err := evidence.Write(string(out)); err != nil {
		return &results.WriteError{Path: out.Path(results.ManifestFile), Err: err}
	}
	return nil
}

// readEnvironment reads out's environment.json (nil if absent or bad).
func readEnvironment(out results.Dir) *evidence.Environment {
	b, err := os.ReadFile(out.Path(results.EnvironmentFile))
	if err != nil {
		return nil
	}
	var e evidence.Environment
	if json.Unmarshal(b, &e) != nil {
		return nil
	}
	return &e
}

// plannedLengths is mix's length plan, nil without a mix.
func plannedLengths(mix *prompts.Mix) *prompts.LengthPlan {
	if mix == nil {
		return nil
	}
	return mix.Lengths()
}
