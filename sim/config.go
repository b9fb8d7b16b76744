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
	// ModeBatch runs the continuous-batching engine model (see doc.go).
	ModeBatch Mode = "batch"
	// ModeFixed gives every request exactly FixedTTFT to its first content
	// chunk and FixedITL between chunks, whatever the load. With both zero
	// the server streams as fast as it can (the load generator's benchmark).
	ModeFixed Mode = "fixed"
)

// TokenCounter returns the number of tokens in a prompt text. The default is
// EstimateTokens; a real tokenizer can be plugged in here.
type TokenCounter func(text string) int

// EstimateTokens is the default TokenCounter: one token per 4 bytes of text,
// rounded up, at least 1. For chat requests the text is the messages'
// contents joined with newlines (as prompts.Prompt.Completion joins them).
func EstimateTokens(text string) int {
	n := (len(text) + 3) / 4
	if n < 1 {
		n = 1
	}
	return n
}

// Config describes the simulated engine. Start from DefaultConfig. In New,
// zero counts and names (Model, Slots, KVTokens, MaxBatchTokens,
// TokensPerChunk, DefaultMaxTokens, StallFor, TruthLimit and the GPU fields)
// take their DefaultConfig value; durations are used as given, so a zero
// duration really is zero.
type Config struct {
	// Model is the served model name (/v1/models, responses, metric label).
	Model string
	// StrictModel rejects requests naming another model with 404, as vLLM
	// does; by default any model name is accepted.
	StrictModel bool
	// Mode is ModeBatch or ModeFixed. Empty means ModeFixed when FixedTTFT
	// or FixedITL is set, else ModeBatch.
	Mode Mode

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
	// TokensPerChunk is the number of tokens every running sequence emits per
	// step, and so per streamed chunk (the last chunk may carry fewer).
	TokensPerChunk int
	// DefaultMaxTokens is the output length when a request sets neither
	// max_tokens nor max_completion_tokens.
	DefaultMaxTokens int
	// FinishWithLastChunk puts finish_reason on the last content chunk, as
	// vLLM does, instead of sending a separate empty-delta finish chunk.
	FinishWithLastChunk bool

	// Fixed-delay mode (ModeFixed).
	FixedTTFT time.Duration // arrival → first content chunk
	FixedITL  time.Duration // between content chunks
	// Jitter spreads every fixed delay uniformly over [d−Jitter, d+Jitter]
	// (clamped at 0), seeded from Seed and the request's arrival number.
	Jitter time.Duration

	// TokenCounter counts prompt tokens; nil means EstimateTokens.
	TokenCounter TokenCounter

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
}

// DefaultConfig is a plausible single-GPU engine serving an 8B model with
// vLLM: 64 slots, 131072 KV tokens, prefill 2 ms + 0.1 ms/token, decode
// 8 ms + 0.15 ms per running sequence, one token per chunk.
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
		DefaultMaxTokens: 128,
		StallFor:         2 * time.Second,
		TruthLimit:       1000,
		GPUName:          "NVIDIA L40S (simulated)",
		GPUMemoryMiB:     46068,
		WeightsMiB:       15400,
		KVBytesPerToken:  131072, // Llama-3-8B: 32 layers × 8 KV heads × 128 × 2 (K,V) × 2 bytes
	}
}

// withDefaults fills zero counts and names from DefaultConfig and resolves
// the mode.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
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
	if c.Mode == "" {
		c.Mode = ModeBatch
		if c.FixedTTFT > 0 || c.FixedITL > 0 {
			c.Mode = ModeFixed
		}
	}
	if c.TokenCounter == nil {
		c.TokenCounter = EstimateTokens
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
		"default max tokens": c.DefaultMaxTokens, "KV bytes per token": c.KVBytesPerToken} {
		if v < 1 {
			bad("sim: %s %d: must be at least 1", name, v)
		}
	}
	for name, v := range map[string]time.Duration{"prefill base": c.PrefillBase,
		"prefill per token": c.PrefillPerToken, "decode base": c.DecodeBase,
		"decode per seq": c.DecodePerSeq, "fixed TTFT": c.FixedTTFT, "fixed ITL": c.FixedITL,
		"jitter": c.Jitter, "stall for": c.StallFor, "stall at": c.StallAt} {
		if v < 0 {
			bad("sim: %s %v: must not be negative", name, v)
		}
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
)

// FaultKinds lists every fault kind.
var FaultKinds = []FaultKind{FaultStall, FaultStallMid, FaultHTTP429, FaultHTTP503,
	FaultTruncate, FaultMalformed, FaultErrorInStream, FaultHang}

func (k FaultKind) valid() bool {
	for _, v := range FaultKinds {
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
		return fmt.Errorf("unknown fault kind %q (want one of %s)", r.Kind, kindList())
	}
	if r.Rate < 0 || r.Rate > 1 {
		return fmt.Errorf("%s: rate %v: want a probability in [0, 1]", r.Kind, r.Rate)
	}
	if r.Every < 0 {
		return fmt.Errorf("%s: every %d: must not be negative", r.Kind, r.Every)
	}
	return nil
}

func kindList() string {
	s := make([]string, len(FaultKinds))
	for i, k := range FaultKinds {
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
		return FaultRule{}, fmt.Errorf("fault %q: %v", s, err)
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
		return "", 0, fmt.Errorf("X-Sim-Fault %q: unknown fault kind (want one of %s, or none)", v, kindList())
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
