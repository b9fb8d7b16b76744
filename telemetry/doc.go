// Package telemetry samples the serving side while a load run goes on, so
// a capacity review can set GPU utilization and server queue delay beside
// the client-side latencies.
//
// # What is sampled
//
// Two kinds of source, read in the same rounds:
//
//   - Prometheus text endpoints (ScrapeConfig): the inference server's own
//     /metrics and, optionally, a dcgm-exporter (port 9400). The text is
//     parsed with prometheus/common's expfmt (UTF-8 name validation, so
//     vllm:* names parse) and normalised across vLLM, SGLang, TGI and
//     Triton into one ServerSample: running requests, waiting requests
//     (queue depth), KV-cache usage (0–1), the cumulative queue-delay
//     histogram, the server's TTFT and e2e histograms, prompt and
//     generation token counters, and GPU gauges found on the endpoint
//     (DCGM_FI_DEV_GPU_UTIL as a 0–1 ratio, DCGM_FI_PROF_GR_ENGINE_ACTIVE,
//     DCGM_FI_DEV_FB_USED in bytes, Triton's nv_gpu_utilization; DCGM
//     4.6's GR_ENGINE_UTIL_RATIO, BOARD_POWER_WATTS and GPU_TEMP_CELSIUS
//     and dcgm-exporter's --use-old-namespace dcgm_* names too; a
//     dcgm-exporter with none of them is said once, in its source's
//     note). The server family is told from the metric prefixes and
//     recorded.
//   - a GPUSampler: NewNVML reads each GPU of the machine tailgate runs on
//     through go-nvml (utilization, memory, power, SM clock, temperature)
//     and describes it (model, UUID, serial, driver and CUDA version) for
//     the evidence pack; it only helps when the load generator shares the
//     server's host; otherwise scrape a dcgm-exporter there (its modelName
//     and DCGM_FI_DRIVER_VERSION labels are kept too). go-nvml needs
//     cgo, so it is compiled only with `linux && cgo`; elsewhere NewNVML
//     returns ErrNoNVML, and so does a machine without the NVIDIA driver.
//     Nothing else in the module imports go-nvml, so the rest builds with
//     CGO_ENABLED=0. Build with CGO_CFLAGS=-Wno-deprecated-declarations to
//     quiet nvml.h.
//
// Metric mapping (first name found wins, in this order). The mapping is one
// table, dialects in dialect.go, with one row per server: its prefixes,
// names, fallbacks and series rules. To add a server, add a row.
//
//	              vLLM                              SGLang                              TGI                                         Triton
//	running       vllm:num_requests_running         sglang:num_running_reqs             tgi_batch_current_size                      —
//	waiting       vllm:num_requests_waiting         sglang:num_queue_reqs               tgi_queue_size                              nv_inference_pending_request_count
//	kv_usage      vllm:kv_cache_usage_perc          sglang:token_usage                  tgi_batch_current_max_tokens /              —
//	              (vllm:gpu_cache_usage_perc)                                           tgi_batch_max_total_tokens
//	queue delay   vllm:request_queue_time_seconds   sglang:queue_time_seconds           tgi_request_queue_duration                  nv_inference_queue_duration_us (mean only)
//	ttft          vllm:time_to_first_token_seconds  sglang:time_to_first_token_seconds  —                                           nv_inference_first_response_histogram_ms
//	e2e           vllm:e2e_request_latency_seconds  sglang:e2e_request_latency_seconds  tgi_request_duration                        nv_inference_request_duration_us (mean only)
//	tokens        vllm:{prompt,generation}_tokens   sglang:{prompt,generation}_tokens   sums of tgi_request_input_length and        —
//	              _total                            _total                              tgi_request_generated_tokens
//
// TensorRT-LLM: trtllm-serve answers /metrics with JSON iteration stats and
// serves Prometheus text at /prometheus/metrics; a /metrics answer in JSON
// is followed there once and that URL is read from then on (the source's
// note says so). Its trtllm_* series map like vLLM's
// (trtllm_num_requests_running, _waiting, trtllm_kv_cache_utilization,
// trtllm_request_queue_time_seconds, trtllm_time_to_first_token_seconds,
// trtllm_e2e_request_latency_seconds, trtllm_{prompt,generation}_tokens_total),
// with trtllm_kv_cache_used_blocks and _max_blocks. Under Triton, the
// TensorRT-LLM backend's in-flight batcher exports
// nv_trt_llm_request_metrics{request_type=…}: scheduled is read as
// running and waiting (the executor's queue) as the queue depth, before
// Triton's pending count; nv_trt_llm_kv_cache_block_metrics{
// kv_cache_block_type=used,max} give the KV blocks and KV usage. Triton's
// queue time is then its own scheduler's, not the executor's queue, and
// QueueDelayNote says so.
//
// llama.cpp's llama-server (--metrics) is read from llamacpp:requests_processing
// (running), llamacpp:requests_deferred (waiting), llamacpp:kv_cache_usage_ratio,
// llamacpp:prompt_tokens_total (evaluated prompt tokens: prompt-cache hits are
// not counted) and llamacpp:tokens_predicted_total. It has no histograms, so
// there is no server queue delay: the Snapshot, Delta (Histogram.Missing)
// and Summary say so (QueueDelayUnavailable = NoQueueLlamaCPP), and a
// queue_delay objective is NO_DATA with that reason. Triton's mean-only
// queue time gives NoQueueMeanOnly likewise.
//
// Label sets (model_name, engine, dp_rank, model/version) are combined:
// request counts, token counters and histograms are summed, KV usage is
// averaged; histograms whose bucket layouts differ are summed over the
// bounds they share. Increases are not taken of those sums but series by
// series (see "Counting between two moments"). SGLang started with
// --enable-metrics-for-all-schedulers exports every scheduler's series,
// and the TP ranks of one data-parallel rank report the same requests:
// of series that differ only in tp_rank, the lowest rank is read
// (tp_rank="0" of each dp_rank). GPU gauges are kept per GPU (keyed by
// UUID, else the gpu label, plus the MIG instance); several series of one
// GPU (one per Kubernetes pod) are averaged. dcgm-exporter's blank
// sentinels and GPU_UTIL readings above 100 % are dropped. Triton exposes queue and request time
// only as cumulative microsecond counters, so those become histograms with
// a single +Inf bucket (a mean over nv_inference_request_success, since
// the duration counters grow only when a request succeeds, and no
// quantiles). An ensemble's composing models count the same request
// again, so Triton's nv_inference_* series are read from one model: the
// one the run targets (ParseOptions.ServerModel, Config.ServerModel,
// tailgate's --server-model), else the only one loaded; with several and
// none named they are summed and ServerModelNote says so.
//
// # Capacity figures
//
// Beside the latencies a capacity review asks why: the Summary's Capacity
// has vLLM's preemptions (num_preemptions_total), prefix-cache queries,
// hits and hit rate (prefix_cache_queries_total, _hits_total), speculative
// decoding's drafted and accepted tokens and acceptance rate, engine steps
// and tokens per step (iteration_tokens_total) and KV blocks
// (cache_config_info's num_gpu_blocks); SGLang's retracted requests and
// cache hit rate; TGI's mean batch (tgi_batch_next_size) and forward
// time (tgi_batch_forward_duration); Triton's inferences per execution
// (nv_inference_count / nv_inference_exec_count of the server model).
// Counters are increases per series, as for the tokens. Per GPU,
// dcgm-exporter's tensor pipe and DRAM activity, the XID errors seen and
// the clocks event (throttle) reasons seen are kept.
//
// # How often
//
// Start runs one round at once and then one every Config.Interval (1 s by
// default) on a fixed schedule. A round scrapes every source and reads the
// GPU sampler concurrently, each bounded by its timeout (by default 90 % of
// the interval), so a hanging /metrics or a wedged GPU costs that source
// one error per round and never delays the schedule; a source still busy
// from a previous round is not asked again. Errors are counted and
// reported in the Sample, never fatal. Each round produces one Sample for
// the sink, which the caller writes to DIR/telemetry.jsonl as it arrives
// (Sample.MarshalJSON). Snapshot forces a round, so that stage boundaries
// are exact to the scrape rather than to the interval; Stop takes a final
// round and returns the Summary for summary.json's "telemetry" key.
//
// # Counting between two moments
//
// Server counters and histograms are cumulative since the server started.
// A Run keeps, per source, the increase since that source's first
// successful scrape, as Prometheus's increase() does: series by series
// (one per label set: engine, dp_rank, model…), each corrected for its own
// resets, then summed. A series has been reset only when its new reading
// is below its previous one (any bucket, the count or the sum of a
// histogram), compared exactly and series by series, never on a float
// sum: then its new reading counts as the increase since the last one, and
// what happened between the last scrape and the restart is lost. So one
// data-parallel engine that restarts costs only its own lost interval, and
// the others' increases stand. A series that disappears (an engine down, a
// Triton model unloaded) adds nothing further; should it come back it
// continues from its last reading. A series first seen after the source's
// first good scrape (TGI creates its series on first use, a model loaded
// or an engine started mid-run) began during the run: its first reading
// counts in full, from zero. A series present at the first scrape is the
// server's history and only its later increase counts. Snapshot returns
// those totals; Delta(a, b) is the queue-delay histogram gained between
// two snapshots, for per-stage evaluation. A request counts in the stage in which the server
// observed it: vLLM v1 observes vllm:request_queue_time_seconds (like its
// e2e and phase histograms) when the request finishes, so a request queued
// in one stage and finished in the next lands in the next; the built-in
// simulator observes it when the request is admitted.
//
// # How quantiles are estimated, and how wrong they can be
//
// Queue delay and the server latencies are classic Prometheus histograms:
// counts of observations ≤ each bucket bound. Histogram.Quantile estimates
// the q-quantile as Prometheus's histogram_quantile does: the rank is
// q·count; find the first bucket whose cumulative count reaches the rank
// and interpolate linearly between its lower and upper bound (the lowest
// bucket starts at 0), which assumes observations are spread evenly inside
// the bucket. The true quantile lies in that same bucket, so the error is
// at most the bucket's width: with vLLM's queue-time bounds (0.3, 0.5,
// 0.8, 1, 1.5, 2, 2.5, 5, 10, … s) a p99 that lands between 2.5 and 5 s is
// known only to ±2.5 s. A rank in the +Inf bucket returns the highest
// finite bound, a lower bound only. The Summary reports each quantile with
// the bucket it fell in (pNN_bucket_ms) and says "estimated from server
// buckets" in its method field. For exact, per-request figures use the
// client's own HDR histograms; these are the server's view.
//
// # Gauge statistics
//
// Gauges (running, waiting, KV usage, GPU utilization, memory, power) are
// instantaneous readings, one per round; the Summary gives their mean, max
// and p95 (nearest rank) over the rounds that had them. Every reading is
// kept until Stop for the exact p95: 8 bytes per series per round, about
// 25 MB for a day at 1 s with eight GPUs. GPU utilization
// from NVML and from DCGM_FI_DEV_GPU_UTIL is itself an average over the
// driver's sample period (roughly 1/6 s to 1 s depending on the product),
// so short bursts are smoothed and a 1 s interval samples, not integrates,
// it.
package telemetry
