package telemetry

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Family is the kind of server a /metrics endpoint belongs to, told from
// its metric prefixes. Several families on one endpoint (Triton's vLLM
// backend exports vllm:* beside nv_*) are joined with "+", e.g.
// "triton+vllm".
type Family string

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

// ServerSample is one scrape of the serving side, normalised across vLLM,
// SGLang, TGI and Triton (table §D7 of the reference notes). A nil field
// was not exposed. Gauges are as read; counters and histograms are the
// server's cumulative values since it started (subtract two readings, or
// use Run.Snapshot, for what happened in between). Where a server exposes
// several label sets (several model_name, engine or dp_rank values),
// request counts, tokens and histograms are summed and KV usage is the mean.
// When a Run merges several sources, the same rules apply across them and
// Sources lists those that answered.
type ServerSample struct {
	Family  Family   `json:"family"`
	Sources []string `json:"sources,omitempty"`
	// Running is the number of requests being executed (in the batch).
	Running *float64 `json:"running,omitempty"`
	// Waiting is the queue depth: requests accepted but not yet scheduled.
	Waiting *float64 `json:"waiting,omitempty"`
	// KVUsage is the fraction (0–1) of the KV cache in use.
	KVUsage *float64 `json:"kv_usage,omitempty"`
	// KVBlocksUsed and KVBlocksMax are TensorRT-LLM's KV-cache blocks in
	// use and in all (nv_trt_llm_kv_cache_block_metrics used and max,
	// trtllm-serve's trtllm_kv_cache_used_blocks and _max_blocks).
	KVBlocksUsed *float64 `json:"kv_blocks_used,omitempty"`
	KVBlocksMax  *float64 `json:"kv_blocks_max,omitempty"`
	// PromptTokens and GenerationTokens are cumulative token counters.
	PromptTokens     *float64 `json:"prompt_tokens_total,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens_total,omitempty"`
	// QueueDelay, TTFT and E2E are the server's own cumulative latency
	// histograms in seconds. Triton's queue and e2e are µs counters, so
	// they carry only the +Inf bucket (a mean, no quantiles).
	QueueDelay *Histogram `json:"queue_delay,omitempty"`
	TTFT       *Histogram `json:"ttft,omitempty"`
	E2E        *Histogram `json:"e2e,omitempty"`
	// QueueDelayUnavailable says why a known server gives no queue-delay
	// buckets (one of the NoQueue… reasons); empty when it does, or when
	// the endpoint is not a known server.
	QueueDelayUnavailable string `json:"queue_delay_unavailable,omitempty"`
	// QueueDelayNote says what the queue delay measures where that is not
	// the engine's own queue (Triton with TensorRT-LLM: QueueTritonScheduler).
	QueueDelayNote string `json:"queue_delay_note,omitempty"`
	// GPUs are GPU gauges found on the endpoint (dcgm-exporter's DCGM_FI_*,
	// Triton's nv_gpu_*).
	GPUs []EndpointGPU `json:"gpus,omitempty"`
	// CacheHitRate is SGLang's sglang:cache_hit_rate (0–1), the mean over
	// its series.
	CacheHitRate *float64 `json:"cache_hit_rate,omitempty"`
	// ServerModel is the Triton model whose nv_inference_* series were
	// read (ParseOptions.ServerModel, or the only model loaded); empty
	// when they were summed over several models, and ServerModelNote then
	// says so.
	ServerModel     string `json:"server_model,omitempty"`
	ServerModelNote string `json:"server_model_note,omitempty"`

	kvSeries int // label sets KVUsage averages, for merging sources
	// series are the cumulative readings per series (label set), which a
	// Run takes increases of one by one, as Prometheus does.
	series seriesReadings
}

// seriesReadings holds one scrape's cumulative series, keyed by metric
// name and label set.
type seriesReadings struct {
	queue, ttft, e2e map[string]Histogram
	prompt, gen      map[string]float64
	// capacity counters and histograms by capKey
	counters map[capKey]map[string]float64
	hists    map[capKey]map[string]Histogram
}

// capKey names a capacity figure read per series (see capCounters).
type capKey string

const (
	capPreemptions  capKey = "preemptions"
	capPrefixQuery  capKey = "prefix_cache_queries"
	capPrefixHit    capKey = "prefix_cache_hits"
	capSpecDrafted  capKey = "spec_draft_tokens"
	capSpecAccepted capKey = "spec_accepted_tokens"
	capRetracted    capKey = "retracted_requests"
	capInferences   capKey = "triton_inferences"
	capExecutions   capKey = "triton_executions"
	capStepTokens   capKey = "tokens_per_step"
	capNextBatch    capKey = "tgi_batch_next_size"
	capForward      capKey = "tgi_batch_forward"
)

// What a capacity review asks for beside the latencies: counters whose
// increase over the run is reported (per series, like the tokens), and
// histograms whose mean is.
var (
	capCounters = []struct {
		key   capKey
		names []string
	}{
		{capPreemptions, []string{"vllm:num_preemptions_total", "vllm:num_preemptions"}},
		{capPrefixQuery, []string{"vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"}},
		{capPrefixHit, []string{"vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"}},
		{capSpecDrafted, []string{"vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_draft_tokens"}},
		{capSpecAccepted, []string{"vllm:spec_decode_num_accepted_tokens_total", "vllm:spec_decode_num_accepted_tokens"}},
		{capRetracted, []string{"sglang:num_retracted_requests_total"}},
		{capInferences, []string{"nv_inference_count"}},
		{capExecutions, []string{"nv_inference_exec_count"}},
	}
	capHists = []struct {
		key   capKey
		names []string
	}{
		{capStepTokens, []string{"vllm:iteration_tokens_total"}},
		{capNextBatch, []string{"tgi_batch_next_size"}},
		{capForward, []string{"tgi_batch_forward_duration"}},
	}
)

// ParseOptions say which series to read where a server exports several
// views of one thing.
type ParseOptions struct {
	// ServerModel is the Triton model the run targets (an ensemble, say):
	// nv_inference_* series are read from that model only, since an
	// ensemble's composing models count the same request again. Empty,
	// or not loaded: the only model, else every model summed (and
	// ServerSample.ServerModelNote says so).
	ServerModel string
}

// EndpointGPU is one GPU as a metrics endpoint reports it. Nil fields were
// not exposed (or held dcgm-exporter's "blank" sentinel).
type EndpointGPU struct {
	// Source is the scrape it came from (filled in by the Run).
	Source string `json:"source,omitempty"`
	// GPU is the gpu label (the device index) or, without one, the UUID.
	GPU   string `json:"gpu"`
	UUID  string `json:"uuid,omitempty"`
	Model string `json:"model,omitempty"`
	// DriverVersion is dcgm-exporter's DCGM_FI_DRIVER_VERSION label.
	DriverVersion string `json:"driver_version,omitempty"`
	// MIG is the GPU instance id (dcgm-exporter's GPU_I_ID) of a MIG slice.
	MIG string `json:"mig,omitempty"`
	// Utilization is 0–1: DCGM_FI_DEV_GPU_UTIL / 100 or nv_gpu_utilization.
	Utilization *float64 `json:"utilization,omitempty"`
	// EngineActive is DCGM_FI_PROF_GR_ENGINE_ACTIVE, the fraction of time
	// the graphics/compute engine was active (more trustworthy than
	// GPU_UTIL on Hopper and later).
	EngineActive     *float64 `json:"engine_active,omitempty"`
	MemoryUsedBytes  *float64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes *float64 `json:"memory_total_bytes,omitempty"`
	PowerWatts       *float64 `json:"power_w,omitempty"`
	// EnergyJoules is DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since
	// boot), a counter: a window's energy is its increase.
	EnergyJoules *float64 `json:"energy_j,omitempty"`
	TemperatureC *float64 `json:"temperature_c,omitempty"`
	// TensorActive and DRAMActive are DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
	// and DCGM_FI_PROF_DRAM_ACTIVE (0–1).
	TensorActive *float64 `json:"tensor_active,omitempty"`
	DRAMActive   *float64 `json:"dram_active,omitempty"`
	// XIDError is DCGM_FI_DEV_XID_ERRORS, the last XID error's code (0:
	// none); ClockEventReasons is DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, the
	// NVML clocks event reasons bitmask.
	XIDError          *float64 `json:"xid_error,omitempty"`
	ClockEventReasons *float64 `json:"clock_event_reasons,omitempty"`
}

// Reasons a queue_delay objective has no data (ServerSample,
// Snapshot and Summary QueueDelayUnavailable; Histogram.Missing).
const (
	NoQueueLlamaCPP   = "llama.cpp exposes no queue-time histogram"
	NoQueueMeanOnly   = "Triton exposes queue time only as a cumulative counter: a mean, no buckets"
	NoQueueNoEndpoint = "no server /metrics endpoint was scraped"
	NoQueueNoScrape   = "no scrape of the server's /metrics succeeded"
	NoQueueNoMetrics  = "the server serves no metrics endpoint (HTTP 404 or 501; Ollama has none)"
	NoQueueNotExposed = "no scraped endpoint exposes a known queue-delay histogram"
)

// QueueTritonScheduler is the QueueDelayNote of Triton serving TensorRT-LLM.
const QueueTritonScheduler = "Triton's nv_inference_queue_duration_us is the time in Triton's own scheduler, before the TensorRT-LLM " +
	"executor; requests queued in the executor (nv_trt_llm_request_metrics waiting, the queue depth here) are not in it"

// Metric names, first found wins. vLLM, SGLang and TGI names come before
// Triton's so that Triton's vLLM backend is read from its richer vllm:*
// metrics.
var (
	// TensorRT-LLM's in-flight batcher under Triton exports its state as
	// one gauge family with a request_type label: scheduled (in this
	// iteration's batch) is read as running, waiting (queued in the
	// executor) as the queue depth, before Triton's pending count.
	runningNames = []string{"vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
		"llamacpp:requests_processing", "trtllm_num_requests_running", "nv_trt_llm_request_metrics{request_type=scheduled}"}
	waitingNames = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
		"llamacpp:requests_deferred", "trtllm_num_requests_waiting", "nv_trt_llm_request_metrics{request_type=waiting}",
		"nv_inference_pending_request_count"}
	kvNames = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
		"llamacpp:kv_cache_usage_ratio", "trtllm_kv_cache_utilization"}
	kvUsedNames = []string{"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=used}", "trtllm_kv_cache_used_blocks"}
	kvMaxNames  = []string{"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=max}", "trtllm_kv_cache_max_blocks"}

	queueNames = []string{"vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "tgi_request_queue_duration",
		"trtllm_request_queue_time_seconds"}
	ttftNames = []string{"vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds", "trtllm_time_to_first_token_seconds"}
	e2eNames  = []string{"vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "tgi_request_duration",
		"trtllm_e2e_request_latency_seconds"}

	// Counters: prometheus_client's text format names them with _total;
	// OpenMetrics-style exposition may not.
	// llama.cpp's prompt_tokens_total counts evaluated prompt tokens only:
	// prompt-cache hits are not in it.
	promptNames = []string{"vllm:prompt_tokens_total", "vllm:prompt_tokens", "sglang:prompt_tokens_total", "sglang:prompt_tokens",
		"llamacpp:prompt_tokens_total", "trtllm_prompt_tokens_total"}
	genNames = []string{"vllm:generation_tokens_total", "vllm:generation_tokens",
		"sglang:generation_tokens_total", "sglang:generation_tokens", "llamacpp:tokens_predicted_total", "trtllm_generation_tokens_total"}
)

// ParseExposition reads Prometheus text exposition (format 0.0.4; metric
// names with ':' such as vllm:* are fine) and normalises it. A parse error
// part-way still returns what was read before it, with the error.
func ParseExposition(r io.Reader) (*ServerSample, error) {
	return ParseExpositionWith(r, ParseOptions{})
}

// ParseExpositionWith is ParseExposition with options.
func ParseExpositionWith(r io.Reader, o ParseOptions) (*ServerSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	return normalise(fams, o), err
}

// reader reads the series of one scrape that tailgate uses: every series,
// except that SGLang's duplicated per-TP-rank series are read from one
// rank and Triton's from the model the run targets.
type reader struct {
	fams        map[string]*dto.MetricFamily
	tritonModel string // "": every model
}

// metrics returns the series of family name that count. SGLang with
// --enable-metrics-for-all-schedulers exports every scheduler's series,
// and the TP ranks of one data-parallel rank all report the same
// requests: of the series that differ only in tp_rank, the lowest rank
// is kept (tp_rank="0" of each dp_rank).
func (rd *reader) metrics(name string) []*dto.Metric {
	if base, sel, ok := strings.Cut(name, "{"); ok {
		// name{label=value}: the series of base with that label value.
		k, v, _ := strings.Cut(strings.TrimSuffix(sel, "}"), "=")
		var out []*dto.Metric
		for _, m := range rd.metrics(base) {
			if label(m, k) == v {
				out = append(out, m)
			}
		}
		return out
	}
	ms := rd.fams[name].GetMetric()
	switch {
	case strings.HasPrefix(name, "nv_inference_") && rd.tritonModel != "":
		out := make([]*dto.Metric, 0, len(ms))
		for _, m := range ms {
			if label(m, "model") == rd.tritonModel {
				out = append(out, m)
			}
		}
		return out
	case strings.HasPrefix(name, "sglang:"):
		return lowestTPRank(ms)
	}
	return ms
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

// normalise maps parsed families onto a ServerSample.
func normalise(fams map[string]*dto.MetricFamily, o ParseOptions) *ServerSample {
	s := &ServerSample{Family: detectFamily(fams)}
	s.ServerModel, s.ServerModelNote = chooseTritonModel(fams, o.ServerModel)
	rd := &reader{fams: fams, tritonModel: s.ServerModel}
	if v, n, _ := rd.sumSeries(runningNames); n > 0 {
		s.Running = new(v)
	}
	if v, n, _ := rd.sumSeries(waitingNames); n > 0 {
		s.Waiting = new(v)
	}
	if used, n, _ := rd.sumSeries(kvUsedNames); n > 0 {
		s.KVBlocksUsed = new(used)
	}
	if total, n, _ := rd.sumSeries(kvMaxNames); n > 0 {
		s.KVBlocksMax = new(total)
	}
	if v, n, _ := rd.sumSeries(kvNames); n > 0 {
		s.KVUsage, s.kvSeries = new(clamp01(v/float64(n))), n
	} else if s.KVBlocksUsed != nil && s.KVBlocksMax != nil && *s.KVBlocksMax > 0 {
		s.KVUsage, s.kvSeries = new(clamp01(*s.KVBlocksUsed / *s.KVBlocksMax)), 1
	} else if v, n, _ := rd.sumSeries([]string{"nv_trt_llm_kv_cache_block_metrics{kv_cache_block_type=fraction}"}); n > 0 {
		s.KVUsage, s.kvSeries = new(clamp01(v/float64(n))), n
	} else if used, n, _ := rd.sumSeries([]string{"tgi_batch_current_max_tokens"}); n > 0 {
		if total, m, _ := rd.sumSeries([]string{"tgi_batch_max_total_tokens"}); m > 0 && total > 0 {
			s.KVUsage, s.kvSeries = new(clamp01(used/total)), 1
		}
	}
	if v, n, per := rd.sumSeries(promptNames); n > 0 {
		s.PromptTokens, s.series.prompt = new(v), per
	} else if h, per := rd.histogram("tgi_request_input_length", 1); h != nil {
		s.PromptTokens, s.series.prompt = new(h.Sum), sums(per) // TGI: the sum of its prompt-length histogram
	}
	if v, n, per := rd.sumSeries(genNames); n > 0 {
		s.GenerationTokens, s.series.gen = new(v), per
	} else if h, per := rd.histogram("tgi_request_generated_tokens", 1); h != nil {
		s.GenerationTokens, s.series.gen = new(h.Sum), sums(per)
	}

	s.QueueDelay, s.series.queue = rd.firstHistogram(queueNames, 1)
	if s.QueueDelay == nil {
		s.QueueDelay, s.series.queue = rd.tritonMean("nv_inference_queue_duration_us")
	}
	if s.QueueDelay != nil && s.QueueDelay.Source == "nv_inference_queue_duration_us" && fams["nv_trt_llm_request_metrics"] != nil {
		s.QueueDelayNote = QueueTritonScheduler
	}
	switch {
	case s.QueueDelay != nil && s.QueueDelay.MeanOnly():
		s.QueueDelayUnavailable = NoQueueMeanOnly
	case s.QueueDelay == nil && strings.Contains(string(s.Family), string(FamilyLlamaCPP)):
		s.QueueDelayUnavailable = NoQueueLlamaCPP
	}
	s.TTFT, s.series.ttft = rd.firstHistogram(ttftNames, 1)
	if s.TTFT == nil {
		s.TTFT, s.series.ttft = rd.histogram("nv_inference_first_response_histogram_ms", 1e-3)
	}
	s.E2E, s.series.e2e = rd.firstHistogram(e2eNames, 1)
	if s.E2E == nil {
		s.E2E, s.series.e2e = rd.tritonMean("nv_inference_request_duration_us")
	}
	s.GPUs = endpointGPUs(fams)
	rd.capacity(s)
	return s
}

// capacity reads the capacity figures: counters and histograms per series,
// SGLang's cache hit rate, and vLLM's KV blocks (cache_config_info's
// num_gpu_blocks label, summed over engines) where TensorRT-LLM's are not.
func (rd *reader) capacity(s *ServerSample) {
	for _, c := range capCounters {
		if _, n, per := rd.sumSeries(c.names); n > 0 {
			if s.series.counters == nil {
				s.series.counters = map[capKey]map[string]float64{}
			}
			s.series.counters[c.key] = per
		}
	}
	for _, c := range capHists {
		if h, per := rd.firstHistogram(c.names, 1); h != nil {
			if s.series.hists == nil {
				s.series.hists = map[capKey]map[string]Histogram{}
			}
			s.series.hists[c.key] = per
		}
	}
	if v, n, _ := rd.sumSeries([]string{"sglang:cache_hit_rate"}); n > 0 {
		s.CacheHitRate = new(clamp01(v / float64(n)))
	}
	if s.KVBlocksMax == nil {
		var blocks float64
		found := false
		for _, m := range rd.metrics("vllm:cache_config_info") {
			if b, err := strconv.ParseFloat(label(m, "num_gpu_blocks"), 64); err == nil && b >= 0 && b <= maxGauge {
				blocks, found = blocks+b, true
			}
		}
		if found {
			s.KVBlocksMax = &blocks
		}
	}
}

// sums maps each histogram series to its sum (TGI's token counts).
func sums(per map[string]Histogram) map[string]float64 {
	out := make(map[string]float64, len(per))
	for k, h := range per {
		out[k] = h.Sum
	}
	return out
}

// seriesKey names one series: metric name and canonical labels.
func seriesKey(name, sig string) string { return name + "{" + sig + "}" }

func detectFamily(fams map[string]*dto.MetricFamily) Family {
	var triton, vllm, sglang, tgi, llamacpp, trtllm, dcgm bool
	for name := range fams {
		switch {
		case strings.HasPrefix(name, "trtllm_"), strings.HasPrefix(name, "nv_trt_llm_"):
			trtllm = true
		case strings.HasPrefix(name, "llamacpp:"):
			llamacpp = true
		case strings.HasPrefix(name, "vllm:"):
			vllm = true
		case strings.HasPrefix(name, "sglang:"):
			sglang = true
		case strings.HasPrefix(name, "tgi_"):
			tgi = true
		case strings.HasPrefix(name, "nv_inference_"), strings.HasPrefix(name, "nv_gpu_"),
			strings.HasPrefix(name, "nv_cpu_"), strings.HasPrefix(name, "nv_energy_"):
			triton = true
		case strings.HasPrefix(name, "DCGM_FI_"), strings.HasPrefix(name, "dcgm_"):
			dcgm = true
		}
	}
	var parts []string
	for _, f := range []struct {
		on bool
		f  Family
	}{{triton, FamilyTriton}, {vllm, FamilyVLLM}, {sglang, FamilySGLang}, {tgi, FamilyTGI}, {llamacpp, FamilyLlamaCPP}, {trtllm, FamilyTRTLLM}} {
		if f.on {
			parts = append(parts, string(f.f))
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

// value is a sample's value whatever its declared type.
func value(m *dto.Metric) (float64, bool) {
	var v float64
	switch {
	case m.Gauge != nil:
		v = m.Gauge.GetValue()
	case m.Counter != nil:
		v = m.Counter.GetValue()
	case m.Untyped != nil:
		v = m.Untyped.GetValue()
	default:
		return 0, false
	}
	return v, !math.IsNaN(v) && !math.IsInf(v, 0)
}

// sumSeries sums the finite values of the first family in names that has
// any; n is how many series were summed (0: none found), per each
// series' value by key.
func (rd *reader) sumSeries(names []string) (sum float64, n int, per map[string]float64) {
	for _, name := range names {
		per = map[string]float64{}
		for _, m := range rd.metrics(name) {
			if v, ok := value(m); ok && math.Abs(v) <= maxGauge {
				sum += v
				n++
				per[seriesKey(name, signature(m, ""))] = v
			}
		}
		if n > 0 && math.Abs(sum) <= maxGauge {
			return sum, n, per
		}
		sum, n = 0, 0
	}
	return 0, 0, nil
}

// maxGauge bounds the values kept, so that sums and means stay finite
// (JSON has no Inf); no real gauge or counter comes near it.
const maxGauge = 1e300

func (rd *reader) firstHistogram(names []string, scale float64) (*Histogram, map[string]Histogram) {
	for _, name := range names {
		if h, per := rd.histogram(name, scale); h != nil {
			return h, per
		}
	}
	return nil, nil
}

// histogram sums every usable series of histogram name (bounds and sum
// multiplied by scale), and returns each series by key too. It also reads
// a histogram exposed without a TYPE line, as separate name_bucket{le=…},
// name_count and name_sum series.
func (rd *reader) histogram(name string, scale float64) (*Histogram, map[string]Histogram) {
	var series []*histogramBuilder
	var keys []string
	if mf := rd.fams[name]; mf != nil && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_GAUGE_HISTOGRAM) {
		for _, m := range rd.metrics(name) {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			hb := &histogramBuilder{sum: h.GetSampleSum()}
			switch {
			case h.SampleCountFloat != nil:
				hb.count, hb.hasCnt = h.GetSampleCountFloat(), true
			case h.SampleCount != nil:
				hb.count, hb.hasCnt = float64(h.GetSampleCount()), true
			}
			for _, b := range h.GetBucket() {
				c := float64(b.GetCumulativeCount())
				if b.CumulativeCountFloat != nil {
					c = b.GetCumulativeCountFloat()
				}
				hb.bucket(b.GetUpperBound(), c)
			}
			series = append(series, hb)
			keys = append(keys, seriesKey(name, signature(m, "")))
		}
	} else if mf := rd.fams[name+"_bucket"]; mf != nil && mf.GetType() != dto.MetricType_HISTOGRAM {
		series, keys = rd.untypedHistogram(name)
	}
	var out *Histogram
	per := map[string]Histogram{}
	for i, hb := range series {
		h, ok := hb.build(name, scale)
		if !ok {
			continue
		}
		if prev, dup := per[keys[i]]; dup { // one label set twice: summed, as before
			*h = prev.Plus(*h)
		}
		per[keys[i]] = h.Clone()
		if out == nil {
			out = h
		} else {
			*out = out.Plus(*h)
		}
	}
	return out, per
}

// untypedHistogram groups name_bucket / name_count / name_sum series by
// their labels other than le.
func (rd *reader) untypedHistogram(name string) ([]*histogramBuilder, []string) {
	bySig := map[string]*histogramBuilder{}
	var order []string
	get := func(m *dto.Metric) *histogramBuilder {
		sig := signature(m, "le")
		hb := bySig[sig]
		if hb == nil {
			hb = &histogramBuilder{}
			bySig[sig] = hb
			order = append(order, sig)
		}
		return hb
	}
	for _, m := range rd.metrics(name + "_bucket") {
		v, ok := value(m)
		le, err := strconv.ParseFloat(label(m, "le"), 64)
		if !ok || err != nil {
			continue
		}
		get(m).bucket(le, v)
	}
	for _, m := range rd.metrics(name + "_count") {
		if v, ok := value(m); ok {
			if hb := bySig[signature(m, "le")]; hb != nil {
				hb.count, hb.hasCnt = v, true
			}
		}
	}
	for _, m := range rd.metrics(name + "_sum") {
		if hb := bySig[signature(m, "le")]; hb != nil {
			hb.sum, _ = value(m)
		}
	}
	out := make([]*histogramBuilder, 0, len(order))
	keys := make([]string, 0, len(order))
	for _, sig := range order {
		out = append(out, bySig[sig])
		keys = append(keys, seriesKey(name, sig))
	}
	return out, keys
}

// tritonMean builds a mean-only histogram, per model and version, from a
// Triton cumulative-µs latency counter and nv_inference_request_success:
// Triton adds to its queue and request duration counters only when a
// request succeeds, so failures are not in the denominator.
func (rd *reader) tritonMean(name string) (*Histogram, map[string]Histogram) {
	success := map[string]float64{}
	for _, m := range rd.metrics("nv_inference_request_success") {
		if v, ok := value(m); ok {
			success[signature(m, "")] += v
		}
	}
	var out *Histogram
	per := map[string]Histogram{}
	for _, m := range rd.metrics(name) {
		us, ok := value(m)
		sig := signature(m, "")
		n, has := success[sig]
		if !ok || !has {
			continue
		}
		hb := &histogramBuilder{sum: us, count: n, hasCnt: true}
		h, good := hb.build(name, 1e-6)
		if !good {
			continue
		}
		per[seriesKey(name, sig)] = h.Clone()
		out = addHist(out, h)
	}
	return out, per
}

func label(m *dto.Metric, name string) string {
	v, _ := labelOK(m, name)
	return v
}

// labelOK is label, and whether m has the label at all.
func labelOK(m *dto.Metric, name string) (string, bool) {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue(), true
		}
	}
	return "", false
}

// signature is a canonical form of m's labels other than skip.
func signature(m *dto.Metric, skip string) string {
	var parts []string
	for _, lp := range m.GetLabel() {
		if lp.GetName() != skip {
			parts = append(parts, lp.GetName()+"\xff"+lp.GetValue())
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "\xfe")
}

func clamp01(v float64) float64 { return max(0, min(1, v)) }

// dcgmBlank is the smallest of DCGM's "blank" sentinels (int32 blank
// 0x7ffffff0; the int64 and fp64 blanks are larger): no real gauge we read
// (%, MiB, W, °C) gets near it. The energy counter is an int64 field that
// passes it after a few hours (mJ since boot), so it is held to DCGM's
// int64 blank (0x7ffffffffffffff0) instead.
const (
	dcgmBlank      = 2147483632
	dcgmBlankInt64 = 9223372036854775792
)

// gpuGauge says how one endpoint metric fills an EndpointGPU.
type gpuGauge struct {
	field int     // index into gpuAcc
	scale float64 // multiply the raw value by this; 0 means a percentage (÷100)
	max   float64 // drop raw values above this (0: no limit)
	dcgm  bool    // may hold DCGM's blank sentinel
}

const (
	gUtil = iota
	gEngine
	gUsed
	gFree
	gReserved
	gTotal
	gPower
	gTemp
	gTensor
	gDRAM
	gXID    // the last XID error code: kept as the largest, not averaged
	gClock  // clock event reasons bitmask: or-ed, not averaged
	gEnergy // energy counter, joules
	gFields
)

var gpuGauges = map[string]gpuGauge{
	"DCGM_FI_DEV_GPU_UTIL":          {gUtil, 0, 100, true},
	"DCGM_FI_PROF_GR_ENGINE_ACTIVE": {gEngine, 1, 1, true},
	"DCGM_FI_DEV_FB_USED":           {gUsed, 1 << 20, 0, true},
	"DCGM_FI_DEV_FB_FREE":           {gFree, 1 << 20, 0, true},
	"DCGM_FI_DEV_FB_RESERVED":       {gReserved, 1 << 20, 0, true},
	"DCGM_FI_DEV_FB_TOTAL":          {gTotal, 1 << 20, 0, true},
	"DCGM_FI_DEV_POWER_USAGE":       {gPower, 1, 0, true},
	// The energy counter, mJ since boot.
	"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": {gEnergy, 1e-3, 0, true},
	"dcgm_total_energy_consumption":        {gEnergy, 1e-3, 0, true},
	"DCGM_FI_DEV_GPU_TEMP":                 {gTemp, 1, 0, true},
	// DCGM 4.6 names (the ones above are its legacy aliases).
	"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO": {gEngine, 1, 1, true},
	"DCGM_FI_DEV_BOARD_POWER_WATTS":     {gPower, 1, 0, true},
	"DCGM_FI_DEV_GPU_TEMP_CELSIUS":      {gTemp, 1, 0, true},
	// dcgm-exporter --use-old-namespace (with a lowercase uuid label).
	"dcgm_gpu_utilization":       {gUtil, 0, 100, true},
	"dcgm_prof_gr_engine_active": {gEngine, 1, 1, true},
	"dcgm_fb_used":               {gUsed, 1 << 20, 0, true},
	"dcgm_fb_free":               {gFree, 1 << 20, 0, true},
	"dcgm_power_usage":           {gPower, 1, 0, true},
	"dcgm_gpu_temp":              {gTemp, 1, 0, true},
	// Tensor pipe and DRAM activity, XID errors and clock event reasons,
	// under their classic, DCGM 4.6 and old-namespace names.
	"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE":    {gTensor, 1, 1, true},
	"DCGM_FI_PROF_TENSOR_UTIL_RATIO":     {gTensor, 1, 1, true},
	"dcgm_prof_pipe_tensor_active":       {gTensor, 1, 1, true},
	"DCGM_FI_PROF_DRAM_ACTIVE":           {gDRAM, 1, 1, true},
	"DCGM_FI_PROF_DRAM_UTIL_RATIO":       {gDRAM, 1, 1, true},
	"dcgm_prof_dram_active":              {gDRAM, 1, 1, true},
	"DCGM_FI_DEV_XID_ERRORS":             {gXID, 1, 0, true},
	"DCGM_FI_DEV_XID_ERROR":              {gXID, 1, 0, true},
	"dcgm_xid_errors":                    {gXID, 1, 0, true},
	"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS": {gClock, 1, 0, true},
	"DCGM_FI_DEV_CLOCKS_EVENT_REASONS":   {gClock, 1, 0, true},
	"dcgm_clock_throttle_reasons":        {gClock, 1, 0, true},
	"nv_gpu_utilization":                 {gUtil, 1, 1, false},
	"nv_gpu_memory_used_bytes":           {gUsed, 1, 0, false},
	"nv_gpu_memory_total_bytes":          {gTotal, 1, 0, false},
	"nv_gpu_power_usage":                 {gPower, 1, 0, false},
}

type gpuAcc struct {
	gpu EndpointGPU
	sum [gFields]float64
	n   [gFields]int
}

// endpointGPUs collects per-GPU gauges. Series of one GPU that differ only
// in other labels (pod, container) are averaged, not summed: each is a
// reading of the same device.
func endpointGPUs(fams map[string]*dto.MetricFamily) []EndpointGPU {
	accs := map[string]*gpuAcc{}
	for name, g := range gpuGauges {
		for _, m := range fams[name].GetMetric() {
			v, ok := value(m)
			blank := float64(dcgmBlank)
			if g.field == gEnergy {
				blank = dcgmBlankInt64
			}
			if !ok || v < 0 || (g.dcgm && v >= blank) || (g.max > 0 && v > g.max) || v > maxGauge {
				continue
			}
			uuid := cmp.Or(label(m, "UUID"), label(m, "gpu_uuid"), label(m, "uuid"))
			gpu, mig := label(m, "gpu"), label(m, "GPU_I_ID")
			if uuid == "" && gpu == "" {
				continue
			}
			key := cmp.Or(uuid, "gpu:"+gpu) + "/" + mig
			a := accs[key]
			if a == nil {
				a = &gpuAcc{gpu: EndpointGPU{GPU: cmp.Or(gpu, uuid), UUID: uuid, MIG: mig}}
				accs[key] = a
			}
			if a.gpu.Model == "" {
				a.gpu.Model = cmp.Or(label(m, "modelName"), label(m, "model_name"))
			}
			if a.gpu.DriverVersion == "" {
				a.gpu.DriverVersion = label(m, "DCGM_FI_DRIVER_VERSION")
			}
			if g.scale == 0 {
				v /= 100
			} else {
				v *= g.scale
			}
			switch g.field {
			case gXID:
				a.sum[g.field] = max(a.sum[g.field], v)
			case gClock:
				a.sum[g.field] = float64(uint64(a.sum[g.field]) | uint64(v))
			default:
				a.sum[g.field] += v
			}
			a.n[g.field]++
		}
	}
	out := make([]EndpointGPU, 0, len(accs))
	for _, a := range accs {
		mean := func(f int) *float64 {
			if a.n[f] == 0 {
				return nil
			}
			return new(a.sum[f] / float64(a.n[f]))
		}
		g := a.gpu
		g.Utilization, g.EngineActive = mean(gUtil), mean(gEngine)
		g.MemoryUsedBytes, g.MemoryTotalBytes = mean(gUsed), mean(gTotal)
		if g.MemoryTotalBytes == nil && g.MemoryUsedBytes != nil && a.n[gFree] > 0 {
			total := *g.MemoryUsedBytes + *mean(gFree)
			if r := mean(gReserved); r != nil {
				total += *r
			}
			g.MemoryTotalBytes = &total
		}
		g.PowerWatts, g.TemperatureC = mean(gPower), mean(gTemp)
		g.TensorActive, g.DRAMActive = mean(gTensor), mean(gDRAM)
		g.EnergyJoules = mean(gEnergy)
		if a.n[gXID] > 0 {
			g.XIDError = new(a.sum[gXID])
		}
		if a.n[gClock] > 0 {
			g.ClockEventReasons = new(a.sum[gClock])
		}
		out = append(out, g)
	}
	sortGPUs(out)
	return out
}

// sortGPUs orders by source, numeric gpu index, then UUID and MIG id.
func sortGPUs(gs []EndpointGPU) {
	slices.SortFunc(gs, func(a, b EndpointGPU) int {
		if c := cmp.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		ai, aerr := strconv.Atoi(a.GPU)
		bi, berr := strconv.Atoi(b.GPU)
		if aerr == nil && berr == nil && ai != bi {
			return cmp.Compare(ai, bi)
		}
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.MIG, b.MIG))
	})
}
