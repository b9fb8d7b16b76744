// Package sim is a simulated LLM inference server: the built-in target of
// `make demo` and of every accuracy test. It models a continuous-batching
// engine, exports the metrics real servers export, injects faults on
// demand, and records the server-side truth of every request so tests can
// check a load generator's measurements against it.
//
// # Protocols
//
// One Server serves one model over several APIs, all through the same
// engine, faults and truth (exchange.go):
//
//	POST /v1/chat/completions, /v1/completions   OpenAI, as vLLM (openai.go, stream.go)
//	GET  /v1/models, /health, /metrics           the served model, 200, Prometheus text
//	/v2/...                                      Triton's HTTP API and generate extension (generate.go)
//	/generate[_stream], /info                    TGI (native.go)
//	/api/chat, /api/tags                         Ollama (native.go)
//	Server.ServeGRPC                             KServe v2 gRPC, as Triton's vLLM backend (grpc.go)
//
// Every response carries Server: tailgate-sim/VERSION and X-Sim-Version;
// completions echo X-Request-Id (or a generated "sim-N"). An answer has
// exactly max_tokens tokens (else Config.DefaultMaxTokens), one token per
// common English word, so finish_reason is "length"; prompts are counted
// with the offline tokenizer package prompts sizes them with.
//
// # Timing
//
// ModeBatch (the default) runs Config.Engines continuous-batching engines
// (engine.go): a FIFO queue, Slots and a KV-cache budget, steps whose
// length grows with the batch and with prefill, so queueing and TTFT grow
// with load as on a real GPU. ModeFixed gives every request FixedTTFT and
// FixedITL whatever the load (runOnTimer): the reference for accuracy
// tests and, with both zero, the load generator's benchmark. Deadlines are
// absolute in both, so timer lateness does not accumulate.
//
// # Faults and real servers' behaviours
//
// A request's fault comes from its X-Sim-Fault header or Config.Faults
// (FaultKind, FaultRule); StallAll and Config.StallAt freeze the whole
// server. Real servers behave worse than vLLM-shaped defaults, and each
// behaviour met has a Config field, tested on the wire: CloseAfter,
// Metrics, MetricsFromLoop, HTTPThreads, EOSNotStreamed, Dialect, MaxQueue,
// and Profile (ProfileLlamaCpp, ProfileOllama) to turn a server's set on.
//
// # Metrics and truth
//
// /metrics has vLLM's vllm:* series per engine and the simulated GPU's
// DCGM_FI_DEV_* series (metrics.go), or llama-server's llamacpp:* series,
// or nothing; KServe-shaped requests add Triton's nv_inference_* series.
// With the prefix cache on (prefixcache.go) it also has vLLM's
// vllm:prefix_cache_queries_total and _hits_total, in tokens, and usage
// carries prompt_tokens_details.cached_tokens. A chat request with tools,
// or one drawn by Config.ToolCallShare, is answered with a tool call
// (toolcall.go).
// Truth returns, for every request, its arrival, headers, admission,
// every content chunk's instant and token count, and its end, as
// monotonic time.Time values comparable with a client's own.
//
// # Lifecycle
//
// New starts the engines; Close stops them, ends every request in flight
// (hanging ones too) and waits for their handlers, so tests leak no
// goroutines. Start serves a Server on a loopback listener; tests in other
// packages use simtest.Start, which also closes it at the test's end.
package sim
