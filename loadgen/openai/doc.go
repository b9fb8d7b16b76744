// Package openai is the protocol client for OpenAI-compatible inference
// servers (vLLM, SGLang, TGI, llama.cpp, Ollama /v1, TensorRT-LLM
// trtllm-serve and the built-in simulator): POST /v1/chat/completions or
// /v1/completions, streamed as Server-Sent Events or answered whole. It
// implements loadgen.Client: one Do call turns one prompt into one
// loadgen.Record.
//
// # Timing model
//
// Every instant is rec.Now(): an offset from the run's start on the
// monotonic clock, so wall-clock steps cannot bend a latency.
//
//   - Intended is the runner's: when the schedule wanted the request sent.
//     The client never touches it; latencies are measured from it.
//   - Sent is taken after the body is marshalled, immediately before the
//     request is handed to net/http. Connection setup (dial, TLS) happens
//     after it and so counts in TTFT, as a user would feel it; idle
//     connections are kept per host so that this is rare in steady state.
//   - Chunk.At is taken when an event has been parsed out of the body: the
//     bytes were in the client's buffer, and decoding takes well under a
//     microsecond. Events that arrive in one read get near-identical
//     instants, which is what the client saw. Only content-bearing events
//     make chunks: non-empty answer text (delta.content, message.content,
//     text), non-empty reasoning (reasoning, reasoning_content), or a
//     non-empty tool_calls array. Role-only, empty, finish-only, usage-only
//     and comment events do not.
//   - FirstAnswer is the At of the first chunk with answer text or tool
//     calls, so TTFT (first chunk) and TTFAT (first answer) differ only
//     for reasoning models.
//   - End is taken at data: [DONE], at the end of the body, at an error
//     event, or when the context ends. After [DONE] the client reads the
//     rest of the body for at most 100 ms so the connection can be
//     reused; that wait is not in End.
//
// A non-streamed response makes one chunk, at the end of its body,
// carrying the usage completion count.
//
// # Token counts
//
// A chunk's Tokens are exact when the server gives a cumulative count on
// every chunk (vLLM continuous_usage_stats, llama.cpp timings.predicted_n):
// each chunk gets the increase since the last chunk, so tokens counted on
// an event without text go to the next chunk with text, which is when they
// reached the user. Otherwise Tokens stay 0 and Record.Finalize spreads the
// usage total over the chunks or assumes one per chunk, and says which.
// InputTokens and OutputTokens come from the latest usage object with a
// non-zero count (ask for it with stream_options.include_usage, sent by
// default); zero-valued usage on every chunk (Ollama /v1/completions) is
// ignored.
//
// # How a request can fail
//
//	rate_limited, client_error, server_error  the HTTP status (kept in Record.Status); Error has the server's message
//	connect                       no response: refused, reset, TLS, DNS
//	timeout                       the context's deadline passed
//	cancelled                     the context was cancelled (run stopped)
//	stream_error                  an error object inside a 200 stream
//	stream_truncated              the body ended without [DONE], or was cut
//	protocol                      a chunk that is not valid JSON, broken HTTP framing, a head over 1 MB
//	over_generation               tokens past loadgen.OutputBound(max_tokens): reading stopped
//
// The runner then fails an answer with no output token as empty_answer and
// one of more than max_tokens + 1 tokens as over_generation
// (loadgen.Record's settleAnswer), for every protocol alike.
//
// A stream without [DONE] is accepted only if it ended cleanly after a
// chunk with a finish_reason. Error never contains the API key or the
// value of any credential-like header, even when the server echoes it.
//
// # Cost
//
// The read path is built for millions of tokens per second on a few
// cores: pooled readers, events read with bufio.Reader.ReadSlice, and a
// validating JSON decoder that walks each chunk without allocating and
// hands anything unusual to encoding/json, whose verdict stands.
package openai
