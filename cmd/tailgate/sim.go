package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/slo"
)

// cmdSim serves the built-in simulated OpenAI-compatible LLM endpoint until
// ctx is cancelled.
func cmdSim(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := sim.DefaultConfig()
	cfg.TruthLimit = -1 // nobody reads it from the command line; keep memory flat
	var (
		addr        string
		allowRemote bool
		mode        string
		faults      []string
		restarts    []string
		readyFile   string
		closeAfter  string
		metrics     string
		dialect     string
		grpcAddr    string
	)
	fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	fs.StringVar(&addr, "addr", "127.0.0.1:8000", "listen address (host:port; port 0 picks a free one)")
	fs.BoolVar(&allowRemote, "allow-remote", false, "allow a non-loopback --addr")
	fs.StringVar(&cfg.Model, "model", cfg.Model, "served model name")
	fs.BoolVar(&cfg.StrictModel, "strict-model", false, "answer 404 to requests naming another model, as vLLM does")
	fs.StringArrayVar(&cfg.Adapters, "lora", nil, "a LoRA adapter name served beside --model (repeatable), listed in /v1/models; with any, requests naming an unknown model get vLLM's 404")
	fs.StringVar(&mode, "mode", "", `"batch" (continuous-batching model) or "fixed" (fixed delays); default fixed if --fixed-ttft or --fixed-itl is set, else batch`)
	fs.IntVar(&cfg.Engines, "engines", 0, "data-parallel engines (vLLM --data-parallel-size): each its own scheduler with --slots and --kv-tokens, requests dealt round robin, /metrics series labelled engine=\"i\"")
	fs.StringArrayVar(&restarts, "restart-engine", nil, "restart engine I at DURATION after start, as I@DURATION (repeatable): drained, then its counters start again at zero; needs --engines 2 or more")
	fs.IntVar(&cfg.Slots, "slots", cfg.Slots, "max sequences running at once (vLLM max_num_seqs)")
	fs.IntVar(&cfg.KVTokens, "kv-tokens", cfg.KVTokens, "KV-cache budget in tokens; a request holds prompt + max_tokens")
	fs.IntVar(&cfg.MaxBatchTokens, "max-batch-tokens", cfg.MaxBatchTokens, "max prompt tokens prefilled in one step")
	fs.DurationVar(&cfg.PrefillBase, "prefill-base", cfg.PrefillBase, "fixed cost of a step that prefills")
	fs.DurationVar(&cfg.PrefillPerToken, "prefill-per-token", cfg.PrefillPerToken, "prefill cost per prompt token")
	fs.DurationVar(&cfg.DecodeBase, "decode-base", cfg.DecodeBase, "fixed cost of every step")
	fs.DurationVar(&cfg.DecodePerSeq, "decode-per-seq", cfg.DecodePerSeq, "step cost per running sequence")
	fs.IntVar(&cfg.TokensPerChunk, "tokens-per-chunk", cfg.TokensPerChunk, "tokens per step and per streamed chunk")
	fs.IntVar(&cfg.BlockSize, "block-size", cfg.BlockSize, "prefix cache block in tokens (vLLM --block-size)")
	fs.IntVar(&cfg.PrefixCacheBlocks, "prefix-cache-blocks", 0, "prefix cache capacity in blocks, least recently used out: cached prompt blocks cost no prefill, counted in vllm:prefix_cache_hits_total and usage cached_tokens; 0: --kv-tokens / --block-size; -1: no prefix cache")
	fs.Float64Var(&cfg.ToolCallShare, "tool-call-share", 0, `answer this share (0-1) of chat requests with a tool call (delta.tool_calls, finish_reason "tool_calls"); requests that carry tools always get one`)
	fs.IntVar(&cfg.DefaultMaxTokens, "default-max-tokens", cfg.DefaultMaxTokens, "output tokens when a request sets no max_tokens")
	fs.BoolVar(&cfg.FinishWithLastChunk, "finish-with-last-chunk", false, "put finish_reason on the last content chunk (current vLLM) instead of a separate chunk")
	fs.DurationVar(&cfg.FixedTTFT, "fixed-ttft", 0, "fixed mode: time to the first content chunk")
	fs.DurationVar(&cfg.FixedITL, "fixed-itl", 0, "fixed mode: time between content chunks")
	fs.DurationVar(&cfg.Jitter, "jitter", 0, "fixed mode: spread every delay uniformly by ± this much")
	fs.StringVar(&cfg.Profile, "profile", "", `behave like a real server: "llamacpp" turns on --close-after stream, --metrics llamacpp, --dialect llamacpp, --metrics-from-loop, --http-threads slots+2 and --eos-not-streamed (a --close-after, --metrics, --dialect or --http-threads given wins); "ollama" turns on --metrics none, "Ollama is running" at / and --eos-not-streamed (with --max-queue, its busy 503)`)
	fs.IntVar(&cfg.MaxQueue, "max-queue", 0, "refuse completions beyond --slots running and this many waiting with Ollama's 503 \"server busy\" (OLLAMA_MAX_QUEUE); 0: never")
	fs.StringVar(&closeAfter, "close-after", "none", `close the TCP connection, without Connection: close, after each "stream"ed response or after "all" responses (llama.cpp closes after streams); "none" keeps it alive`)
	fs.DurationVar(&cfg.CloseDelay, "close-delay", 0, "with --close-after, close this long after the response's last byte (a client reusing the connection within it always fails)")
	fs.StringVar(&metrics, "metrics", "", `/metrics flavour: "vllm" (vllm:* and DCGM series, the default), "llamacpp" (llama-server's twelve llamacpp:* series, no histograms) or "none" (404, as Ollama)`)
	fs.StringVar(&dialect, "dialect", "", `stream chunk shape: "vllm" (the default) or "llamacpp" (no role chunk, usage and timings on the finish chunk)`)
	fs.BoolVar(&cfg.MetricsFromLoop, "metrics-from-loop", false, "answer /metrics from the engine loop, after the step in progress (llama.cpp), so scrapes are late under load")
	fs.IntVar(&cfg.HTTPThreads, "http-threads", 0, "handle at most this many requests at once, others wait for a free thread (llama.cpp's --threads-http); 0: no limit")
	fs.BoolVar(&cfg.EOSNotStreamed, "eos-not-streamed", false, `end answers at an EOS token that is counted in usage but not streamed: finish_reason "stop", completion_tokens = streamed + 1 (llama.cpp)`)
	fs.StringVar(&cfg.Tokenizer, "tokenizer", "", fmt.Sprintf("count prompt tokens with this vocabulary (%s, or %s for one per 4 bytes); default %s, as mixes size prompts", strings.Join(prompts.Encodings(), ", "), sim.TokenizerBytes4, prompts.DefaultEncoding))
	fs.IntVar(&cfg.PromptOverheadTokens, "prompt-overhead-tokens", 0, "add this many tokens to every text prompt's count, as a chat template does (a mix's template_tokens)")
	fs.StringArrayVar(&faults, "fault", nil, "inject KIND=RATE into requests (repeatable); RATE is a probability (0.05) or 1/N for every N-th; kinds: "+sim.FaultKindList())
	fs.Uint64Var(&cfg.Seed, "seed", 0, "seed for fault and jitter decisions")
	fs.DurationVar(&cfg.StallFor, "stall-for", cfg.StallFor, "length of the stall and stall_mid faults and of the --stall-at freeze")
	fs.DurationVar(&cfg.StallAt, "stall-at", 0, "freeze the whole server for --stall-for once, this long after the first request")
	fs.StringVar(&grpcAddr, "grpc", "", "also serve KServe v2 gRPC (ModelStreamInfer, ModelInfer; Triton vLLM-backend tensors) on this address, e.g. 127.0.0.1:8001")
	fs.StringVar(&readyFile, "ready-file", "", "write the listening URL to this file once listening (removed on exit)")
	printUsage := func(w io.Writer) {
		fmt.Fprintf(w, "Usage: tailgate sim [flags]\n\nServe a simulated OpenAI-compatible LLM endpoint (vLLM-shaped streams, /metrics,\nfault injection, and modes for real servers' behaviours: --profile llamacpp) until\ninterrupted.\n\nFlags:\n%s", fs.FlagUsages())
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			printUsage(stdout)
			return slo.ExitOK
		}
		fmt.Fprintf(stderr, "tailgate sim: %v\n\n", err)
		printUsage(stderr)
		return slo.ExitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tailgate sim: unexpected argument %q\n", fs.Arg(0))
		return slo.ExitUsage
	}
	cfg.Mode = sim.Mode(mode)
	cfg.Metrics = sim.MetricsFlavor(metrics)
	cfg.Dialect = sim.Dialect(dialect)
	if closeAfter != "none" {
		cfg.CloseAfter = sim.CloseMode(closeAfter)
	}
	for _, f := range faults {
		r, err := sim.ParseFaultRule(f)
		if err != nil {
			fmt.Fprintf(stderr, "tailgate sim: --fault: %v\n", err)
			return slo.ExitUsage
		}
		cfg.Faults = append(cfg.Faults, r)
	}
	type restart struct {
		engine int
		at     time.Duration
	}
	var plan []restart
	for _, rs := range restarts {
		i, at, ok := strings.Cut(rs, "@")
		n, err := strconv.Atoi(strings.TrimSpace(i))
		d, derr := time.ParseDuration(strings.TrimSpace(at))
		if !ok || err != nil || derr != nil || n < 0 || d < 0 {
			fmt.Fprintf(stderr, "tailgate sim: --restart-engine %q: want ENGINE@DURATION, e.g. 1@30s\n", rs)
			return slo.ExitUsage
		}
		plan = append(plan, restart{n, d})
	}
	if err := checkLoopback(addr); err != nil && !allowRemote {
		fmt.Fprintf(stderr, "tailgate sim: --addr %s: %v (pass --allow-remote to serve beyond this machine)\n", addr, err)
		return slo.ExitUsage
	}
	if grpcAddr != "" {
		if err := checkLoopback(grpcAddr); err != nil && !allowRemote {
			fmt.Fprintf(stderr, "tailgate sim: --grpc %s: %v (pass --allow-remote to serve beyond this machine)\n", grpcAddr, err)
			return slo.ExitUsage
		}
	}

	run, err := sim.Start(cfg, addr)
	if err != nil {
		fmt.Fprintf(stderr, "tailgate sim: %v\n", err)
		return slo.ExitUsage
	}
	defer run.Close()
	for _, p := range plan {
		if p.engine >= run.Engines() || run.Engines() < 2 {
			fmt.Fprintf(stderr, "tailgate sim: --restart-engine %d@%v: the simulator has %d engine(s); restarting one needs --engines 2 or more\n", p.engine, p.at, run.Engines())
			return slo.ExitUsage
		}
		timer := time.AfterFunc(p.at, func() {
			if err := run.RestartEngine(ctx, p.engine); err == nil {
				fmt.Fprintf(stdout, "tailgate sim: engine %d restarted (counters at zero)\n", p.engine)
			} else if ctx.Err() == nil {
				fmt.Fprintf(stderr, "tailgate sim: restart of engine %d: %v\n", p.engine, err)
			}
		})
		defer timer.Stop()
	}
	c := run.Config()
	desc := fmt.Sprintf("%d slots, %d KV tokens, decode %v + %v/seq, prefill %v + %v/token",
		c.Slots, c.KVTokens, c.DecodeBase, c.DecodePerSeq, c.PrefillBase, c.PrefillPerToken)
	if run.Engines() > 1 {
		desc = fmt.Sprintf("%d engines of ", run.Engines()) + desc
	}
	if c.Mode == sim.ModeFixed {
		desc = fmt.Sprintf("TTFT %v, ITL %v, jitter %v", c.FixedTTFT, c.FixedITL, c.Jitter)
	}
	if c.Profile != "" {
		desc += ", profile " + c.Profile
	}
	if modes := simModes(c); modes != "" {
		desc += "; " + modes
	}
	fmt.Fprintf(stdout, "tailgate sim %s: serving %q on %s (%s mode: %s)\n", sim.Version, c.Model, run.URL, c.Mode, desc)
	if grpcAddr != "" {
		g, err := run.ServeGRPC(grpcAddr)
		if err != nil {
			fmt.Fprintf(stderr, "tailgate sim: --grpc: %v\n", err)
			return slo.ExitUsage
		}
		// The simulator first, so requests in flight end at once, then
		// the gRPC listener.
		defer func() { run.Close(); g.Close() }()
		fmt.Fprintf(stdout, "tailgate sim: KServe v2 gRPC on grpc://%s\n", g.Addr)
	}
	if readyFile != "" {
		if err := atomicWriteString(readyFile, run.URL+"\n"); err != nil {
			fmt.Fprintf(stderr, "tailgate sim: --ready-file: %v\n", err)
			return slo.ExitInvalid
		}
		defer os.Remove(readyFile)
	}
	<-ctx.Done()
	fmt.Fprintf(stdout, "tailgate sim: shutting down\n")
	return slo.ExitOK
}

// simModes names the real-server behaviours c turns on, for the start-up line.
func simModes(c sim.Config) string {
	var m []string
	if c.CloseAfter != sim.CloseNever {
		m = append(m, "closes the connection after "+map[sim.CloseMode]string{sim.CloseAfterStream: "streamed", sim.CloseAfterAll: "all"}[c.CloseAfter]+" responses")
	}
	if c.Metrics != sim.MetricsVLLM {
		m = append(m, string(c.Metrics)+" metrics")
	}
	if c.MetricsFromLoop {
		m = append(m, "metrics from the engine loop")
	}
	if c.HTTPThreads > 0 {
		m = append(m, fmt.Sprintf("%d HTTP threads", c.HTTPThreads))
	}
	if c.Dialect != sim.DialectVLLM {
		m = append(m, string(c.Dialect)+" stream dialect")
	}
	if c.EOSNotStreamed {
		m = append(m, "EOS not streamed")
	}
	m = append(m, "prompt tokens by "+c.Tokenizer)
	if c.PromptOverheadTokens > 0 {
		m = append(m, fmt.Sprintf("+%d per prompt", c.PromptOverheadTokens))
	}
	return strings.Join(m, ", ")
}

// checkLoopback returns an error unless addr's host is a loopback address
// or "localhost".
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	if host == "" {
		return errors.New("listens on every interface")
	}
	return errors.New("not a loopback address")
}

func atomicWriteString(path, data string) error { return atomicfile.Write(path, []byte(data)) }
