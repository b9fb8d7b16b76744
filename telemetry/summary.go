package telemetry

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// Summary is the whole run's telemetry, for summary.json's "telemetry"
// key. Times are milliseconds, like the rest of summary.json; histogram
// bucket bounds (buckets_s) stay in seconds, as the servers expose them.
type Summary struct {
	// Family is the serving stack detected (see Family), "unknown" when no
	// scrape answered with known metrics.
	Family string `json:"family"`
	// NoMetrics says why the server was not sampled, when every scrape
	// source answered that it has no metrics ("no server metrics
	// (Ollama)"); the summary then has no server figures and
	// telemetry.jsonl no lines from it.
	NoMetrics string          `json:"no_metrics,omitempty"`
	Sources   []SourceSummary `json:"sources"`
	// IntervalMs is the sampling interval; DurationS spans the first to the
	// last round.
	IntervalMs float64 `json:"interval_ms"`
	DurationS  float64 `json:"duration_s"`
	Samples    int     `json:"samples"`
	// ScrapeErrors counts failed scrapes and GPU reads (every source, every
	// round); Errors lists the first distinct messages.
	ScrapeErrors int `json:"scrape_errors"`
	// LateScrapes counts scrapes answered after their round had closed
	// (taken in a later round: counters and histograms count, gauges not):
	// a server that answers /metrics from its busy inference loop.
	LateScrapes int      `json:"late_scrapes"`
	Errors      []string `json:"errors,omitempty"`
	// MissedIntervals counts ticks skipped because a round (or the sink)
	// overran the interval.
	MissedIntervals int `json:"missed_intervals"`
	// CounterResets counts server counter and histogram resets (restarts)
	// seen and corrected for.
	CounterResets int `json:"counter_resets"`

	// Running, Waiting (queue depth) and KVUsage (0–1) over the samples.
	Running *Stats `json:"running,omitempty"`
	Waiting *Stats `json:"waiting,omitempty"`
	KVUsage *Stats `json:"kv_usage,omitempty"`
	// KVBlocksUsed and KVBlocksMax are TensorRT-LLM's KV-cache blocks in
	// use and in all, over the samples.
	KVBlocksUsed *Stats `json:"kv_blocks_used,omitempty"`
	KVBlocksMax  *Stats `json:"kv_blocks_max,omitempty"`

	// QueueDelay is what the server's queue-delay histogram gained over
	// the run; ServerTTFT and ServerE2E likewise for the server's own
	// latency histograms (which start at the server, not at the client).
	QueueDelay *HistogramSummary `json:"queue_delay,omitempty"`
	// QueueDelayUnavailable says why QueueDelay is absent or mean-only
	// (one of the NoQueue… reasons).
	QueueDelayUnavailable string `json:"queue_delay_unavailable,omitempty"`
	// QueueDelayNote says what the queue delay measures where that is not
	// the engine's own queue (QueueTritonScheduler).
	QueueDelayNote string            `json:"queue_delay_note,omitempty"`
	ServerTTFT     *HistogramSummary `json:"server_ttft,omitempty"`
	ServerE2E      *HistogramSummary `json:"server_e2e,omitempty"`
	// PromptTokens and GenerationTokens are the server counters' increase
	// over the run.
	PromptTokens     *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens,omitempty"`
	// ServerModel is the Triton model the nv_inference_* figures (queue
	// and request means, pending requests) were read from: the model the
	// run targets. ServerModelNote says when they were not read from one
	// model (several loaded, none named), or the named one was missing.
	ServerModel     string `json:"server_model,omitempty"`
	ServerModelNote string `json:"server_model_note,omitempty"`

	// Capacity holds what a capacity review asks for beside the latencies
	// (preemptions, prefix-cache hits, batch sizes, …); nil when the
	// server exposes none of it.
	Capacity *Capacity `json:"capacity,omitempty"`

	// GPUUtilization is, per sample, the mean utilization (0–1) over the
	// GPUs, then summarised over samples. GPUUtilizationFrom says whose
	// GPUs: "nvml" when a GPU sampler was given, else "endpoint" (the
	// scraped DCGM_FI_DEV_GPU_UTIL / nv_gpu_utilization).
	GPUUtilization     *Stats       `json:"gpu_utilization,omitempty"`
	GPUUtilizationFrom string       `json:"gpu_utilization_from,omitempty"`
	GPUs               []GPUSummary `json:"gpus,omitempty"`

	// GPUIdleShare is the share (0–1) of samples whose mean utilisation
	// over the GPUs was under IdleUtilization: the time the GPUs sat idle
	// (samples are evenly spaced), a baseline of day-2 reviews.
	GPUIdleShare *float64 `json:"gpu_idle_share,omitempty"`
	// Energy is what the GPUs used from the first sample to the last (nil
	// when neither an energy counter nor power was read).
	Energy *EnergyWindow `json:"energy,omitempty"`
	// Devices is the GPU sampler's inventory: model, driver, serials.
	Devices []GPUInfo `json:"devices,omitempty"`
}

// Capacity is the run's capacity figures: counters' increases (per series,
// like the tokens) and ratios of them, means of the step histograms, and
// SGLang's cache-hit gauge. Preemptions and a falling prefix-cache hit
// rate are the usual answers to "why did p99 double at the same load".
type Capacity struct {
	// Preemptions is vllm:num_preemptions_total's increase.
	Preemptions *float64 `json:"preemptions,omitempty"`
	// PrefixCacheQueries and PrefixCacheHits are vLLM's prefix-cache
	// tokens queried and hit; PrefixCacheHitRate is hits / queries over
	// the run.
	PrefixCacheQueries *float64 `json:"prefix_cache_queries,omitempty"`
	PrefixCacheHits    *float64 `json:"prefix_cache_hits,omitempty"`
	PrefixCacheHitRate *float64 `json:"prefix_cache_hit_rate,omitempty"`
	// CacheHitRate is SGLang's sglang:cache_hit_rate gauge over the samples.
	CacheHitRate *Stats `json:"cache_hit_rate,omitempty"`
	// SpecDraftTokens and SpecAcceptedTokens are vLLM's speculative
	// decoding counters; SpecAcceptanceRate is accepted / drafted.
	SpecDraftTokens    *float64 `json:"spec_decode_draft_tokens,omitempty"`
	SpecAcceptedTokens *float64 `json:"spec_decode_accepted_tokens,omitempty"`
	SpecAcceptanceRate *float64 `json:"spec_decode_acceptance_rate,omitempty"`
	// RetractedRequests is sglang:num_retracted_requests_total's increase.
	RetractedRequests *float64 `json:"retracted_requests,omitempty"`
	// EngineSteps and TokensPerStep are vllm:iteration_tokens_total's
	// count and mean (tokens per engine step) over the run.
	EngineSteps   *uint64  `json:"engine_steps,omitempty"`
	TokensPerStep *float64 `json:"tokens_per_step_mean,omitempty"`
	// BatchSize is the mean batch: TGI's tgi_batch_next_size, or Triton's
	// nv_inference_count / nv_inference_exec_count (inferences per
	// execution) of the server model; BatchSizeFrom names which.
	BatchSize     *float64 `json:"batch_size_mean,omitempty"`
	BatchSizeFrom string   `json:"batch_size_from,omitempty"`
	// BatchForwardMs is TGI's tgi_batch_forward_duration mean (prefill and
	// decode together), in milliseconds.
	BatchForwardMs *float64 `json:"batch_forward_mean_ms,omitempty"`
	// KVBlocks is the KV-cache blocks in all: TensorRT-LLM's max blocks or
	// vLLM's cache_config_info num_gpu_blocks (summed over engines), the
	// last sample's.
	KVBlocks *float64 `json:"kv_blocks,omitempty"`
}

// IdleUtilization is the utilisation (0–1) under which a GPU counts as
// idle for Summary.GPUIdleShare.
const IdleUtilization = 0.05

// SourceSummary is one scrape endpoint ("nvml" for the GPU sampler).
type SourceSummary struct {
	Name    string `json:"name"`
	Family  string `json:"family"`
	Scrapes int    `json:"scrapes"`
	Errors  int    `json:"errors"`
	Late    int    `json:"late"`
	// Absent says why the source was not asked again: it answered 404 or
	// 501 before it ever answered with metrics (Ollama has no /metrics).
	Absent string `json:"absent,omitempty"`
	// Note says how the source was read where that differs from its URL
	// (NoteTRTLLMServe).
	Note string `json:"note,omitempty"`
}

// NoteNoDCGMField is a dcgm-exporter source's note when it answers
// without any GPU field tailgate reads.
const NoteNoDCGMField = "dcgm-exporter answered with no GPU field tailgate reads (GPU_UTIL, GR_ENGINE_ACTIVE/_UTIL_RATIO, " +
	"FB_USED, POWER_USAGE/BOARD_POWER_WATTS, GPU_TEMP/_CELSIUS, or their dcgm_* old-namespace names): check its counters file"

// Stats summarises one gauge over the samples that had it: N samples,
// mean, max and p95 (nearest rank).
type Stats struct {
	N    int     `json:"n"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
	P95  float64 `json:"p95"`
}

// GPUSummary is one GPU over the run.
type GPUSummary struct {
	// Source is "nvml" or the scrape that reported it; GPU its index or
	// label.
	Source        string `json:"source"`
	GPU           string `json:"gpu"`
	UUID          string `json:"uuid,omitempty"`
	Name          string `json:"name,omitempty"`
	DriverVersion string `json:"driver_version,omitempty"`
	MIG           string `json:"mig,omitempty"`

	Utilization     *Stats `json:"utilization,omitempty"`
	EngineActive    *Stats `json:"engine_active,omitempty"`
	MemoryUsedBytes *Stats `json:"memory_used_bytes,omitempty"`
	PowerWatts      *Stats `json:"power_w,omitempty"`
	// TensorActive and DRAMActive (0–1) are dcgm-exporter's tensor pipe
	// and DRAM activity.
	TensorActive *Stats `json:"tensor_active,omitempty"`
	DRAMActive   *Stats `json:"dram_active,omitempty"`
	// XIDErrors are the distinct non-zero XID error codes seen; a GPU
	// that reported one during the run has a fault to look at.
	XIDErrors []int `json:"xid_errors,omitempty"`
	// ClockEventReasons names the clocks event (throttle) reasons seen in
	// any sample (NVML's bits; GPU idle left out), e.g. "sw_power_cap",
	// "hw_thermal_slowdown".
	ClockEventReasons []string `json:"clock_event_reasons,omitempty"`
}

// clockReasons names NVML's clocks event reason bits (nvml.h).
var clockReasons = []struct {
	bit  uint64
	name string
}{
	{0x2, "applications_clocks_setting"}, {0x4, "sw_power_cap"}, {0x8, "hw_slowdown"}, {0x10, "sync_boost"},
	{0x20, "sw_thermal_slowdown"}, {0x40, "hw_thermal_slowdown"}, {0x80, "hw_power_brake_slowdown"},
	{0x100, "display_clock_setting"}, {0x200, "board_limit"}, {0x400, "reliability"},
}

// MethodBuckets is HistogramSummary.Method for quantiles from buckets.
const MethodBuckets = "estimated from server buckets: linear interpolation within the bucket holding the rank, " +
	"as Prometheus histogram_quantile; the true value lies within pNN_bucket_ms"

// MethodMeanOnly is HistogramSummary.Method when the server exposes only a
// cumulative time counter (Triton).
const MethodMeanOnly = "mean only: the server exposes a cumulative time counter, not buckets"

// HistogramSummary is a server histogram's increase over the run.
// Quantiles are estimated from the buckets (see MethodBuckets); each
// pNN_bucket_ms is the bucket [lower, upper] the quantile fell in, upper
// null for the +Inf bucket (then pNN_ms is only a lower bound).
type HistogramSummary struct {
	Source  string     `json:"source"`
	Method  string     `json:"method"`
	Count   uint64     `json:"count"`
	MeanMs  *float64   `json:"mean_ms,omitempty"`
	P50Ms   *float64   `json:"p50_ms,omitempty"`
	P90Ms   *float64   `json:"p90_ms,omitempty"`
	P99Ms   *float64   `json:"p99_ms,omitempty"`
	P50Bkt  []*float64 `json:"p50_bucket_ms,omitempty"`
	P90Bkt  []*float64 `json:"p90_bucket_ms,omitempty"`
	P99Bkt  []*float64 `json:"p99_bucket_ms,omitempty"`
	Buckets []Bucket   `json:"buckets_s,omitempty"`
	// Note says when quantiles fell in the first bucket: below its bound
	// the buckets say nothing, so pNN_ms there is interpolated from 0 (as
	// histogram_quantile does), not measured; mean_ms stays exact.
	Note string `json:"note,omitempty"`
}

// SummariseHistogram summarises h (nil for nil).
func SummariseHistogram(h *Histogram) *HistogramSummary {
	if h == nil {
		return nil
	}
	hs := &HistogramSummary{Source: h.Source, Method: MethodBuckets, Count: h.Count}
	if h.MeanOnly() {
		hs.Method = MethodMeanOnly
	} else {
		hs.Buckets = slices.Clone(h.Buckets)
	}
	if m, ok := h.Mean(); ok {
		hs.MeanMs = new(promhist.Finite(m * 1000))
	}
	var first []string
	var firstBound float64
	for _, q := range []struct {
		q   float64
		v   **float64
		bkt *[]*float64
	}{{0.5, &hs.P50Ms, &hs.P50Bkt}, {0.9, &hs.P90Ms, &hs.P90Bkt}, {0.99, &hs.P99Ms, &hs.P99Bkt}} {
		e, ok := h.Quantile(q.q)
		if !ok {
			continue
		}
		*q.v = new(promhist.Finite(e.Value * 1000))
		*q.bkt = []*float64{msOrNil(e.Lower), msOrNil(e.Upper)}
		if e.Lower == 0 && e.Upper > 0 && !math.IsInf(e.Upper, 1) {
			first = append(first, fmt.Sprintf("p%g", q.q*100))
			firstBound = e.Upper
		}
	}
	if len(first) > 0 {
		hs.Note = fmt.Sprintf("%s in the first bucket (≤ %g ms): below its bound the buckets say no more, so those values are interpolated from 0, not measured; the mean is exact",
			strings.Join(first, ", "), firstBound*1000)
	}
	return hs
}

func msOrNil(s float64) *float64 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return nil
	}
	return new(promhist.Finite(s * 1000))
}

// stats accumulates what the Summary reports. Values are kept per sample
// (a float64 per series per sample) so p95 is exact.
type stats struct {
	samples, errors       int
	lateScrapes           int
	gpuSamples, gpuErrors int
	missed                int
	running, waiting, kv  []float64
	kvUsed, kvMax         []float64
	cacheHit              []float64
	gpuMean               []float64
	energy                energyAcc
	gpus                  map[string]*gpuSeries
	gpuOrder              []string
	firstErrors           []string
}

type gpuSeries struct {
	sum                       GPUSummary
	util, engine, mem, powerW []float64
	tensor, dram              []float64
	xid                       []int
	clock                     uint64
}

const maxSummaryErrors = 10

func (s *stats) init() { s.gpus = map[string]*gpuSeries{} }

func (s *stats) series(key string, mk func() GPUSummary) *gpuSeries {
	g := s.gpus[key]
	if g == nil {
		g = &gpuSeries{sum: mk()}
		s.gpus[key] = g
		s.gpuOrder = append(s.gpuOrder, key)
	}
	return g
}

func push(dst *[]float64, v *float64) {
	if v != nil && !math.IsNaN(*v) && !math.IsInf(*v, 0) {
		*dst = append(*dst, *v)
	}
}

// add records one round.
func (s *stats) add(smp *Sample, nvml bool, devices []GPUInfo) {
	s.samples++
	s.energy.addEnergy(smp)
	for _, e := range smp.Errors {
		if len(s.firstErrors) < maxSummaryErrors && !slices.Contains(s.firstErrors, e) {
			s.firstErrors = append(s.firstErrors, e)
		}
	}
	var utils []float64
	for _, g := range smp.GPUs {
		gs := s.series("nvml/"+strconv.Itoa(g.Index), func() GPUSummary {
			gsum := GPUSummary{Source: "nvml", GPU: strconv.Itoa(g.Index)}
			for _, d := range devices {
				if d.Index == g.Index {
					gsum.UUID, gsum.Name, gsum.DriverVersion = d.UUID, d.Name, d.DriverVersion
				}
			}
			return gsum
		})
		push(&gs.util, g.Utilization)
		if g.Utilization != nil {
			utils = append(utils, *g.Utilization)
		}
		if g.MemoryUsedBytes != nil {
			gs.mem = append(gs.mem, float64(*g.MemoryUsedBytes))
		}
		push(&gs.powerW, g.PowerWatts)
	}
	if sv := smp.Server; sv != nil {
		push(&s.running, sv.Running)
		push(&s.waiting, sv.Waiting)
		push(&s.kv, sv.KVUsage)
		push(&s.kvUsed, sv.KVBlocksUsed)
		push(&s.kvMax, sv.KVBlocksMax)
		push(&s.cacheHit, sv.CacheHitRate)
		for _, g := range sv.GPUs {
			gs := s.series(g.Source+"\x00"+g.GPU+"\x00"+g.UUID+"\x00"+g.MIG, func() GPUSummary {
				return GPUSummary{Source: g.Source, GPU: g.GPU, UUID: g.UUID, Name: g.Model, DriverVersion: g.DriverVersion, MIG: g.MIG}
			})
			push(&gs.util, g.Utilization)
			push(&gs.engine, g.EngineActive)
			push(&gs.mem, g.MemoryUsedBytes)
			push(&gs.powerW, g.PowerWatts)
			push(&gs.tensor, g.TensorActive)
			push(&gs.dram, g.DRAMActive)
			if x := g.XIDError; x != nil && *x > 0 && !slices.Contains(gs.xid, int(*x)) {
				gs.xid = append(gs.xid, int(*x))
			}
			if c := g.ClockEventReasons; c != nil {
				gs.clock |= uint64(*c)
			}
			if !nvml && g.Utilization != nil {
				utils = append(utils, *g.Utilization)
			}
		}
	}
	if len(utils) > 0 {
		var sum float64
		for _, u := range utils {
			sum += u
		}
		s.gpuMean = append(s.gpuMean, sum/float64(len(utils)))
	}
}

// summarise computes Stats over vs (nil when empty).
func summarise(vs []float64) *Stats {
	if len(vs) == 0 {
		return nil
	}
	sorted := slices.Clone(vs)
	slices.Sort(sorted)
	var sum float64
	for _, v := range sorted {
		sum += v
	}
	rank := int(math.Ceil(0.95*float64(len(sorted)))) - 1
	return &Stats{N: len(sorted), Mean: promhist.Finite(sum / float64(len(sorted))), Max: sorted[len(sorted)-1], P95: sorted[max(rank, 0)]}
}

func (r *Run) summaryLocked() Summary {
	st := &r.st
	sum := Summary{
		IntervalMs:      float64(r.interval) / float64(time.Millisecond),
		Samples:         st.samples,
		ScrapeErrors:    st.errors,
		LateScrapes:     st.lateScrapes,
		Errors:          slices.Clone(st.firstErrors),
		MissedIntervals: st.missed,
		Running:         summarise(st.running),
		Waiting:         summarise(st.waiting),
		KVUsage:         summarise(st.kv),
		KVBlocksUsed:    summarise(st.kvUsed),
		KVBlocksMax:     summarise(st.kvMax),
		GPUUtilization:  summarise(st.gpuMean),
		Devices:         slices.Clone(r.devices),
	}
	if !r.first.IsZero() {
		sum.DurationS = r.last.Sub(r.first).Seconds()
	}
	r.summariseGPUShare(&sum)
	r.summariseSources(&sum)
	r.summariseServer(&sum)
	r.summariseGPUs(&sum)
	return sum
}

// summariseGPUShare fills the idle share, the energy and where the
// utilisation was read.
func (r *Run) summariseGPUShare(sum *Summary) {
	st := &r.st
	if len(st.gpuMean) > 0 {
		idle := 0
		for _, u := range st.gpuMean {
			if u < IdleUtilization {
				idle++
			}
		}
		sum.GPUIdleShare = new(float64(idle) / float64(len(st.gpuMean)))
	}
	sum.Energy = EnergyDelta(EnergyReading{}, st.energy.reading())
	if sum.GPUUtilization != nil {
		sum.GPUUtilizationFrom = "endpoint"
		if r.gpu != nil {
			sum.GPUUtilizationFrom = "nvml"
		}
	}
}

// summariseSources fills one row per metrics source, the family they
// agree on, the model they name, their notes and whether any answered.
func (r *Run) summariseSources(sum *Summary) {
	st := &r.st
	fams := make([]Family, 0, len(r.sources))
	for _, src := range r.sources {
		f := src.family
		if f == "" {
			f = FamilyUnknown
		}
		fams = append(fams, f)
		sum.Sources = append(sum.Sources, SourceSummary{Name: src.name, Family: string(f), Scrapes: src.scrapes, Errors: src.errors, Late: src.lates,
			Absent: src.absent})
		if n := src.note.Load(); n != nil {
			sum.Sources[len(sum.Sources)-1].Note = *n
		}
		if src.noGPUField {
			sum.Sources[len(sum.Sources)-1].Note = NoteNoDCGMField
			if !slices.Contains(sum.Errors, src.name+": "+NoteNoDCGMField) {
				sum.Errors = append(sum.Errors, src.name+": "+NoteNoDCGMField)
			}
		}
		sum.CounterResets += src.queue.resets + src.ttft.resets + src.e2e.resets + src.prompt.resets + src.gen.resets
		sum.ServerModel = joinSources(sum.ServerModel, src.model)
		if src.queueNote != "" && !strings.Contains(sum.QueueDelayNote, src.queueNote) {
			sum.QueueDelayNote = strings.TrimPrefix(sum.QueueDelayNote+"; "+src.queueNote, "; ")
		}
		if src.modelWhy != "" && !strings.Contains(sum.ServerModelNote, src.modelWhy) {
			sum.ServerModelNote = strings.TrimPrefix(sum.ServerModelNote+"; "+src.modelWhy, "; ")
		}
	}
	if r.gpu != nil {
		sum.Sources = append(sum.Sources, SourceSummary{Name: "nvml", Family: "nvml", Scrapes: st.gpuSamples, Errors: st.gpuErrors})
	}
	sum.Family = string(mergeFamilies(fams))
	absent, ollama := 0, false
	for _, src := range r.sources {
		if src.absent != "" {
			absent++
			ollama = ollama || strings.Contains(src.absent, "Ollama")
		}
	}
	if absent > 0 && absent == len(r.sources) {
		sum.NoMetrics = "no server metrics"
		if ollama {
			sum.NoMetrics += " (Ollama)"
		}
	}
}

// summariseServer fills the server's own histograms, token counters and
// capacity, with the counter resets seen in them.
func (r *Run) summariseServer(sum *Summary) {
	snap := r.snapshotLocked()
	sum.QueueDelay = SummariseHistogram(snap.QueueDelay)
	sum.QueueDelayUnavailable = snap.QueueDelayUnavailable
	sum.ServerTTFT = SummariseHistogram(snap.TTFT)
	sum.ServerE2E = SummariseHistogram(snap.E2E)
	sum.PromptTokens, sum.GenerationTokens = snap.PromptTokens, snap.GenerationTokens
	sum.Capacity = r.capacityLocked()
	for _, src := range r.sources {
		for _, a := range src.capC {
			sum.CounterResets += a.resets
		}
		for _, a := range src.capH {
			sum.CounterResets += a.resets
		}
	}
}

// summariseGPUs fills one row per GPU, in the order they were first seen.
func (r *Run) summariseGPUs(sum *Summary) {
	st := &r.st
	for _, key := range st.gpuOrder {
		g := st.gpus[key]
		gs := g.sum
		gs.Utilization, gs.EngineActive = summarise(g.util), summarise(g.engine)
		gs.MemoryUsedBytes, gs.PowerWatts = summarise(g.mem), summarise(g.powerW)
		gs.TensorActive, gs.DRAMActive = summarise(g.tensor), summarise(g.dram)
		gs.XIDErrors = slices.Sorted(slices.Values(g.xid))
		for _, c := range clockReasons {
			if g.clock&c.bit != 0 {
				gs.ClockEventReasons = append(gs.ClockEventReasons, c.name)
			}
		}
		sum.GPUs = append(sum.GPUs, gs)
	}
}

// capacityLocked sums the sources' capacity figures (nil: none exposed).
func (r *Run) capacityLocked() *Capacity {
	c := &Capacity{CacheHitRate: summarise(r.st.cacheHit)}
	counter := func(k capKey) *float64 {
		var out *float64
		for _, src := range r.sources {
			if a := src.capC[k]; a != nil {
				out = addCounter(out, a)
			}
		}
		return out
	}
	hist := func(k capKey) *Histogram {
		var out *Histogram
		for _, src := range r.sources {
			if a := src.capH[k]; a != nil {
				out = addHist(out, a.total)
			}
		}
		return out
	}
	ratio := func(num, den *float64) *float64 {
		if num == nil || den == nil || *den <= 0 {
			return nil
		}
		return new(*num / *den)
	}
	mean := func(h *Histogram, scale float64) *float64 {
		if h == nil {
			return nil
		}
		if m, ok := h.Mean(); ok {
			return new(promhist.Finite(m * scale))
		}
		return nil
	}
	c.Preemptions = counter(capPreemptions)
	c.PrefixCacheQueries, c.PrefixCacheHits = counter(capPrefixQuery), counter(capPrefixHit)
	c.PrefixCacheHitRate = ratio(c.PrefixCacheHits, c.PrefixCacheQueries)
	c.SpecDraftTokens, c.SpecAcceptedTokens = counter(capSpecDrafted), counter(capSpecAccepted)
	c.SpecAcceptanceRate = ratio(c.SpecAcceptedTokens, c.SpecDraftTokens)
	c.RetractedRequests = counter(capRetracted)
	if h := hist(capStepTokens); h != nil {
		c.EngineSteps, c.TokensPerStep = new(h.Count), mean(h, 1)
	}
	if b := mean(hist(capNextBatch), 1); b != nil {
		c.BatchSize, c.BatchSizeFrom = b, "tgi_batch_next_size"
	} else if b := ratio(counter(capInferences), counter(capExecutions)); b != nil {
		c.BatchSize, c.BatchSizeFrom = b, "nv_inference_count / nv_inference_exec_count"
	}
	c.BatchForwardMs = mean(hist(capForward), 1000)
	if n := len(r.st.kvMax); n > 0 {
		c.KVBlocks = new(r.st.kvMax[n-1])
	}
	if *c == (Capacity{}) {
		return nil
	}
	return c
}
