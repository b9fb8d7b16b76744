// Package sim is a simulated OpenAI-compatible LLM endpoint: the built-in
// target of `make demo` and of every accuracy test. It speaks the vLLM
// dialect of the API, models a continuous-batching engine, exports vLLM and
// dcgm-exporter metrics, injects faults on demand, and records the
// server-side truth of every request so tests can check a load generator's
// measurements against it.
//
// # API
//
//	POST /v1/chat/completions, POST /v1/completions  streaming (SSE) or JSON
//	GET  /v1/models                                   the one served model
//	GET  /health                                      200, empty body
//	GET  /metrics                                     Prometheus text format
//
// Server.ServeGRPC (tailgate sim --grpc ADDR) serves the same model, engine,
// faults and truth over KServe v2 gRPC as Triton's vLLM backend does, and
// adds Triton's nv_inference_* series to /metrics: see grpc.go. The HTTP
// address also serves Triton's /v2 endpoints and generate extension
// (generate.go) and TGI's and Ollama's native APIs (native.go), over the
// same engine, faults and truth.
//
// Every response carries Server: tailgate-sim/VERSION and X-Sim-Version;
// completions echo X-Request-Id (or a generated "sim-N").
//
// A stream is shaped like vLLM's: for chat, a role-only first chunk
// (delta {"role":"assistant","content":""}), sent as soon as the request is
// accepted and before any queueing, so a client that counts it as the first
// token measures almost no TTFT; then one content chunk per engine step,
// each carrying Config.TokensPerChunk tokens (the last may carry fewer);
// then a finish chunk with an empty delta and finish_reason "length" (or
// finish_reason on the last content chunk with Config.FinishWithLastChunk,
// as current vLLM does); then, when stream_options.include_usage is true, a
// chunk with "choices":[] and the usage; then data: [DONE]. With
// stream_options.continuous_usage_stats as well, every content chunk carries
// the cumulative usage. Legacy completions have the same shape without the
// role chunk. Non-streaming requests get one JSON body with the usage once
// the whole answer is generated.
//
// The answer has exactly max_completion_tokens (else max_tokens, else
// Config.DefaultMaxTokens) tokens, so finish_reason is "length" (but see
// EOSNotStreamed below). Its text cycles through 16 common English words
// that are one token each in the usual BPE vocabularies (" the", " of",
// " and", …). Prompt tokens are counted the way package prompts sizes
// prompts: with the offline tokenizer Config.Tokenizer (default
// prompts.DefaultEncoding, cl100k_base), each chat message's content on its
// own and summed, so a mix asking for N input tokens gets prompt_tokens N.
// A real chat template adds role markers and BOS: Config.PromptOverheadTokens
// (--prompt-overhead-tokens) adds that constant to every text prompt, as a
// mix's template_tokens takes it off the text. Token-id prompts are counted
// exactly. (Before, one token per 4 bytes was the default, which counts the
// mixes' words, 6.1 bytes a token, 54% high; TokenizerBytes4 keeps it.)
//
// # Engine model (ModeBatch)
//
// One scheduler goroutine runs steps back to back, timed with real sleeps.
// Requests wait in a FIFO queue. Before each step the scheduler admits
// requests from the head of the queue while a slot is free (Config.Slots,
// vLLM's max_num_seqs), the KV cache has room for the request's prompt +
// max_tokens tokens (Config.KVTokens, reserved whole at admission and freed
// when the request finishes or is cancelled), and the step's prefill budget
// (Config.MaxBatchTokens prompt tokens; one request is always admitted)
// lasts. A head that does not fit blocks the queue (first come, first
// served). A request that could never fit (prompt + max_tokens > KVTokens) is
// rejected with 400, as vLLM rejects requests longer than max_model_len.
//
// A step lasts
//
//	DecodeBase + DecodePerSeq × running
//	  + (PrefillBase + PrefillPerToken × prompt tokens admitted), if any were admitted
//
// and at its end every running sequence, the newly admitted included (its
// prefill produced its first token), emits TokensPerChunk tokens. So a
// prefill holds up the whole batch's next token, as in a non-chunked or
// step-level prefill; MaxBatchTokens bounds how long. TTFT below capacity
// is about one step with prefill; above capacity the queue grows, and queue
// time and TTFT grow with it. Back-to-back steps are scheduled from the
// previous step's end, so timer lateness does not slow the engine.
//
// Metrics, labelled model_name and engine="0" as vLLM labels them:
// vllm:num_requests_running, vllm:num_requests_waiting,
// vllm:kv_cache_usage_perc (reserved KV / KVTokens, 0–1) as gauges;
// vllm:request_queue_time_seconds (arrival → admission),
// vllm:time_to_first_token_seconds and vllm:e2e_request_latency_seconds
// (arrival → first content chunk / end, as flushed), and
// vllm:inter_token_latency_seconds (chunk gap / tokens) as histograms with
// vLLM's buckets; vllm:prompt_tokens_total, vllm:generation_tokens_total and
// vllm:request_success_total{finished_reason="length"|"abort"} as counters.
// The simulated GPU (labels gpu, UUID, device, modelName, Hostname) has
// DCGM_FI_DEV_GPU_UTIL, the percentage of time the engine spent in steps
// (only steps with at least one running sequence happen) since the previous
// scrape (at least 100 ms), and DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE
// in MiB: Config.WeightsMiB plus reserved KV tokens × KVBytesPerToken.
//
// # Fixed-delay mode (ModeFixed)
//
// For accuracy tests the engine is bypassed: each request, on its own
// handler goroutine and timer, gets its first content chunk FixedTTFT after
// arrival and each next one FixedITL after the previous (each delay drawn
// from [d−Jitter, d+Jitter] when Jitter is set, seeded by Seed and the
// arrival number), whatever the load. Deadlines are absolute, so timer
// lateness does not accumulate. With both delays zero the server streams as
// fast as it can: chunk bytes are pre-rendered, buffers reused, no JSON is
// marshalled and nothing is allocated per token; each chunk is one Write and
// one Flush. The gauges report requests in flight as running and their
// prompt + max_tokens as KV use; GPU utilization is the time with at least
// one request in flight.
//
// # Faults
//
// A request gets a fault from its X-Sim-Fault header (KIND, KIND=DURATION
// for stall and stall_mid, or "none"), else from the first matching
// Config.Faults rule (every N-th arrival, or with a probability decided by
// hashing Seed and the arrival number, so a run is reproducible whatever the
// concurrency). The kinds are the FaultKind constants: stall, stall_mid,
// http_429, http_503, truncate, malformed, error_in_stream, hang,
// ignore_stream (a streaming request answered with one JSON body, as by a
// server that ignores "stream") and html_200 (200 with a text/html login
// page, as from a proxy). Mid-stream faults fire after half of the content
// chunks, rounded down.
//
// StallAll(d), or Config.StallAt and StallFor, freezes the whole server:
// nothing is admitted, produced or sent for d, and work in progress when
// the stall began (an engine step, a fixed-mode delay) ends d later, as
// under a GC pause or a failover. Requests arriving meanwhile are accepted
// by the kernel but get nothing, not even headers, until it ends.
//
// # Several engines
//
// Config.Engines (--engines) runs that many data-parallel engines, as vLLM
// with --data-parallel-size does: each has its own scheduler, Slots and
// KVTokens, requests are dealt round robin, and every vllm:* series
// carries its engine's label (engine="0", "1", …; one engine exports
// engine="0" as before). Server.RestartEngine (--restart-engine I@T)
// restarts one the way a rolling restart behind a router does: the engine
// is drained (new requests go to the others); once its last request has
// finished and a /metrics scrape that began after that has been answered,
// its counters and histograms start again at zero and it takes requests
// again. The sum over the engines falls while no series was lost
// unscraped, so a scraper that takes increases per series, as Prometheus
// does, gets exactly what the engines saw (Truth), and one that takes
// them of the sum does not.
//
// # Real servers' behaviours
//
// Real servers behave worse than vLLM-shaped defaults; each behaviour we
// have met has a mode, tested on the wire:
//
//   - Config.CloseAfter (--close-after): CloseAfterStream closes the TCP
//     connection once a streamed response's last byte (the chunked
//     terminator included) is out, without a Connection: close header and
//     with Keep-Alive: timeout=5, max=100, as llama-server does; a client
//     that reuses the idle connection gets EOF or a reset on its next
//     request. CloseAfterAll does it after non-streamed answers too. The
//     close is recorded in Truth.ClosedConn. Config.CloseDelay (--close-delay)
//     holds the close back after the last byte, so a client that reuses
//     the connection within it always fails rather than only when it races
//     the FIN.
//   - Config.Metrics (--metrics) MetricsLlamaCpp: /metrics is llama-server's
//     exposition, byte for byte in form (testdata/llamacpp-metrics.txt): the
//     twelve unlabelled llamacpp:* series (prompt and predicted token and
//     seconds counters, n_decode_total, n_busy_slots_per_decode, throughput
//     gauges reset by every scrape, kv_cache_usage_ratio, kv_cache_tokens,
//     requests_processing = running, requests_deferred = waiting), values
//     printed to 6 significant digits as C++ prints a double. No histogram,
//     so no server-side queue delay, and no DCGM series. In ModeFixed each
//     produced chunk counts as one decode.
//   - Config.MetricsFromLoop (--metrics-from-loop): a scrape is answered by
//     the engine between steps, so it waits for the step in progress (in
//     ModeFixed, until no request is in flight). Config.HTTPThreads
//     (--http-threads) caps the requests handled at once, as llama-server's
//     HTTP thread pool: with every thread streaming, a scrape waits for a
//     stream to end. Under load, scrapes are late or time out.
//   - Config.EOSNotStreamed (--eos-not-streamed): the last of the answer's
//     tokens is an end-of-sequence token, generated (it takes its step) and
//     counted but never sent: max_tokens−1 tokens are streamed, the finish
//     chunk (its own, even with FinishWithLastChunk) says "stop", and usage
//     completion_tokens is streamed + 1. Truth.CompletionTokens and
//     Truth.FinishReason record it. On Ollama's /api/chat it is the same:
//     done_reason "stop", eval_count streamed + 1.
//
// Ollama (--profile ollama, ProfileOllama), as a real Ollama v0.17.4 showed
// (e2e/ollama): Config.Metrics MetricsNone (--metrics none: /metrics is
// 404) and "Ollama is running" at the root, EOSNotStreamed, and /api/chat's
// final object with Ollama's timings (total_duration, load_duration,
// prompt_eval_duration from admission to the first token, eval_duration
// from there to the end). Config.MaxQueue (--max-queue) refuses a
// completion that arrives with Slots+MaxQueue in flight with 503 and
// Ollama's "server busy, please try again.  maximum pending requests
// exceeded" (OLLAMA_MAX_QUEUE).
//   - Config.Dialect (--dialect) DialectLlamaCpp: streams shaped like
//     llama-server's, key for key as in testdata/llamacpp-chat-stream.txt:
//     no role chunk, "choices" first, system_fingerprint, and a finish chunk
//     with an empty delta that carries usage and a timings object
//     (prompt_n, prompt_ms from admission to the first chunk, predicted_n,
//     predicted_ms from there to the finish, per-token and per-second
//     figures) even without stream_options; with include_usage they come
//     in a "choices":[] chunk instead, as newer builds send them.
//   - the ignore_stream and html_200 faults above.
//
// Config.Profile (--profile) ProfileLlamaCpp turns the llama.cpp ones on
// together: CloseAfterStream, MetricsLlamaCpp, DialectLlamaCpp,
// MetricsFromLoop, HTTPThreads Slots+2 (llama-server's default) and
// EOSNotStreamed; a CloseAfter, Metrics, Dialect or HTTPThreads set
// explicitly wins.
//
// # Truth
//
// Truth returns, for every completion request, its arrival, headers,
// admission, every content chunk's flush instant and token count, and its
// end, as monotonic time.Time values, keyed by X-Request-Id. A chunk's
// At is when its Flush returned; its Began, just before its write, is the
// one no client can precede (the handler may wait on a busy run queue
// after the write while the client reads).
//
// # Lifecycle
//
// New starts the scheduler; Close stops it, ends every request in flight
// (hanging ones too) and waits for their handlers, so tests leak no
// goroutines. A cancelled client request frees its slot and KV before the
// next step. Start serves a Server on a loopback listener and returns its
// URL; tests in other packages use simtest.Start, which also closes it at
// the test's end.
package sim
