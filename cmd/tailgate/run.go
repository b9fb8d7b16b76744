package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// targetFlags are the endpoint flags shared by run and validate.
type targetFlags struct {
	target, api, model string
	maxTokens          int
	stream             bool
	apiKeyFile         string
	headers            []string
	insecure           bool
	caFile             string
	apiKey             string // read by client(); never printed
}

func (t *targetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.target, "target", "http://127.0.0.1:8000", "base URL of the OpenAI-compatible server")
	fs.StringVar(&t.api, "api", "openai-chat", "protocol: openai-chat or openai-completions")
	fs.StringVar(&t.model, "model", "", "model name (default: the first one the server lists at /v1/models)")
	fs.IntVar(&t.maxTokens, "max-tokens", 128, "max output tokens when the prompt does not set them")
	fs.BoolVar(&t.stream, "stream", true, "stream responses (SSE); --stream=false for single responses")
	fs.StringVar(&t.apiKeyFile, "api-key-file", "", "file holding the API key (default: $OPENAI_API_KEY)")
	fs.StringArrayVar(&t.headers, "header", nil, "extra request header \"Name: value\" (repeatable)")
	fs.BoolVar(&t.insecure, "insecure", false, "skip TLS certificate verification")
	fs.StringVar(&t.caFile, "ca-file", "", "PEM CA bundle to verify the server with")
}

// auth is the credential header for same-host side requests (/metrics).
func (t *targetFlags) auth() http.Header {
	h := http.Header{}
	if t.apiKey != "" {
		h.Set("Authorization", "Bearer "+t.apiKey)
	}
	return h
}

func (t *targetFlags) client(keepText bool) (*openai.Client, error) {
	key, err := openai.APIKeyFromEnvOrFile(t.apiKeyFile)
	if err != nil {
		return nil, err
	}
	t.apiKey = key
	return openai.New(openai.Config{BaseURL: t.target, API: t.api, Model: t.model, Stream: openai.Bool(t.stream),
		MaxTokens: t.maxTokens, Transport: transport.Config{APIKey: key, Headers: t.headers,
			Insecure: t.insecure, CAFile: t.caFile}})
}

// loadFlags describe the schedule.
type loadFlags struct {
	rate        float64
	concurrency int
	arrival     string
	burstiness  float64
	stages      string
	ramp        time.Duration
	duration    time.Duration
	requests    int
	warmup      string
	timeout     time.Duration
	maxInFlight int
	seed        uint64
}

func (l *loadFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&l.rate, "rate", 0, "open loop: requests per second")
	fs.IntVar(&l.concurrency, "concurrency", 0, "closed loop: requests in flight (each sent when the previous ends)")
	fs.StringVar(&l.arrival, "arrival", "poisson", "open-loop arrivals: constant, poisson or gamma")
	fs.Float64Var(&l.burstiness, "burstiness", 1, "gamma shape: 1 = Poisson, <1 burstier, >1 smoother")
	fs.StringVar(&l.stages, "stages", "", "load stages LEVEL@DURATION,...: rates 10@1m,50@2m (open loop) or concurrencies c8@1m,c32@2m (closed loop)")
	fs.DurationVar(&l.ramp, "ramp", 0, "linear ramp at the start of each stage from the previous level")
	fs.DurationVar(&l.duration, "duration", 30*time.Second, "run length (without --stages)")
	fs.IntVar(&l.requests, "requests", 0, "stop after this many requests (0: no limit)")
	fs.StringVar(&l.warmup, "warmup", "", "warm-up left out of the figures: a count (20) or a duration (10s)")
	fs.DurationVar(&l.timeout, "timeout", 2*time.Minute, "per-request timeout")
	fs.IntVar(&l.maxInFlight, "max-inflight", 10000, "open loop: cap on requests in flight; late requests count their wait")
	fs.Uint64Var(&l.seed, "seed", 1, "seed for arrivals and prompt sampling")
}

func (l *loadFlags) options(fs *pflag.FlagSet, trace bool) (loadgen.Options, error) {
	o := loadgen.Options{Arrival: l.arrival, Burstiness: l.burstiness, Seed: l.seed, Trace: trace,
		MaxInFlight: l.maxInFlight, Requests: l.requests, Timeout: l.timeout}
	// Closed loop: --concurrency, or stages written as concurrencies
	// ("c8@30s,c32@1m").
	o.Closed = l.concurrency > 0 || strings.HasPrefix(strings.TrimSpace(l.stages), "c")
	if l.rate > 0 && o.Closed {
		return o, fmt.Errorf("--rate and --concurrency: choose open loop (--rate) or closed loop (--concurrency)")
	}
	if l.rate < 0 || l.concurrency < 0 {
		return o, fmt.Errorf("--rate and --concurrency must not be negative")
	}
	switch {
	case l.stages != "":
		if fs.Changed("duration") {
			return o, fmt.Errorf("--stages and --duration: the stages set the duration")
		}
		st, err := loadgen.ParseStages(l.stages, l.ramp, o.Closed)
		if err != nil {
			return o, fmt.Errorf("--stages: %w", err)
		}
		o.Stages = st
	case trace:
		o.Stages = []loadgen.Stage{{Name: "trace", Duration: l.duration}}
	case o.Closed:
		o.Stages = []loadgen.Stage{{Name: "main", Concurrency: l.concurrency, Duration: l.duration}}
	case l.rate > 0:
		o.Stages = []loadgen.Stage{{Name: "main", Rate: l.rate, Duration: l.duration}}
	default:
		return o, fmt.Errorf("no load given: set --rate (open loop), --concurrency (closed loop) or --stages")
	}
	if l.duration <= 0 && l.stages == "" {
		return o, fmt.Errorf("--duration %v: must be positive", l.duration)
	}
	if w := strings.TrimSpace(l.warmup); w != "" {
		if n, err := strconv.Atoi(w); err == nil && n >= 0 {
			o.WarmupRequests = n
		} else if d, err := time.ParseDuration(w); err == nil && d >= 0 {
			o.WarmupDuration = d
		} else {
			return o, fmt.Errorf("--warmup %q: want a request count (20) or a duration (10s)", w)
		}
	}
	return o, nil
}

// loadMeta describes the load for summary.json.
func loadMeta(o loadgen.Options) map[string]any {
	m := map[string]any{"mode": "open", "arrival": o.Arrival, "max_inflight": o.MaxInFlight,
		"timeout_s": o.Timeout.Seconds(), "seed": o.Seed}
	if o.Closed {
		m = map[string]any{"mode": "closed", "timeout_s": o.Timeout.Seconds(), "seed": o.Seed}
	}
	if o.Trace {
		m["mode"] = "trace"
	}
	if o.Arrival == loadgen.ArrivalGamma {
		m["burstiness"] = o.Burstiness
	}
	var stages []string
	for _, s := range o.Stages {
		lvl := strconv.FormatFloat(s.Rate, 'g', -1, 64)
		if o.Closed {
			lvl = "c" + strconv.Itoa(s.Concurrency)
		}
		st := lvl + "@" + s.Duration.String()
		if s.Ramp > 0 {
			st += "~" + s.Ramp.String()
		}
		stages = append(stages, st)
	}
	m["stages"] = strings.Join(stages, ",")
	if o.Requests > 0 {
		m["requests"] = o.Requests
	}
	if o.WarmupRequests > 0 {
		m["warmup_requests"] = o.WarmupRequests
	}
	if o.WarmupDuration > 0 {
		m["warmup_s"] = o.WarmupDuration.Seconds()
	}
	return m
}

func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var tf targetFlags
	var lf loadFlags
	var tel telemetryFlags
	tf.register(fs)
	lf.register(fs)
	tel.register(fs)
	prompt := fs.String("prompt", "Write a short story about a lighthouse keeper.", "prompt text when no --mix or --prompts is given")
	mixPath := fs.String("mix", "", "prompt mix file (kind: Mix): weighted classes, datasets, synthetic lengths, traces, sessions")
	promptsPath := fs.String("prompts", "", "prompt file sent as one class: OpenAI chat JSONL, ShareGPT JSON, or a trace")
	timeScale := fs.Float64("time-scale", 0, "trace replay: multiply trace timestamps (0.5 = twice as fast; default the mix's)")
	outDir := fs.String("out", "", "directory for summary.json, requests.jsonl and latency.hlog")
	asJSON := fs.Bool("json", false, "print summary.json to stdout instead of the table")
	noProgress := fs.Bool("no-progress", false, "no live status line (it is off anyway when stderr is not a terminal)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: tailgate run [flags]\n\nSend load to an OpenAI-compatible endpoint and report TTFT, ITL, TPOT, E2E and throughput.\n\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if err == pflag.ErrHelp {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tailgate run: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	mix, err := loadPrompts(fs, *mixPath, *promptsPath, lf.seed, *timeScale)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		return exitUsage
	}
	trace := mix != nil && mix.IsTrace()
	if trace && !fs.Changed("duration") && lf.stages == "" {
		// Replay the whole trace, then let its last requests finish.
		lf.duration = mix.Span() + time.Second
	}
	opts, err := lf.options(fs, trace)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		return exitUsage
	}
	if trace && (lf.rate > 0 || lf.concurrency > 0) {
		fmt.Fprintf(stderr, "tailgate run: %s is a trace: its timestamps set the arrivals; drop --rate/--concurrency\n", mix.Name())
		return exitUsage
	}
	src := loadgen.Source(&loadgen.Repeat{Prompt: prompts.Prompt{Class: "default", Text: *prompt}})
	if mix != nil {
		src = mix.Source(mix.Seed())
		opts.KeepText = mix.HasSessions()
		fmt.Fprintf(stderr, "mix %s (sha256 %s):\n%s\n", mix.Name(), mix.Hash()[:12], strings.TrimRight(mix.Describe(), "\n"))
	}
	client, err := tf.client(opts.KeepText)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		return exitUsage
	}
	if tf.model == "" {
		if tf.model, err = client.DiscoverModel(ctx); err != nil {
			fmt.Fprintf(stderr, "tailgate run: --model not given and %v\n", err)
			return exitInvalid
		}
		client.SetModel(tf.model)
	}
	telCfg, err := tel.config(tf.target, tf.auth(), stderr)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		return exitUsage
	}
	spec := runSpec{Client: client, Source: src, Options: opts, OutDir: *outDir, Telemetry: telCfg,
		Meta: loadgen.SummaryMeta{Version: version, Target: safeURL(tf.target), API: tf.api, Model: tf.model, Load: loadMeta(opts)}}
	if f, ok := stderr.(*os.File); ok && !*noProgress && term.IsTerminal(int(f.Fd())) {
		spec.Progress = stderr
	}
	res, err := executeRun(ctx, spec)
	if res == nil {
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		enc := jsonEncoder(stdout)
		enc.Encode(res.Summary)
	} else {
		exporters.WriteText(stdout, res.Summary)
	}
	code := exitOK
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "tailgate run: %v\n", err)
		code = exitInvalid
	case res.WriteErr != nil:
		fmt.Fprintf(stderr, "tailgate run: results incomplete: %v\n", res.WriteErr)
		code = exitInvalid
	case res.Info.Interrupted:
		fmt.Fprintf(stderr, "tailgate run: interrupted; partial results written\n")
		code = exitInvalid
	case res.Summary.Requests.Sent > 0 && res.Summary.Requests.OK == 0:
		fmt.Fprintf(stderr, "tailgate run: no request succeeded (%s)\n", strings.TrimSpace(kindsLine(res.Summary.Requests.ErrorsByKind)))
		code = exitInvalid
	}
	if *outDir != "" {
		fmt.Fprintf(stderr, "results in %s\n", *outDir)
	}
	return code
}

// loadPrompts loads --mix or --prompts (nil, nil when neither is given);
// every file error names file, line and field, before anything is sent.
func loadPrompts(fs *pflag.FlagSet, mixPath, promptsPath string, seed uint64, timeScale float64) (*prompts.Mix, error) {
	if mixPath != "" && promptsPath != "" {
		return nil, fmt.Errorf("--mix and --prompts: give one")
	}
	if timeScale < 0 {
		return nil, fmt.Errorf("--time-scale %v: must be positive", timeScale)
	}
	opts := prompts.LoadOptions{TimeScale: timeScale}
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
