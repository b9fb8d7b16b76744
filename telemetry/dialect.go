package telemetry

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// Family is the kind of server a /metrics endpoint belongs to, told from
// its metric prefixes. Several families on one endpoint (Triton's vLLM
// backend exports vllm:* beside nv_*) are joined with "+", e.g.
// "triton+vllm".
type Family string

// The server families whose metrics the telemetry reads.
const (
	FamilyUnknown Family = "unknown"
	FamilyVLLM    Family = "vllm"
	FamilySGLang  Family = "sglang"
	FamilyTGI     Family = "tgi"
	FamilyTriton  Family = "triton"
	// FamilyLlamaCPP is llama.cpp's llama-server (started with --metrics).
	FamilyLlamaCPP Family = "llamacpp"
	// FamilyTRTLLM is TensorRT-LLM: trtllm-serve's trtllm_* (served at
	// /prometheus/metrics) or the Triton backend's nv_trt_llm_* beside
	// Triton's own ("triton+trtllm").
	FamilyTRTLLM Family = "trtllm"
	// FamilyDCGM is an endpoint with only dcgm-exporter GPU metrics.
	FamilyDCGM Family = "dcgm-exporter"
)

// A dialect is one server's metric names: how its endpoint is recognised,
// which series give each ServerSample figure, and what is read where those
// are missing. To add a server, add a row to dialects (and a fixture with
// a case in TestDialectRows); nothing else names a server's metrics.
type dialect struct {
	family Family
	// prefixes begin the server's metric names: an endpoint with any
	// metric so named is this server.
	prefixes []string
	// gpuOnly marks an exporter of GPU gauges alone (dcgm-exporter): its
	// family is named only when no server's is.
	gpuOnly bool

	// read names the series of each figure. fallback is read for a figure
	// only when no row's read found it. Within a tier, rows are tried in
	// table order and each row's entries in theirs: the first found wins.
	read, fallback figures

	// counters and histograms are the capacity figures: counters
	// whose increase over the run is reported (per series, like the
	// tokens), and histograms whose mean is.
	counters, histograms []capFigure
	// cacheHitRate names a 0–1 gauge averaged over series.
	cacheHitRate []string
	// noQueue is QueueDelayUnavailable where the server is detected and no
	// queue-delay histogram was found.
	noQueue string
	// queueNote is QueueDelayNote where the queue delay was read from this
	// row and metric queueNoteWith is on the endpoint.
	queueNote, queueNoteWith string
	// series picks which series of one of the server's metrics count;
	// nil: every series.
	series func(rd *reader, name string, ms []*dto.Metric) []*dto.Metric
	// gpus are the per-GPU gauges the endpoint may carry.
	gpus []gpuGauge
}

// figures names, for each ServerSample figure, the series that give it.
// A name may carry one {label=value} selector: the series of the metric
// with that label value.
type figures struct {
	// Running and Waiting: gauges summed over series.
	running, waiting []gauge
	// KVUsage (0–1): a gauge averaged over series, or a ratio.
	kvUsage []gauge
	// KVBlocksUsed and KVBlocksMax: summed over series.
	kvBlocksUsed, kvBlocksMax []gauge
	// PromptTokens and GenerationTokens: counters summed over series.
	promptTokens, generationTokens []gauge
	// QueueDelay, TTFT and E2E: latency histograms.
	queue, ttft, e2e []latency
}

// gauge is one way to read a number from a metric's series: their values
// summed (averaged, for a 0–1 figure), or as the fields say.
type gauge struct {
	name string
	// over makes a ratio: name's sum over this metric's sum (counted as
	// one series when averaged).
	over string
	// label reads each series' value from this label instead (vLLM's
	// cache_config_info num_gpu_blocks).
	label string
	// histSum reads name as a histogram whose sum is the figure (TGI's
	// token counts are request-length histograms).
	histSum bool
}

// latency is one way to read a latency histogram.
type latency struct {
	name string
	// scale converts the metric's unit to seconds (0: seconds already).
	scale float64
	// perRequest makes name a cumulative total (Triton's µs counters)
	// divided by the requests in perRequest's series of the same labels:
	// a mean, with no buckets.
	perRequest string
}

// capFigure names a capacity counter or histogram, first name found wins.
type capFigure struct {
	key   capKey
	names []string
}

// gauges reads each name plainly.
func gauges(names ...string) []gauge {
	out := make([]gauge, len(names))
	for i, n := range names {
		out[i] = gauge{name: n}
	}
	return out
}

// seconds reads each name as a histogram in seconds.
func seconds(names ...string) []latency {
	out := make([]latency, len(names))
	for i, n := range names {
		out[i] = latency{name: n}
	}
	return out
}

// dialects is the metric table, one row per server. Row order is the
// order of families in a joined name ("triton+vllm") and, within a tier,
// the order figures are looked for in. Triton comes first but reads its
// figures only as fallbacks, so that Triton's vLLM or TensorRT-LLM
// backend is read from its richer own metrics.
var dialects = []dialect{
	{
		family:   FamilyTriton,
		prefixes: []string{"nv_inference_", "nv_gpu_", "nv_cpu_", "nv_energy_"},
		fallback: figures{
			waiting: gauges("nv_inference_pending_request_count"),
			// Triton adds to its queue and request duration counters only
			// when a request succeeds, so failures are not in the mean.
			queue: []latency{{name: "nv_inference_queue_duration_us", scale: 1e-6, perRequest: "nv_inference_request_success"}},
			ttft:  []latency{{name: "nv_inference_first_response_histogram_ms", scale: 1e-3}},
			e2e:   []latency{{name: "nv_inference_request_duration_us", scale: 1e-6, perRequest: "nv_inference_request_success"}},
		},
		counters: []capFigure{
			{capInferences, []string{"nv_inference_count"}},
			{capExecutions, []string{"nv_inference_exec_count"}},
		},
		queueNote:     QueueTritonScheduler,
		queueNoteWith: "nv_trt_llm_request_metrics",
		series:        tritonModelSeries,
		gpus:          tritonGPUGauges,
	},
	{
		family:   FamilyVLLM,
		prefixes: []string{"vllm:"},
		// Counters: prometheus_client's text format names them with
		// _total; OpenMetrics-style exposition may not.
		read: figures{
			running:          gauges("vllm:num_requests_running"),
			waiting:          gauges("vllm:num_requests_waiting"),
			kvUsage:          gauges("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
			promptTokens:     gauges("vllm:prompt_tokens_total", "vllm:prompt_tokens"),
			generationTokens: gauges("vllm:generation_tokens_total", "vllm:generation_tokens"),
			queue:            seconds("vllm:request_queue_time_seconds"),
			ttft:             seconds("vllm:time_to_first_token_seconds"),
			e2e:              seconds("vllm:e2e_request_latency_seconds"),
		},
		// KV blocks in all: cache_config_info's label, summed over engines.
		fallback: figures{kvBlocksMax: []gauge{{name: "vllm:cache_config_info", label: "num_gpu_blocks"}}},
		counters: []capFigure{
			{capPreemptions, []string{"vllm:num_preemptions_total", "vllm:num_preemptions"}},
			{capPrefixQuery, []string{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"}},
			{capPrefixHit, []string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"}},
			{capSpecDrafted, []string{"vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens"}},
			{capSpecAccepted, []string{"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"}},
		},
		histograms: []capFigure{{capStepTokens, []string{"vllm:iteration_tokens_total"}}},
	},
	{
		family:   FamilySGLang,
		prefixes: []string{"sglang:"},
		read: figures{
			running:          gauges("sglang:num_running_reqs"),
			waiting:          gauges("sglang:num_queue_reqs"),
			kvUsage:          gauges("sglang:token_usage"),
			promptTokens:     gauges("sglang:prompt_tokens_total", "sglang:prompt_tokens"),
			generationTokens: gauges("sglang:generation_tokens_total", "sglang:generation_tokens"),
			queue:            seconds("sglang:queue_time_seconds"),
			ttft:             seconds("sglang:time_to_first_token_seconds"),
			e2e:              seconds("sglang:e2e_request_latency_seconds"),
		},
		counters:     []capFigure{{capRetracted, []string{"sglang:num_retracted_requests_total"}}},
		cacheHitRate: []string{"sglang:cache_hit_rate"},
		series:       lowestTPRankSeries,
	},
	{
		family:   FamilyTGI,
		prefixes: []string{"tgi_"},
		read: figures{
			running: gauges("tgi_batch_current_size"),
			waiting: gauges("tgi_queue_size"),
			queue:   seconds("tgi_request_queue_duration"),
			e2e:     seconds("tgi_request_duration"),
		},
		// TGI exports no KV gauge nor token counters: the batch's token
		// share, and the sums of its request-length histograms.
		fallback: figures{
			kvUsage:          []gauge{{name: "tgi_batch_current_max_tokens", over: "tgi_batch_max_total_tokens"}},
			promptTokens:     []gauge{{name: "tgi_request_input_length", histSum: true}},
			generationTokens: []gauge{{name: "tgi_request_generated_tokens", histSum: true}},
		},
		histograms: []capFigure{
			{capNextBatch, []string{"tgi_batch_next_size"}},
			{capForward, []string{"tgi_batch_forward_duration"}},
		},
	},
	{
		family:   FamilyLlamaCPP,
		prefixes: []string{"llamacpp:"},
		read: figures{
			running: gauges("llamacpp:requests_processing"),
			waiting: gauges("llamacpp:requests_deferred"),
			kvUsage: gauges("llamacpp:kv_cache_usage_ratio"),
			// prompt_tokens_total counts evaluated prompt tokens only:
			// prompt-cache hits are not in it.
			promptTokens:     gauges("llamacpp:prompt_tokens_total"),
			generationTokens: gauges("llamacpp:tokens_predicted_total"),
		},
		noQueue: NoQueueLlamaCPP,
	},
	{
		// trtllm-serve's trtllm_*, and the Triton backend's nv_trt_llm_*:
		// its in-flight batcher exports its state as one gauge family
		// with a request_type label: scheduled (in this iteration's
		// batch) is read as running, waiting (queued in the executor) as
		// the queue depth, before Triton's pending count.
		family:   FamilyTRTLLM,
		prefixes: []string{"trtllm_", "nv_trt_llm_"},
		read: figures{
			running: gauges("trtllm_num_requests_running", "nv_trt_llm_request_metrics{request_type=scheduled}"),
			waiting: gauges("trtllm_num_requests_waiting", "nv_trt_llm_request_metrics{request_type=waiting}"),
			// KV usage: trtllm-serve's gauge, else blocks used over max,
			// else the backend's own fraction.
			kvUsage: []gauge{
				{name: "trtllm_kv_cache_utilization"},
				{name: "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=used}", over: "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max}"},
				{name: "trtllm_kv_cache_used_blocks", over: "trtllm_kv_cache_max_blocks"},
				{name: "nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}"},
			},
			kvBlocksUsed: gauges("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=used}",
				"trtllm_kv_cache_used_blocks"),
			kvBlocksMax: gauges("nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max}",
				"trtllm_kv_cache_max_blocks"),
			promptTokens:     gauges("trtllm_prompt_tokens_total"),
			generationTokens: gauges("trtllm_generation_tokens_total"),
			queue:            seconds("trtllm_request_queue_time_seconds"),
			ttft:             seconds("trtllm_time_to_first_token_seconds"),
			e2e:              seconds("trtllm_e2e_request_latency_seconds"),
		},
	},
	{
		family:   FamilyDCGM,
		prefixes: []string{"DCGM_FI_", "dcgm_"},
		gpuOnly:  true,
		gpus:     dcgmGauges,
	},
}

// dialectOf is the index of the row whose prefixes begin name, or -1.
func dialectOf(rows []dialect, name string) int {
	for i := range rows {
		for _, p := range rows[i].prefixes {
			if strings.HasPrefix(name, p) {
				return i
			}
		}
	}
	return -1
}

// detectFamily names the rows whose metrics are on the endpoint, joined
// with "+" in table order; a GPU-only row only when no other matched.
func detectFamily(fams map[string]*dto.MetricFamily, rows []dialect) Family {
	found := make([]bool, len(rows))
	for name := range fams {
		if i := dialectOf(rows, name); i >= 0 {
			found[i] = true
		}
	}
	var parts []string
	gpuOnly := Family("")
	for i, d := range rows {
		switch {
		case !found[i]:
		case d.gpuOnly:
			gpuOnly = cmp.Or(gpuOnly, d.family)
		default:
			parts = append(parts, string(d.family))
		}
	}
	switch {
	case len(parts) > 0:
		return Family(strings.Join(parts, "+"))
	case gpuOnly != "":
		return gpuOnly
	}
	return FamilyUnknown
}

// tiers lists a figure's entries in the order they are tried: every row's
// read, then every row's fallback.
func tiers[T any](rows []dialect, pick func(*figures) []T) []T {
	var out []T
	for i := range rows {
		out = append(out, pick(&rows[i].read)...)
	}
	for i := range rows {
		out = append(out, pick(&rows[i].fallback)...)
	}
	return out
}

// lowestTPRankSeries reads SGLang's series: with
// --enable-metrics-for-all-schedulers it exports every scheduler's series,
// and the TP ranks of one data-parallel rank all report the same requests,
// so of the series that differ only in tp_rank, the lowest rank is kept
// (tp_rank="0" of each dp_rank).
func lowestTPRankSeries(_ *reader, _ string, ms []*dto.Metric) []*dto.Metric { return lowestTPRank(ms) }

// tritonModelSeries reads Triton's nv_inference_* series of the model the
// run targets (chooseTritonModel), all of them when none was chosen.
func tritonModelSeries(rd *reader, name string, ms []*dto.Metric) []*dto.Metric {
	if !strings.HasPrefix(name, "nv_inference_") || rd.tritonModel == "" {
		return ms
	}
	out := make([]*dto.Metric, 0, len(ms))
	for _, m := range ms {
		if label(m, "model") == rd.tritonModel {
			out = append(out, m)
		}
	}
	return out
}

// lowestTPRank keeps, of each group of series that differ only in their
// tp_rank label, the series of the lowest rank.
func lowestTPRank(ms []*dto.Metric) []*dto.Metric {
	type pick struct {
		rank string
		ms   []*dto.Metric
	}
	groups := map[string]*pick{}
	var order []string
	ranked := false
	for _, m := range ms {
		rank, has := labelOK(m, "tp_rank")
		ranked = ranked || has
		sig := signature(m, "tp_rank")
		g := groups[sig]
		switch {
		case g == nil:
			groups[sig] = &pick{rank: rank, ms: []*dto.Metric{m}}
			order = append(order, sig)
		case compareRank(rank, g.rank) < 0:
			g.rank, g.ms = rank, []*dto.Metric{m}
		case rank == g.rank:
			g.ms = append(g.ms, m)
		}
	}
	if !ranked {
		return ms
	}
	out := make([]*dto.Metric, 0, len(order))
	for _, sig := range order {
		out = append(out, groups[sig].ms...)
	}
	return out
}

// compareRank orders rank labels numerically where both are numbers.
func compareRank(a, b string) int {
	ai, aerr := strconv.Atoi(a)
	bi, berr := strconv.Atoi(b)
	if aerr == nil && berr == nil {
		return cmp.Compare(ai, bi)
	}
	return cmp.Compare(a, b)
}

// tritonModels lists the model label values of Triton's request counters.
func tritonModels(fams map[string]*dto.MetricFamily) []string {
	var models []string
	for _, name := range []string{"nv_inference_request_success", "nv_inference_queue_duration_us",
		"nv_inference_request_duration_us", "nv_inference_pending_request_count"} {
		for _, m := range fams[name].GetMetric() {
			if mdl := label(m, "model"); mdl != "" && !slices.Contains(models, mdl) {
				models = append(models, mdl)
			}
		}
	}
	slices.Sort(models)
	return models
}

// chooseTritonModel picks the model whose nv_inference_* series are read:
// the one asked for, else the only one; "" (every model, with a note)
// when several are loaded and none was named.
func chooseTritonModel(fams map[string]*dto.MetricFamily, want string) (model, note string) {
	models := tritonModels(fams)
	switch {
	case len(models) == 0:
		return "", ""
	case want != "" && slices.Contains(models, want):
		return want, ""
	case len(models) == 1:
		if want != "" {
			return models[0], fmt.Sprintf("server model %q is not loaded in Triton; read %q, the only model", want, models[0])
		}
		return models[0], ""
	}
	why := "no server model named"
	if want != "" {
		why = fmt.Sprintf("server model %q is not loaded", want)
	}
	return "", fmt.Sprintf("Triton figures summed over models %s (%s): an ensemble's composing models count each request again; "+
		"name the model the run targets with --server-model", strings.Join(models, ", "), why)
}

// mergeFamilies joins the families of several sources: server families
// first (deduplicated), dcgm-exporter only when nothing else answered.
func mergeFamilies(fs []Family) Family {
	var parts []string
	dcgm := false
	for _, f := range fs {
		switch f {
		case "", FamilyUnknown:
		case FamilyDCGM:
			dcgm = true
		default:
			for _, p := range strings.Split(string(f), "+") {
				if !slices.Contains(parts, p) {
					parts = append(parts, p)
				}
			}
		}
	}
	switch {
	case len(parts) > 0:
		return Family(strings.Join(parts, "+"))
	case dcgm:
		return FamilyDCGM
	}
	return FamilyUnknown
}
