package sim

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/splitmix"
)

// Version is the simulator's version, sent in the x-sim-version and Server
// response headers.
const Version = "0.1.0"

// Mode selects how the server times its output.
type Mode string

const (
	// ModeBatch runs the continuous-batching engine model (see engine).
	ModeBatch Mode = "batch"
	// ModeFixed bypasses the engine: each request, on its own handler
	// goroutine and timer, gets its first content chunk FixedTTFT after
	// arrival and each next one FixedITL after the previous (each drawn
	// from [d−Jitter, d+Jitter] with Jitter), whatever the load. Deadlines
	// are absolute, so timer lateness does not accumulate. With both zero
	// the server streams as fast as it can (the load generator's benchmark).
	ModeFixed Mode = "fixed"
)

// TokenCounter returns the number of tokens in a prompt text.
type TokenCounter func(text string) int

// TokenizerBytes4 is the Config.Tokenizer that counts with EstimateTokens.
const TokenizerBytes4 = "bytes4"

// EstimateTokens counts one token per 4 bytes of text, rounded up, at least
// 1. Mixes' synthetic words average over 6 bytes a token, so this counts
// them about half as many tokens again as a mix asked for.
func EstimateTokens(text string) int {
	n := (len(text) + 3) / 4
	if n < 1 {
		n = 1
	}
	return n
}

// CloseMode says after which responses the server closes the connection.
type CloseMode string

const (
	// CloseNever keeps connections alive (HTTP/1.1 keep-alive), as vLLM does.
	CloseNever CloseMode = ""
	// CloseAfterStream closes the TCP connection once a streamed response's
	// last byte (the chunked terminator included) is out, without a
	// Connection: close header and with Keep-Alive: timeout=5, max=100, as
	// llama.cpp's llama-server does: a client that reuses the idle
	// connection gets EOF or a reset on its next request. Truth.ClosedConn
	// records the close.
	CloseAfterStream CloseMode = "stream"
	// CloseAfterAll does the same after every completion response, streamed
	// or not.
	CloseAfterAll CloseMode = "all"
)

// MetricsFlavor selects the names /metrics serves.
type MetricsFlavor string

const (
	// MetricsVLLM serves vllm:* series (queue-time histogram included) and
	// the simulated GPU's DCGM_FI_DEV_* series.
	MetricsVLLM MetricsFlavor = "vllm"
	// MetricsLlamaCpp serves exactly the twelve unlabelled llamacpp:* series
	// of llama-server --metrics, byte for byte in form
	// (testdata/llamacpp-metrics.txt): prompt and predicted token and
	// seconds counters, n_decode_total, n_busy_slots_per_decode, throughput
	// gauges reset by every scrape, kv_cache_usage_ratio, kv_cache_tokens,
	// requests_processing (running) and requests_deferred (waiting), values
	// printed to 6 significant digits as C++ prints a double. No histogram,
	// so no server-side queue delay, and no GPU series. In ModeFixed each
	// produced chunk counts as one decode.
	MetricsLlamaCpp MetricsFlavor = "llamacpp"
	// MetricsNone serves no /metrics (404), as Ollama.
	MetricsNone MetricsFlavor = "none"
)

// Dialect selects the shape of streamed chunks.
type Dialect string

const (
	// DialectVLLM streams vLLM's chunks (see responder): a role-only first
	// chunk, "id" first, usage only with stream_options.include_usage.
	DialectVLLM Dialect = "vllm"
	// DialectLlamaCpp streams llama-server's, key for key as in
	// testdata/llamacpp-chat-stream.txt: no role chunk, "choices"
	// first and "system_fingerprint", a finish chunk with an empty delta
	// that carries usage and a timings object even without stream_options
	// (with include_usage they come in a "choices":[] chunk instead).
	DialectLlamaCpp Dialect = "llamacpp"
)

// ProfileLlamaCpp is the Config.Profile that behaves like llama.cpp's
// llama-server where it differs from vLLM: CloseAfterStream, the llamacpp
// metrics answered from the engine loop by Slots+2 HTTP threads, an
// end-of-sequence token that is counted but not streamed, and llama-server's
// stream dialect.
const ProfileLlamaCpp = "llamacpp"

// ProfileOllama behaves like Ollama (v0.17.4, as e2e/ollama captured it)
// where it differs from vLLM: no
// /metrics (MetricsNone) and "Ollama is running" at the root, an
// end-of-sequence token counted in eval_count (and /v1 completion_tokens)
// but never streamed, and, with MaxQueue, its busy 503.
const ProfileOllama = "ollama"

// profilesTable lists the values Config.Profile accepts besides "".
var profilesTable = []string{ProfileLlamaCpp, ProfileOllama}

// Config describes the simulated engine. Start from DefaultConfig. In New,
// zero counts and names (Model, Slots, KVTokens, MaxBatchTokens,
// TokensPerChunk, DefaultMaxTokens, StallFor, TruthLimit and the GPU fields)
// take their DefaultConfig value; durations are used as given, so a zero
// duration really is zero.
type Config struct {
	// Model is the served model name (/v1/models, responses, metric label).
	Model string
	// AnswerModel, when set, is the model responses name in place of
	// Model, as a router that maps an alias to the model it serves does.
	AnswerModel string
	// StrictModel rejects requests naming another model with 404, as vLLM
	// does; by default any model name is accepted.
	StrictModel bool
	// Adapters are LoRA adapter names served beside Model, listed in
	// /v1/models with Model as their parent, as vLLM --lora-modules
	// lists them. With any, a request naming neither Model nor an adapter
	// is refused with 404, as vLLM refuses an unknown adapter.
	Adapters []string
	// Mode is ModeBatch or ModeFixed. Empty means ModeFixed when FixedTTFT
	// or FixedITL is set, else ModeBatch.
	Mode Mode

	// Engines is how many data-parallel engines serve (ModeBatch, vLLM
	// --data-parallel-size): each has its own scheduler, Slots and
	// KVTokens, requests are dealt round robin, and /metrics labels each
	// engine's vllm:* series engine="0", "1", …. 0 means 1. See
	// Server.RestartEngine.
	Engines int

	// Continuous-batching engine (ModeBatch).
	Slots          int // max sequences running at once (vLLM max_num_seqs)
	KVTokens       int // KV-cache budget in tokens; a request needs prompt+max_tokens
	MaxBatchTokens int // max prompt tokens prefilled in one step (vLLM max_num_batched_tokens); one request is always admitted
	PrefillBase    time.Duration
	// PrefillPerToken is added to a step once per prompt token of the
	// sequences admitted in that step.
	PrefillPerToken time.Duration
	DecodeBase      time.Duration // fixed cost of every step
	DecodePerSeq    time.Duration // added per running (not paused) sequence
	// BlockSize is the prefix cache's block in tokens (vLLM --block-size);
	// 0 means 16, vLLM's default.
	BlockSize int
	// PrefixCacheBlocks is the prefix cache's capacity in blocks (see
	// prefixCache): 0 means KVTokens / BlockSize, the whole KV cache's
	// worth, as vLLM keeps freed blocks cached until it needs them; −1
	// turns the cache off (no hits, no prefix-cache series). Each engine
	// has its own, as each vLLM data-parallel rank does.
	PrefixCacheBlocks int
	// ToolCallShare is the share (0–1) of chat requests answered with a
	// tool call instead of text, drawn from Seed and the arrival number;
	// a request that carries tools is always answered with one. See
	// the tool-call answer in toolcall.go.
	ToolCallShare float64
	// TokensPerChunk is the number of tokens every running sequence emits per
	// step, and so per streamed chunk (the last chunk may carry fewer).
	TokensPerChunk int
	// DefaultMaxTokens is the output length when a request sets neither
	// max_tokens nor max_completion_tokens.
	DefaultMaxTokens int
	// FinishWithLastChunk puts finish_reason on the last content chunk, as
	// vLLM does, instead of sending a separate empty-delta finish chunk.
	FinishWithLastChunk bool
	// EOSNotStreamed ends every answer at an end-of-sequence token that is
	// generated and counted but never sent, as llama.cpp does: the last of
	// the max_tokens tokens is the EOS, so max_tokens−1 are streamed,
	// finish_reason is "stop" and usage completion_tokens is one more than
	// the tokens streamed. The finish chunk is its own, even with
	// FinishWithLastChunk. Truth.CompletionTokens and Truth.FinishReason
	// record it. On Ollama's /api/chat: done_reason "stop", eval_count one
	// more than the tokens streamed.
	EOSNotStreamed bool

	// Profile, when set, turns on a real server's behaviours at once
	// (before defaults are filled): ProfileLlamaCpp sets CloseAfter to
	// CloseAfterStream and Metrics to MetricsLlamaCpp where they are empty,
	// Dialect to DialectLlamaCpp where they are empty, HTTPThreads to
	// Slots+2 where it is 0, and MetricsFromLoop and EOSNotStreamed;
	// ProfileOllama sets Metrics to MetricsNone where it is empty, and
	// EOSNotStreamed.
	Profile string

	// MaxQueue, when > 0, refuses a completion request that arrives while
	// Slots+MaxQueue are in flight with 503 and Ollama's words ("server
	// busy, please try again.  maximum pending requests exceeded"), as
	// Ollama with OLLAMA_MAX_QUEUE does.
	MaxQueue int

	// CloseAfter closes connections after responses (see CloseMode).
	CloseAfter CloseMode
	// CloseDelay is how long after the response's last byte the close
	// comes. A client that sends its next request on the connection within
	// it has written the request before it sees the close, so that request
	// fails every time (with 0 only when it races the FIN).
	CloseDelay time.Duration
	// Metrics is the /metrics flavour; empty means MetricsVLLM.
	Metrics MetricsFlavor
	// Dialect is the shape of streamed chunks; empty means DialectVLLM.
	// Non-streamed answers have vLLM's shape in either; DialectLlamaCpp
	// ignores FinishWithLastChunk and continuous_usage_stats, which
	// llama-server does not have.
	Dialect Dialect
	// MetricsFromLoop answers /metrics from the engine loop, as llama.cpp
	// does: a scrape waits for the step in progress to end (ModeBatch;
	// in ModeFixed it waits until no request is in flight, the nearest
	// there is to a free loop), so under load scrapes are late.
	MetricsFromLoop bool
	// HTTPThreads, when > 0, is how many requests (of any path) are handled
	// at once, as llama.cpp's HTTP thread pool; the others wait for a free
	// thread before being read. A stream holds its thread to its end, so
	// with every thread streaming a scrape waits for a stream to finish.
	HTTPThreads int

	// Fixed-delay mode (ModeFixed).
	FixedTTFT time.Duration // arrival → first content chunk
	FixedITL  time.Duration // between content chunks
	// Jitter spreads every fixed delay uniformly over [d−Jitter, d+Jitter]
	// (clamped at 0), seeded from Seed and the request's arrival number.
	Jitter time.Duration

	// Tokenizer names the offline vocabulary that counts prompt tokens (one
	// of prompts.Encodings(), or TokenizerBytes4 for one token per 4 bytes);
	// empty means prompts.DefaultEncoding, the one mixes size prompts with
	// by default, so a mix asking for N input tokens gets prompt_tokens N.
	// Each chat message's content is counted on its own and summed, as
	// package prompts sizes a system prefix and a body apart; token-id
	// prompts are counted exactly.
	Tokenizer string
	// TokenCounter, when set, counts prompt tokens instead of Tokenizer.
	TokenCounter TokenCounter
	// PromptOverheadTokens is added to every request's prompt_tokens, as a
	// chat template's role markers and BOS add tokens on a real server
	// (a mix's template_tokens takes the same number off its text).
	PromptOverheadTokens int

	// Faults are applied to requests without an X-Sim-Fault header, first
	// matching rule wins. Decisions depend only on Seed and the request's
	// arrival number, so a run is reproducible.
	Faults []FaultRule
	Seed   uint64
	// StallFor is how long the stall fault delays the first token, how long
	// stall_mid pauses, and how long the global stall at StallAt lasts.
	StallFor time.Duration
	// StallAt, when set, freezes the whole server for StallFor once, StallAt
	// after the first completion request arrives (so setup time does not
	// matter). StallAll does the same on demand.
	StallAt time.Duration

	// TruthLimit is how many finished requests Truth keeps (the most recent);
	// in-flight requests are always included. 0 means 1000; -1 records nothing.
	TruthLimit int

	// Simulated GPU, for the DCGM_FI_DEV_* metrics.
	GPUName         string
	GPUMemoryMiB    float64 // total framebuffer
	WeightsMiB      float64 // framebuffer used with an empty KV cache
	KVBytesPerToken int     // framebuffer per KV token in use
	// GPUIdleWatts and GPUMaxWatts are the simulated board's power idle
	// and fully busy: power is linear in the busy fraction, and the energy
	// counter (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION) its integral since the
	// server started.
	GPUIdleWatts, GPUMaxWatts float64
}

// DefaultConfig is a plausible single-GPU engine serving an 8B model with
// vLLM: 64 slots, 131072 KV tokens, prefill 2 ms + 0.1 ms/token, decode
// 8 ms + 0.15 ms per running sequence, one token per chunk, and a
// prefix cache of 16-token blocks as large as the KV cache.
func DefaultConfig() Config {
	return Config{
		Model:            "sim-llama-8b",
		Slots:            64,
		KVTokens:         131072,
		MaxBatchTokens:   8192,
		PrefillBase:      2 * time.Millisecond,
		PrefillPerToken:  100 * time.Microsecond,
		DecodeBase:       8 * time.Millisecond,
		DecodePerSeq:     150 * time.Microsecond,
		TokensPerChunk:   1,
		BlockSize:        16,
		DefaultMaxTokens: 128,
		StallFor:         2 * time.Second,
		TruthLimit:       1000,
		GPUName:          "NVIDIA L40S (simulated)",
		GPUMemoryMiB:     46068,
		WeightsMiB:       15400,
		KVBytesPerToken:  131072, // Llama-3-8B: 32 layers × 8 KV heads × 128 × 2 (K,V) × 2 bytes
		GPUIdleWatts:     80,     // an L40S: about 80 W idle, 350 W board limit
		GPUMaxWatts:      350,
	}
}

// withDefaults fills zero counts and names from DefaultConfig and resolves
// the mode.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.Profile == ProfileLlamaCpp {
		if c.CloseAfter == CloseNever {
			c.CloseAfter = CloseAfterStream
		}
		if c.Metrics == "" {
			c.Metrics = MetricsLlamaCpp
		}
		if c.Dialect == "" {
			c.Dialect = DialectLlamaCpp
		}
		if c.HTTPThreads == 0 {
			slots := c.Slots
			if slots == 0 {
				slots = d.Slots
			}
			c.HTTPThreads = slots + 2 // llama-server's default --threads-http
		}
		c.MetricsFromLoop = true
		c.EOSNotStreamed = true
	}
	if c.Profile == ProfileOllama {
		if c.Metrics == "" {
			c.Metrics = MetricsNone
		}
		c.EOSNotStreamed = true
	}
	if c.Metrics == "" {
		c.Metrics = MetricsVLLM
	}
	if c.Dialect == "" {
		c.Dialect = DialectVLLM
	}
	if c.Model == "" {
		c.Model = d.Model
	}
	if c.Slots == 0 {
		c.Slots = d.Slots
	}
	if c.KVTokens == 0 {
		c.KVTokens = d.KVTokens
	}
	if c.MaxBatchTokens == 0 {
		c.MaxBatchTokens = d.MaxBatchTokens
	}
	if c.TokensPerChunk == 0 {
		c.TokensPerChunk = d.TokensPerChunk
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.PrefixCacheBlocks == 0 && c.BlockSize > 0 {
		c.PrefixCacheBlocks = max(1, c.KVTokens/c.BlockSize)
	}
	if c.DefaultMaxTokens == 0 {
		c.DefaultMaxTokens = d.DefaultMaxTokens
	}
	if c.StallFor == 0 {
		c.StallFor = d.StallFor
	}
	if c.TruthLimit == 0 {
		c.TruthLimit = d.TruthLimit
	}
	if c.GPUName == "" {
		c.GPUName = d.GPUName
	}
	if c.GPUMemoryMiB == 0 {
		c.GPUMemoryMiB = d.GPUMemoryMiB
	}
	if c.WeightsMiB == 0 {
		c.WeightsMiB = d.WeightsMiB
	}
	if c.KVBytesPerToken == 0 {
		c.KVBytesPerToken = d.KVBytesPerToken
	}
	if c.GPUIdleWatts == 0 && c.GPUMaxWatts == 0 {
		c.GPUIdleWatts, c.GPUMaxWatts = d.GPUIdleWatts, d.GPUMaxWatts
	}
	if c.Mode == "" {
		c.Mode = ModeBatch
		if c.FixedTTFT > 0 || c.FixedITL > 0 {
			c.Mode = ModeFixed
		}
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	switch c.Mode {
	case ModeBatch, ModeFixed:
	default:
		bad("sim: mode %q: want %q or %q", c.Mode, ModeBatch, ModeFixed)
	}
	for name, v := range map[string]int{"slots": c.Slots, "kv tokens": c.KVTokens,
		"max batch tokens": c.MaxBatchTokens, "tokens per chunk": c.TokensPerChunk,
		"default max tokens": c.DefaultMaxTokens, "KV bytes per token": c.KVBytesPerToken, "block size": c.BlockSize} {
		if v < 1 {
			bad("sim: %s %d: must be at least 1", name, v)
		}
	}
	for name, v := range map[string]time.Duration{"prefill base": c.PrefillBase,
		"prefill per token": c.PrefillPerToken, "decode base": c.DecodeBase,
		"decode per seq": c.DecodePerSeq, "fixed TTFT": c.FixedTTFT, "fixed ITL": c.FixedITL,
		"jitter": c.Jitter, "stall for": c.StallFor, "stall at": c.StallAt, "close delay": c.CloseDelay} {
		if v < 0 {
			bad("sim: %s %v: must not be negative", name, v)
		}
	}
	if c.Profile != "" && c.Profile != ProfileLlamaCpp && c.Profile != ProfileOllama {
		bad("sim: profile %q: want %q, %q or none", c.Profile, ProfileLlamaCpp, ProfileOllama)
	}
	if c.PrefixCacheBlocks < -1 {
		bad("sim: prefix cache blocks %d: want -1 (off), 0 (default) or a count", c.PrefixCacheBlocks)
	}
	if c.ToolCallShare < 0 || c.ToolCallShare > 1 {
		bad("sim: tool call share %v: want a share in [0, 1]", c.ToolCallShare)
	}
	if c.MaxQueue < 0 {
		bad("sim: max queue %d: must not be negative", c.MaxQueue)
	}
	switch c.CloseAfter {
	case CloseNever, CloseAfterStream, CloseAfterAll:
	default:
		bad("sim: close after %q: want %q, %q or none", c.CloseAfter, CloseAfterStream, CloseAfterAll)
	}
	switch c.Metrics {
	case MetricsVLLM, MetricsLlamaCpp, MetricsNone:
	default:
		bad("sim: metrics flavour %q: want %q, %q or %q", c.Metrics, MetricsVLLM, MetricsLlamaCpp, MetricsNone)
	}
	switch c.Dialect {
	case DialectVLLM, DialectLlamaCpp:
	default:
		bad("sim: dialect %q: want %q or %q", c.Dialect, DialectVLLM, DialectLlamaCpp)
	}
	if c.Engines < 0 {
		bad("sim: engines %d: must not be negative", c.Engines)
	}
	if c.Engines > 1 && (c.Mode != ModeBatch || c.Metrics != MetricsVLLM) {
		bad("sim: engines %d: several engines need mode %q and metrics %q", c.Engines, ModeBatch, MetricsVLLM)
	}
	if c.HTTPThreads < 0 {
		bad("sim: HTTP threads %d: must not be negative", c.HTTPThreads)
	}
	if c.PromptOverheadTokens < 0 {
		bad("sim: prompt overhead tokens %d: must not be negative", c.PromptOverheadTokens)
	}
	if c.TruthLimit < -1 {
		bad("sim: truth limit %d: want -1 (off), 0 (default) or a count", c.TruthLimit)
	}
	if c.GPUMemoryMiB < 0 || c.WeightsMiB < 0 {
		bad("sim: GPU memory must not be negative")
	}
	for i, r := range c.Faults {
		if err := r.validate(); err != nil {
			bad("sim: fault rule %d: %v", i, err)
		}
	}
	return errors.Join(errs...)
}

// FaultKind names an injected failure. The kinds are also the values of the
// X-Sim-Fault request header.
type FaultKind string

// The faults the simulator can inject; FaultNone injects none.
const (
	FaultNone FaultKind = ""
	// FaultStall delays the first content chunk by StallFor (the response
	// headers and the chat role chunk come at once).
	FaultStall FaultKind = "stall"
	// FaultStallMid pauses the stream for StallFor after half of its content
	// chunks (rounded down).
	FaultStallMid FaultKind = "stall_mid"
	// FaultHTTP429 and FaultHTTP503 answer at once with that status, an
	// OpenAI-style error body and Retry-After: 1.
	FaultHTTP429 FaultKind = "http_429"
	FaultHTTP503 FaultKind = "http_503"
	// FaultTruncate aborts the connection after half of the content chunks:
	// no finish chunk, no usage, no [DONE], no terminating HTTP chunk.
	FaultTruncate FaultKind = "truncate"
	// FaultMalformed sends one event that is not JSON after half of the
	// content chunks, then carries on to a normal end.
	FaultMalformed FaultKind = "malformed"
	// FaultErrorInStream sends a vLLM-style error event
	// (data: {"error": {..., "code": 500}}) after half of the content chunks,
	// then data: [DONE]. Non-streaming requests get HTTP 500.
	FaultErrorInStream FaultKind = "error_in_stream"
	// FaultHang never answers; the handler returns when the client gives up
	// or the server closes.
	FaultHang FaultKind = "hang"
	// FaultIgnoreStream answers a streaming request as if stream were
	// false: one application/json body once the whole answer is generated,
	// as servers and proxies that ignore "stream" do.
	FaultIgnoreStream FaultKind = "ignore_stream"
	// FaultHTML200 answers at once with 200 and a text/html page, as a
	// login-wall proxy in front of the API does.
	FaultHTML200 FaultKind = "html_200"
	// FaultEmpty answers 200 with no output token: the tokens are made
	// (the request takes its time) but none is sent, and usage says 0
	// completion tokens with finish_reason "length", as a server whose
	// detokenizer or proxy lost the text does.
	FaultEmpty FaultKind = "empty"
)

// faultKindsTable lists every fault kind.
var faultKindsTable = []FaultKind{FaultStall, FaultStallMid, FaultHTTP429, FaultHTTP503,
	FaultTruncate, FaultMalformed, FaultErrorInStream, FaultHang, FaultIgnoreStream, FaultHTML200, FaultEmpty}

func (k FaultKind) valid() bool {
	for _, v := range faultKindsTable {
		if k == v {
			return true
		}
	}
	return false
}

// FaultRule injects Kind into requests without an X-Sim-Fault header:
// into every Every-th request (arrival numbers Every, 2·Every, …) when
// Every > 0, else into each request with probability Rate.
type FaultRule struct {
	Kind  FaultKind
	Rate  float64
	Every int
}

func (r FaultRule) validate() error {
	if !r.Kind.valid() {
		return fmt.Errorf("unknown fault kind %q (want one of %s)", r.Kind, FaultKindList())
	}
	if r.Rate < 0 || r.Rate > 1 {
		return fmt.Errorf("%s: rate %v: want a probability in [0, 1]", r.Kind, r.Rate)
	}
	if r.Every < 0 {
		return fmt.Errorf("%s: every %d: must not be negative", r.Kind, r.Every)
	}
	return nil
}

// FaultKindList names every fault kind, comma-separated, for messages and
// help text.
func FaultKindList() string {
	s := make([]string, len(faultKindsTable))
	for i, k := range faultKindsTable {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// ParseFaultRule parses KIND=RATE, where RATE is a probability ("0.05") or
// "1/N" for exactly every N-th request ("1/20").
func ParseFaultRule(s string) (FaultRule, error) {
	kind, rate, ok := strings.Cut(s, "=")
	if !ok {
		return FaultRule{}, fmt.Errorf("fault %q: want KIND=RATE, e.g. truncate=0.01 or http_429=1/20", s)
	}
	r := FaultRule{Kind: FaultKind(strings.TrimSpace(kind))}
	rate = strings.TrimSpace(rate)
	if one, n, isEvery := strings.Cut(rate, "/"); isEvery {
		every, err := strconv.Atoi(strings.TrimSpace(n))
		if strings.TrimSpace(one) != "1" || err != nil || every < 1 {
			return FaultRule{}, fmt.Errorf("fault %q: rate %q: want 1/N with N ≥ 1", s, rate)
		}
		r.Every = every
	} else {
		p, err := strconv.ParseFloat(rate, 64)
		if err != nil {
			return FaultRule{}, fmt.Errorf("fault %q: rate %q: not a number", s, rate)
		}
		r.Rate = p
	}
	if err := r.validate(); err != nil {
		return FaultRule{}, fmt.Errorf("fault %q: %w", s, err)
	}
	return r, nil
}

// parseFaultHeader reads X-Sim-Fault: KIND, or KIND=DURATION for stall and
// stall_mid (the duration overrides StallFor), or "none" (no fault, even if
// a Config rule would pick one).
func parseFaultHeader(v string) (FaultKind, time.Duration, error) {
	kind, dur, hasDur := strings.Cut(strings.TrimSpace(v), "=")
	k := FaultKind(strings.TrimSpace(kind))
	if k == "none" {
		return FaultNone, 0, nil
	}
	if !k.valid() {
		return "", 0, fmt.Errorf("X-Sim-Fault %q: unknown fault kind (want one of %s, or none)", v, FaultKindList())
	}
	if !hasDur {
		return k, 0, nil
	}
	if k != FaultStall && k != FaultStallMid {
		return "", 0, fmt.Errorf("X-Sim-Fault %q: only stall and stall_mid take a duration", v)
	}
	d, err := time.ParseDuration(strings.TrimSpace(dur))
	if err != nil || d < 0 {
		return "", 0, fmt.Errorf("X-Sim-Fault %q: %q is not a duration", v, dur)
	}
	return k, d, nil
}

// unitFloat returns a deterministic number in [0, 1) for (seed, seq, salt).
func unitFloat(seed uint64, seq int64, salt uint64) float64 {
	h := splitmix.Mix64(seed ^ splitmix.Mix64(uint64(seq)^splitmix.Mix64(salt)))
	return float64(h>>11) / (1 << 53)
}

// pickFault applies rules to the request with arrival number seq.
func pickFault(rules []FaultRule, seed uint64, seq int64) FaultKind {
	for i, r := range rules {
		if r.Every > 0 {
			if seq%int64(r.Every) == 0 {
				return r.Kind
			}
			continue
		}
		if r.Rate > 0 && unitFloat(seed, seq, uint64(i)+1) < r.Rate {
			return r.Kind
		}
	}
	return FaultNone
}
