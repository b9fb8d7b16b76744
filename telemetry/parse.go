package telemetry

import (
	"cmp"
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
	// GPUs are GPU gauges found on the endpoint (dcgm-exporter's DCGM_FI_*,
	// Triton's nv_gpu_*).
	GPUs []EndpointGPU `json:"gpus,omitempty"`

	kvSeries int // label sets KVUsage averages, for merging sources
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
	TemperatureC     *float64 `json:"temperature_c,omitempty"`
}

// Reasons a queue_delay objective has no data (ServerSample,
// Snapshot and Summary QueueDelayUnavailable; Histogram.Missing).
const (
	NoQueueLlamaCPP   = "llama.cpp exposes no queue-time histogram"
	NoQueueMeanOnly   = "Triton exposes queue time only as a cumulative counter: a mean, no buckets"
	NoQueueNoEndpoint = "no server /metrics endpoint was scraped"
	NoQueueNoScrape   = "no scrape of the server's /metrics succeeded"
	NoQueueNotExposed = "no scraped endpoint exposes a known queue-delay histogram"
)

// Metric names, first found wins. vLLM, SGLang and TGI names come before
// Triton's so that Triton's vLLM backend is read from its richer vllm:*
// metrics.
var (
	runningNames = []string{"vllm:num_requests_running", "sglang:num_running_reqs", "tgi_batch_current_size",
		"llamacpp:requests_processing"}
	waitingNames = []string{"vllm:num_requests_waiting", "sglang:num_queue_reqs", "tgi_queue_size",
		"llamacpp:requests_deferred", "nv_inference_pending_request_count"}
	kvNames = []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage",
		"llamacpp:kv_cache_usage_ratio"}

	queueNames = []string{"vllm:request_queue_time_seconds", "sglang:queue_time_seconds", "tgi_request_queue_duration"}
	ttftNames  = []string{"vllm:time_to_first_token_seconds", "sglang:time_to_first_token_seconds"}
	e2eNames   = []string{"vllm:e2e_request_latency_seconds", "sglang:e2e_request_latency_seconds", "tgi_request_duration"}

	// Counters: prometheus_client's text format names them with _total;
	// OpenMetrics-style exposition may not.
	// llama.cpp's prompt_tokens_total counts evaluated prompt tokens only:
	// prompt-cache hits are not in it.
	promptNames = []string{"vllm:prompt_tokens_total", "vllm:prompt_tokens", "sglang:prompt_tokens_total", "sglang:prompt_tokens",
		"llamacpp:prompt_tokens_total"}
	genNames = []string{"vllm:generation_tokens_total", "vllm:generation_tokens",
		"sglang:generation_tokens_total", "sglang:generation_tokens", "llamacpp:tokens_predicted_total"}
)

// ParseExposition reads Prometheus text exposition (format 0.0.4; metric
// names with ':' such as vllm:* are fine) and normalises it. A parse error
// part-way still returns what was read before it, with the error.
func ParseExposition(r io.Reader) (*ServerSample, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	return normalise(fams), err
}

// normalise maps parsed families onto a ServerSample.
func normalise(fams map[string]*dto.MetricFamily) *ServerSample {
	s := &ServerSample{Family: detectFamily(fams)}
	if v, n := sumGauge(fams, runningNames); n > 0 {
		s.Running = new(v)
	}
	if v, n := sumGauge(fams, waitingNames); n > 0 {
		s.Waiting = new(v)
	}
	if v, n := sumGauge(fams, kvNames); n > 0 {
		s.KVUsage, s.kvSeries = new(clamp01(v/float64(n))), n
	} else if used, n := sumGauge(fams, []string{"tgi_batch_current_max_tokens"}); n > 0 {
		if total, m := sumGauge(fams, []string{"tgi_batch_max_total_tokens"}); m > 0 && total > 0 {
			s.KVUsage, s.kvSeries = new(clamp01(used/total)), 1
		}
	}
	if v, n := sumGauge(fams, promptNames); n > 0 {
		s.PromptTokens = new(v)
	} else if h := histogramOf(fams, "tgi_request_input_length", 1); h != nil {
		s.PromptTokens = new(h.Sum) // TGI: the sum of its prompt-length histogram
	}
	if v, n := sumGauge(fams, genNames); n > 0 {
		s.GenerationTokens = new(v)
	} else if h := histogramOf(fams, "tgi_request_generated_tokens", 1); h != nil {
		s.GenerationTokens = new(h.Sum)
	}

	s.QueueDelay = firstHistogram(fams, queueNames, 1)
	if s.QueueDelay == nil {
		s.QueueDelay = tritonMean(fams, "nv_inference_queue_duration_us")
	}
	switch {
	case s.QueueDelay != nil && s.QueueDelay.MeanOnly():
		s.QueueDelayUnavailable = NoQueueMeanOnly
	case s.QueueDelay == nil && strings.Contains(string(s.Family), string(FamilyLlamaCPP)):
		s.QueueDelayUnavailable = NoQueueLlamaCPP
	}
	s.TTFT = firstHistogram(fams, ttftNames, 1)
	if s.TTFT == nil {
		s.TTFT = histogramOf(fams, "nv_inference_first_response_histogram_ms", 1e-3)
	}
	s.E2E = firstHistogram(fams, e2eNames, 1)
	if s.E2E == nil {
		s.E2E = tritonMean(fams, "nv_inference_request_duration_us")
	}
	s.GPUs = endpointGPUs(fams)
	return s
}

func detectFamily(fams map[string]*dto.MetricFamily) Family {
	var triton, vllm, sglang, tgi, llamacpp, dcgm bool
	for name := range fams {
		switch {
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
		case strings.HasPrefix(name, "DCGM_FI_"):
			dcgm = true
		}
	}
	var parts []string
	for _, f := range []struct {
		on bool
		f  Family
	}{{triton, FamilyTriton}, {vllm, FamilyVLLM}, {sglang, FamilySGLang}, {tgi, FamilyTGI}, {llamacpp, FamilyLlamaCPP}} {
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

// sumGauge sums the finite values of the first family in names that has
// any; n is how many series were summed (0: none found).
func sumGauge(fams map[string]*dto.MetricFamily, names []string) (sum float64, n int) {
	for _, name := range names {
		mf := fams[name]
		if mf == nil {
			continue
		}
		for _, m := range mf.GetMetric() {
			if v, ok := value(m); ok {
				sum += v
				n++
			}
		}
		if n > 0 && math.Abs(sum) <= maxGauge {
			return sum, n
		}
		sum, n = 0, 0
	}
	return 0, 0
}

// maxGauge bounds the values kept, so that sums and means stay finite
// (JSON has no Inf); no real gauge or counter comes near it.
const maxGauge = 1e300

func firstHistogram(fams map[string]*dto.MetricFamily, names []string, scale float64) *Histogram {
	for _, name := range names {
		if h := histogramOf(fams, name, scale); h != nil {
			return h
		}
	}
	return nil
}

// histogramOf sums every usable series of histogram name (bounds and sum
// multiplied by scale). It also reads a histogram exposed without a TYPE
// line, as separate name_bucket{le=…}, name_count and name_sum series.
func histogramOf(fams map[string]*dto.MetricFamily, name string, scale float64) *Histogram {
	var series []*histogramBuilder
	if mf := fams[name]; mf != nil && (mf.GetType() == dto.MetricType_HISTOGRAM || mf.GetType() == dto.MetricType_GAUGE_HISTOGRAM) {
		for _, m := range mf.GetMetric() {
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
		}
	} else if mf := fams[name+"_bucket"]; mf != nil && mf.GetType() != dto.MetricType_HISTOGRAM {
		series = untypedHistogram(fams, name)
	}
	var out *Histogram
	for _, hb := range series {
		h, ok := hb.build(name, scale)
		if !ok {
			continue
		}
		if out == nil {
			out = h
		} else {
			*out = out.plus(*h)
		}
	}
	return out
}

// untypedHistogram groups name_bucket / name_count / name_sum series by
// their labels other than le.
func untypedHistogram(fams map[string]*dto.MetricFamily, name string) []*histogramBuilder {
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
	for _, m := range fams[name+"_bucket"].GetMetric() {
		v, ok := value(m)
		le, err := strconv.ParseFloat(label(m, "le"), 64)
		if !ok || err != nil {
			continue
		}
		get(m).bucket(le, v)
	}
	for _, m := range fams[name+"_count"].GetMetric() {
		if v, ok := value(m); ok {
			if hb := bySig[signature(m, "le")]; hb != nil {
				hb.count, hb.hasCnt = v, true
			}
		}
	}
	for _, m := range fams[name+"_sum"].GetMetric() {
		if hb := bySig[signature(m, "le")]; hb != nil {
			hb.sum, _ = value(m)
		}
	}
	out := make([]*histogramBuilder, 0, len(order))
	for _, sig := range order {
		out = append(out, bySig[sig])
	}
	return out
}

// tritonMean builds a mean-only histogram from a Triton cumulative-µs
// latency counter and the request counters (success + failure).
func tritonMean(fams map[string]*dto.MetricFamily, name string) *Histogram {
	us, n := sumGauge(fams, []string{name})
	if n == 0 {
		return nil
	}
	ok, n1 := sumGauge(fams, []string{"nv_inference_request_success"})
	failed, n2 := sumGauge(fams, []string{"nv_inference_request_failure"})
	if n1+n2 == 0 {
		return nil
	}
	hb := &histogramBuilder{sum: us, count: ok + failed, hasCnt: true}
	h, good := hb.build(name, 1e-6)
	if !good {
		return nil
	}
	return h
}

func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
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
// (%, MiB, W, °C) gets near it.
const dcgmBlank = 2147483632

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
	"DCGM_FI_DEV_GPU_TEMP":          {gTemp, 1, 0, true},
	"nv_gpu_utilization":            {gUtil, 1, 1, false},
	"nv_gpu_memory_used_bytes":      {gUsed, 1, 0, false},
	"nv_gpu_memory_total_bytes":     {gTotal, 1, 0, false},
	"nv_gpu_power_usage":            {gPower, 1, 0, false},
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
			if !ok || v < 0 || (g.dcgm && v >= dcgmBlank) || (g.max > 0 && v > g.max) || v > maxGauge {
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
			a.sum[g.field] += v
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
