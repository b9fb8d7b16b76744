package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdValidate(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("validate", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var tf targetFlags
	var tel telemetryFlags
	tf.register(fs)
	tel.register(fs)
	planPath := fs.String("plan", "", "acceptance plan (kind: Plan) (required)")
	outDir := fs.String("out", "", "evidence directory for every result (required)")
	record := fs.String("record", "", "record a manual stage's result instead of running: STAGE=pass|fail")
	by := fs.String("by", "", "with --record: who tested it")
	note := fs.String("note", "", "with --record: what was seen")
	timeout := fs.Duration("timeout", 2*time.Minute, "per-request timeout")
	maxInFlight := fs.Int("max-inflight", 10000, "open loop: cap on requests in flight")
	force := fs.Bool("force", false, "run into an --out directory that already holds results")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tailgate validate --plan plan.yaml --out DIR [flags]\n"+
			"       tailgate validate --plan plan.yaml --out DIR --record STAGE=pass|fail --by NAME\n\n"+
			"Runs the plan's stages in order, judges every objective on each, prints the verdicts and writes\n"+
			"DIR: verdict.json, junit.xml, requests.jsonl, per-stage summaries and histograms, the input files,\n"+
			"environment.json and manifest.json (sign it with tailgate sign).\n"+
			"Exit 0 all pass or waived, 1 an objective failed or a manual stage is pending, 2 usage, 3 run invalid.\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if *planPath == "" || *outDir == "" || fs.NArg() > 0 {
		fs.Usage()
		return exitUsage
	}
	plan, err := slo.LoadPlan(*planPath)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	for _, w := range plan.SLO.Warnings {
		fmt.Fprintln(stderr, "warning:", w)
	}
	if *record != "" {
		return recordManual(plan, *outDir, *record, *by, *note, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(*outDir, requestsFile)); err == nil && !*force {
		fmt.Fprintf(stderr, "tailgate validate: %s already holds results (--force to replace them)\n", *outDir)
		return exitUsage
	}
	if !fs.Changed("target") {
		tf.target = plan.Target
	}
	if !fs.Changed("model") && plan.Model != "" {
		tf.model = plan.Model
	}
	if !fs.Changed("api") && plan.API != "" {
		tf.api = plan.API
	}
	mix, err := prompts.LoadMix(plan.Resolve(plan.MixPath), prompts.LoadOptions{Seed: int64(plan.Seed)})
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	client, err := tf.client(mix.HasSessions())
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	env := evidence.Fingerprint("tailgate", version, os.Args)
	env.Started = time.Now().UTC()
	env.Inputs = map[string]evidence.Input{}
	for role, p := range map[string]string{"plan": *planPath, "slo": plan.Resolve(plan.SLOPath), "mix": plan.Resolve(plan.MixPath)} {
		in, err := evidence.CopyInput(*outDir, role, p)
		if err != nil {
			fmt.Fprintln(stderr, "tailgate validate:", err)
			return exitUsage
		}
		env.Inputs[role] = in
	}
	// The mix resolved: every setting and each data file by name and
	// SHA-256, so the prompts are reproducible from the evidence.
	if err := os.WriteFile(filepath.Join(*outDir, evidence.InputsDir, "mix.canonical.json"), append(mix.Canonical(), '\n'), 0o644); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	probeCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	server := client.DescribeServer(probeCtx)
	env.Server = &server
	cancel()
	telCfg, err := tel.config(tf.target, tf.auth(), stderr)
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	if g := gpusForEvidence(telCfg); len(g) > 0 {
		env.GPUs = g
	}
	queue := map[string]*slo.QueueTelemetry{}

	var all []loadgen.Record
	cpu := map[string]float64{}
	interrupted := false
	seq := int64(0)
	for _, st := range plan.Stages {
		if st.Manual {
			continue
		}
		if ctx.Err() != nil {
			interrupted = true
			break
		}
		fmt.Fprintf(stderr, "stage %s: %s for %s\n", st.Name, loadText(st), st.Duration)
		opts := loadgen.Options{
			Stages:  []loadgen.Stage{{Name: st.Name, Rate: st.Rate, Concurrency: st.Concurrency, Duration: st.Duration}},
			Closed:  st.Concurrency > 0,
			Arrival: st.Arrival, Burstiness: st.Burstiness, Seed: plan.Seed + uint64(seq),
			WarmupDuration: st.Warmup, Timeout: *timeout, MaxInFlight: *maxInFlight,
		}
		if opts.Arrival == "" && !opts.Closed {
			opts.Arrival = loadgen.ArrivalConstant
		}
		spec := runSpec{Client: client, Source: mix.Source(int64(plan.Seed) + seq), Options: opts,
			OutDir: filepath.Join(*outDir, "stages", st.Name), Goodput: plan.SLO.GoodputFunc(), KeepRecords: true,
			Telemetry: telCfg,
			Meta:      loadgen.SummaryMeta{Version: version, Target: safeURL(tf.target), API: tf.api, Model: tf.model, Load: loadMeta(opts)}}
		res, err := executeRun(ctx, spec)
		if res == nil {
			fmt.Fprintf(stderr, "tailgate validate: stage %s: %v\n", st.Name, err)
			return exitUsage
		}
		if err != nil || res.WriteErr != nil {
			fmt.Fprintf(stderr, "tailgate validate: stage %s: %v %v\n", st.Name, err, res.WriteErr)
			interrupted = true
		}
		cpu[st.Name] = res.Info.CPUUtilization
		if q := queueTelemetry(res.QueueDelay); q != nil {
			queue[st.Name] = q
		}
		for _, r := range res.Records {
			rec := *r
			rec.Seq, rec.Stage = seq, st.Name
			seq++
			all = append(all, rec)
		}
		if res.Info.Interrupted {
			interrupted = true
			break
		}
	}
	if err := writeRecords(filepath.Join(*outDir, requestsFile), all); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitInvalid
	}
	if len(queue) > 0 {
		if err := writeQueueTelemetry(filepath.Join(*outDir, queueFile), queue); err != nil {
			fmt.Fprintln(stderr, "tailgate validate:", err)
			return exitInvalid
		}
	}
	manual, err := readManual(filepath.Join(*outDir, manualFile))
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	now := time.Now().UTC()
	rep := slo.Assess(plan, plan.SLO, slo.Input{Records: all, Now: now, Manual: manual, ClientCPU: cpu, QueueDelay: queue})
	if interrupted {
		rep.Problems = append(rep.Problems, slo.Problem{Check: "interrupted", Detail: "the run was stopped before every stage finished"})
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	}
	env.Ended = now
	return finishEvidence(*outDir, rep, &env, stdout, stderr)
}

func loadText(st slo.Stage) string {
	if st.Concurrency > 0 {
		return fmt.Sprintf("%d concurrent", st.Concurrency)
	}
	a := st.Arrival
	if a == "" {
		a = loadgen.ArrivalConstant
	}
	return fmt.Sprintf("%g req/s %s", st.Rate, a)
}

// finishEvidence writes the verdicts, the environment and the manifest,
// prints the table and returns the report's exit code.
func finishEvidence(dir string, rep *slo.Report, env *evidence.Environment, stdout, stderr io.Writer) int {
	rep.Tool = slo.Tool{Name: "tailgate", Version: version}
	if err := exporters.WriteVerdictTable(stdout, rep); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
	}
	if err := writeVerdicts(dir, rep); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitInvalid
	}
	if env != nil {
		if err := evidence.WriteEnvironment(dir, env); err != nil {
			fmt.Fprintln(stderr, "tailgate validate:", err)
			return exitInvalid
		}
	}
	os.Remove(filepath.Join(dir, evidence.SignatureFile)) // a stale signature would no longer verify
	if _, err := evidence.Write(dir); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitInvalid
	}
	fmt.Fprintf(stderr, "evidence in %s (sign it: tailgate sign --key KEY %s)\n", dir, dir)
	return rep.ExitCode
}

func writeRecords(path string, recs []loadgen.Record) error {
	w, err := exporters.CreateJSONL(path)
	if err != nil {
		return err
	}
	for i := range recs {
		if err := w.Write(&recs[i]); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}

// recordManual adds a person's result for a manual stage and re-judges the
// saved run.
func recordManual(plan *slo.Plan, dir, rec, by, note string, stdout, stderr io.Writer) int {
	name, result, ok := strings.Cut(rec, "=")
	st, found := plan.Stage(name)
	switch {
	case !ok || (result != "pass" && result != "fail"):
		fmt.Fprintf(stderr, "tailgate validate: --record %q: want STAGE=pass or STAGE=fail\n", rec)
		return exitUsage
	case !found || !st.Manual:
		fmt.Fprintf(stderr, "tailgate validate: --record: %q is not a manual stage of %s\n", name, plan.File)
		return exitUsage
	case strings.TrimSpace(by) == "":
		fmt.Fprintln(stderr, "tailgate validate: --record needs --by NAME: who tested it")
		return exitUsage
	}
	records, err := readRecords(filepath.Join(dir, requestsFile))
	if err != nil {
		fmt.Fprintf(stderr, "tailgate validate: --record needs the run's results: %v\n", err)
		return exitUsage
	}
	manual, err := readManual(filepath.Join(dir, manualFile))
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	now := time.Now().UTC()
	manual = append(manual, slo.ManualRecord{Stage: name, Pass: result == "pass", By: by, At: now, Note: note})
	if err := exporters.WriteJSON(filepath.Join(dir, manualFile), manual); err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	queue, err := readQueueTelemetry(filepath.Join(dir, queueFile))
	if err != nil {
		fmt.Fprintln(stderr, "tailgate validate:", err)
		return exitUsage
	}
	in := slo.Input{Records: records, Now: now, Manual: manual, ClientCPU: map[string]float64{}, QueueDelay: queue}
	if prev, err := readReport(filepath.Join(dir, verdictFile)); err == nil {
		for _, s := range prev.Stages {
			if s.ClientCPU != nil {
				in.ClientCPU[s.Name] = *s.ClientCPU
			}
		}
	}
	var env *evidence.Environment
	if b, err := os.ReadFile(filepath.Join(dir, evidence.EnvironmentFile)); err == nil {
		var e evidence.Environment
		if json.Unmarshal(b, &e) == nil {
			env = &e
		}
	}
	fmt.Fprintf(stdout, "recorded %s=%s by %s\n\n", name, result, by)
	return finishEvidence(dir, slo.Assess(plan, plan.SLO, in), env, stdout, stderr)
}
