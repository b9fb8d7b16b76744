// Package prompts decides what a run sends: mix files of weighted classes,
// dataset and synthetic sources, production traces replayed on their own
// clock, and multi-turn sessions, all drawn deterministically from a seed.
//
// # The mix model
//
// A mix (a YAML file with kind: Mix) is a list of named classes. Each
// class has a source (where prompts come from), an output-length setting
// (max_tokens: a number or a distribution) and optional request params
// (temperature, top_p, ignore_eos, ...) copied into every request of the
// class. The class name labels every request, so per-class figures appear
// under "classes" in summary.json. A class whose
// answers may legitimately be empty sets accept_empty: true: its answers
// with no output token are successes, not empty_answer failures.
//
//	kind: Mix
//	seed: 42                  # --seed overrides
//	tokenizer: cl100k_base    # or o200k_base, p50k_base, r50k_base
//	template_tokens: 0        # tokens the server's chat template adds
//	time_scale: 1             # traces only; --time-scale overrides
//	classes:
//	  - name: chat
//	    weight: 60
//	    source: {type: jsonl, path: chat.jsonl}
//	    max_tokens: {dist: lognormal, mean: 180, stddev: 120, min: 16, max: 1024}
//	    params: {temperature: 0.7}
//	  - name: rag
//	    weight: 30
//	    source:
//	      type: synthetic
//	      input_tokens: {dist: normal, mean: 3000, stddev: 800, min: 1000, max: 6000}
//	      shared_prefix: {tokens: 2000, prompts_per_prefix: 8}
//	    max_tokens: 256
//	  - name: agent
//	    weight: 10
//	    source: {type: sharegpt, path: sharegpt.json}
//	    sessions: {max_turns: 4, think_time: 2s}
//
// Weighted classes are drawn independently for every prompt with
// probability weight / sum of weights (a weight of 0 disables a class;
// weights default to 1; their sum must be positive). The engine decides
// when each prompt is sent.
//
// Sources (source.type):
//
//   - jsonl: OpenAI chat requests, one a line: {"messages": [...]} or
//     {"prompt": "..."}, with optional max_tokens (or max_completion_tokens)
//     and sampling fields (temperature, top_p, top_k, min_p, stop, seed,
//     ignore_eos, min_tokens, presence/frequency/repetition_penalty,
//     response_format, tools, tool_choice, logit_bias), which go into
//     Params; the class's params win over a line's. Other fields are
//     ignored.
//   - sharegpt: the ShareGPT JSON array ({"conversations": [{"from",
//     "value"}]}, or one such object a line). As vLLM's loader does, a
//     one-shot prompt is the first human turn and the answer after it is
//     the reference output length, used when the class sets no
//     max_tokens; entries without a human turn followed by an answer are
//     skipped and counted.
//   - synthetic: input_tokens from a distribution, text generated to
//     exactly that many tokens. shared_prefix: {tokens: K,
//     prompts_per_prefix: N} gives each run of N consecutive prompts of the
//     class one K-token system message (prefixes: M instead: M fixed
//     prefixes, one drawn per prompt), to exercise prefix caching; the
//     prefix is added to input_tokens.
//   - azure, burstgpt, mooncake: production traces, below.
//   - agent, weka, dynamo, otel: agent sessions, below.
//
// Dataset sources take path (relative to the mix file), limit (read at
// most that many records) and order: shuffle (a new seeded permutation each
// pass, the default), sequential (file order) or random (with
// replacement); they cycle forever.
//
// Output length: a request's own max_tokens wins, then the class's
// max_tokens, then the dataset's reference answer length, else 0 (the
// client's default).
//
// Distributions, for token lengths and think times:
//
//	512                                        fixed (a bare value)
//	{dist: fixed, value: 512}
//	{dist: uniform, min: 100, max: 900}        whole numbers, both ends included
//	{dist: normal, mean: 500, stddev: 100, min: 1, max: 2000}
//	{dist: lognormal, mean: 500, stddev: 300, min: 1, max: 8000}
//
// Lognormal takes the mean and standard deviation of the values, not of
// their logarithm. Values are rounded to whole tokens (durations to
// nanoseconds, written as "2s", "150ms"); draws outside [min, max] are
// drawn again, so bounds truncate rather than pile up at the edges. Token
// lengths default to [1, 2^20].
//
// # Traces
//
// A trace mix has only trace classes (azure, burstgpt, mooncake, and the
// session traces dynamo and otel) and no
// weights: each row is one request whose prompt is synthetic text of the
// row's input tokens and whose max_tokens is the row's output tokens
// (add params: {ignore_eos: true} to force that length). Prompt.At is the
// row's offset from the first row of its trace times the time scale
// (time_scale, or LoadOptions.TimeScale): 0.5 replays twice as fast. The
// engine sends each prompt at its At; several trace classes merge by At.
// A Source over a trace ends with io.EOF. Rows are sorted by timestamp;
// rows with zero input or output tokens (BurstGPT's failed requests) are
// skipped and counted; from/until (durations of trace time) cut a window.
//
//   - azure: CSV TIMESTAMP,ContextTokens,GeneratedTokens, timestamps like
//     2023-11-16 18:15:46.6805900 (any fraction digits, optional UTC
//     offset) or plain seconds.
//   - burstgpt: CSV with Timestamp (seconds), Request tokens, Response
//     tokens, found by header name; model: GPT-4 keeps only that Model.
//   - mooncake: JSONL {"timestamp": ms, "input_length", "output_length",
//     "hash_ids"}; block k of the prompt (block_tokens, default 512) is the
//     text of hash_ids[k], so requests that share leading ids share exactly
//     that prefix, as in the trace.
//
// # Sessions
//
// A class with sessions: is multi-turn. Its prompts are first turns; a
// turn's FollowUp(answer) returns the next turn, whose Messages are the
// whole conversation so far (system messages, every user turn, and the
// server's own answers as assistant messages) and whose Think is the pause
// the engine waits after the answer before sending it. FollowUp is nil on
// the last turn. Session is "<class>-<n>" and Turn counts from 0, so TTFT
// can be reported per turn index. Dataset sessions take their user turns
// from the conversation (max_turns caps them); synthetic sessions draw
// turns: N (a distribution) user turns of input_tokens each. think_time is
// a duration or a distribution of durations. Everything about a session
// is drawn with its first turn, so follow-ups consume no shared randomness:
// they may be built on any goroutine and in any order.
//
// # Agent sessions
//
// A session source yields one prompt per agent session with Graph set: a
// set of calls, each fully built (Messages, MaxTokens the recorded output,
// InputTokens the recorded input, Session the graph's ID, Call its id,
// After the ids it waits for, Turn its index in its lane), and edges that
// wait for a predecessor's end, start or first token plus a delay (think
// time, or a tool's recorded duration). A call with several edges is a
// join; a background lane (weka's async_launched) gates nothing. Calls
// whose hash ids share leading ids share exactly that prefix text, one
// block per id (block_size tokens); Graph.PromisedPrefixTokens is what a
// perfect prefix cache would hit by those ids. dynamo and otel sessions
// arrive at their recorded start (Prompt.At, time-scaled); weka traces
// record no start, so weka and agent sessions are endless and weighted
// like any class (weka draws its traces in order, like a dataset).
//
//   - weka: SemiAnalysis/Weka cc-traces, a JSON trace, a JSONL of them or
//     a directory; requests n/s are calls, subagent a nested lane joined
//     by the parent's next call unless async_launched; stop tool_use makes
//     the next call's delay a tool wait; think_time, when given, is the
//     delay; hash_id_scope local gives each trace its own blocks.
//   - dynamo: dynamo.request.trace.v1 records (wrapped {timestamp, event}
//     or bare); agent_context session_id groups sessions, trajectory_id
//     lanes, parent_trajectory_id subagents (on the parent call's start
//     when it began during it, else on its end; joined by the parent's
//     first call after it ended, else background); tool events mark tool
//     gaps; input_sequence_hashes are read as uint64.
//   - otel: a session per line {trace_id, spans[]} of GenAI spans (chat,
//     generate, text_completion; execute_tool spans mark tool gaps), sent
//     with their recorded messages; a causal edge where an input assistant
//     message is a predecessor's output, else a temporal edge to the span
//     that ended last before it began.
//   - agent: synthetic; input_tokens (the first prompt), turn_tokens (each
//     tool result), output_tokens, turns, tool_gap (distributions),
//     subagent_probability, subagent_width, subagent_turns,
//     background_probability, join (default true).
//
// Every session source takes cache_bust (a [rid:<12 hex>] marker before
// each lane's first user message, per session) and idle_gap_cap (default
// 60s, applied after time_scale); weka, dynamo and otel also take models (a
// trace's model to the model sent, in params.model; "*" for the rest),
// random_start (a warm-up call, then the replay from a random turn of
// the main lane) and limit/from/until over sessions.
//
// # Token lengths and tolerance
//
// Synthetic text (synthetic sources and traces) is built from words that
// the chosen offline BPE tokenizer (github.com/tiktoken-go/tokenizer,
// vocabularies embedded, nothing downloaded) encodes as one token each,
// joined so no two merge: its length in that encoding is exact (tested:
// zero difference, for every encoding offered). A server with another
// vocabulary may count differently; that difference is not measured here.
// The words are the encoding's most frequent lowercase English words, the
// kind most BPE and SentencePiece vocabularies hold as single tokens, but
// the measure is the server's own count. A chat endpoint also adds its
// template (role markers, BOS): a constant few tokens per message.
// Prompt.InputTokens is the requested length; the run records the
// server's prompt_tokens beside it (Record.RequestedInputTokens and
// Record.InputTokens), so drift is visible, and template_tokens removes a
// known constant: synthetic text is generated that many tokens shorter.
// Dataset prompts' InputTokens are counted with the same tokenizer (about
// 1 µs a token, at load, in parallel), as are session answers in FollowUp. Every synthetic text
// opens with 8 fresh random words, so prompts share a prefix only where
// the mix asks for one.
//
// # Determinism
//
// Mix.Source(seed) is a pure function of the mix, its data files and the
// seed: the same inputs give the same prompts, byte for byte, on any
// machine. Randomness is PCG from math/rand/v2 (its output is fixed by
// the standard library's golden tests), distributions use only exactly
// rounded arithmetic (portable log and exp, explicit conversions against
// fused multiply-add), and each class draws from its own stream keyed by
// its name. Canonical and Hash identify a mix and its data for the
// evidence pack.
//
// # Errors
//
// LoadMix and LoadPromptsFile validate everything before returning: every
// bad input is an *Error naming file, line and field, such as
// "mix.yaml:12: classes[2].weight: must not be negative",
// "trace.csv:57: column GeneratedTokens missing" or
// "prompts.jsonl:3: not JSON: ...". A mix file's problems come all at
// once, sorted by line, as Errors (one *Error a line; errors.As finds
// them); a data file's first problem ends its reading. Unknown fields are
// errors, so typos do not pass silently.
//
// # Cost
//
// Source.Next runs on the engine's scheduling goroutine: a synthetic
// prompt is one copy of a slice of a pre-built corpus (BenchmarkNext*: a
// few allocations, no tokenizing), a dataset prompt shares the loaded
// record. FollowUp counts the answer's tokens, on its caller's goroutine. Messages, Params and Text may be shared between prompts and
// must be treated as read-only.
package prompts
