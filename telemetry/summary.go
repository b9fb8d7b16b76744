package telemetry

import (
	"math"
	"slices"
	"strconv"
	"time"
)

// Summary is the whole run's telemetry, for summary.json's "telemetry"
// key. Times are milliseconds, like the rest of summary.json; histogram
// bucket bounds (buckets_s) stay in seconds, as the servers expose them.
type Summary struct {
	// Family is the serving stack detected (see Family), "unknown" when no
	// scrape answered with known metrics.
	Family  string          `json:"family"`
	Sources []SourceSummary `json:"sources"`
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

	// QueueDelay is what the server's queue-delay histogram gained over
	// the run; ServerTTFT and ServerE2E likewise for the server's own
	// latency histograms (which start at the server, not at the client).
	QueueDelay *HistogramSummary `json:"queue_delay,omitempty"`
	// QueueDelayUnavailable says why QueueDelay is absent or mean-only
	// (one of the NoQueue… reasons).
	QueueDelayUnavailable string            `json:"queue_delay_unavailable,omitempty"`
	ServerTTFT            *HistogramSummary `json:"server_ttft,omitempty"`
	ServerE2E             *HistogramSummary `json:"server_e2e,omitempty"`
	// PromptTokens and GenerationTokens are the server counters' increase
	// over the run.
	PromptTokens     *float64 `json:"prompt_tokens,omitempty"`
	GenerationTokens *float64 `json:"generation_tokens,omitempty"`

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
	// Devices is the GPU sampler's inventory: model, driver, serials.
	Devices []GPUInfo `json:"devices,omitempty"`
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
}

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
		hs.MeanMs = new(finite(m * 1000))
	}
	for _, q := range []struct {
		q   float64
		v   **float64
		bkt *[]*float64
	}{{0.5, &hs.P50Ms, &hs.P50Bkt}, {0.9, &hs.P90Ms, &hs.P90Bkt}, {0.99, &hs.P99Ms, &hs.P99Bkt}} {
		e, ok := h.Quantile(q.q)
		if !ok {
			continue
		}
		*q.v = new(finite(e.Value * 1000))
		*q.bkt = []*float64{msOrNil(e.Lower), msOrNil(e.Upper)}
	}
	return hs
}

func msOrNil(s float64) *float64 {
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return nil
	}
	return new(finite(s * 1000))
}

// stats accumulates what the Summary reports. Values are kept per sample
// (a float64 per series per sample) so p95 is exact.
type stats struct {
	samples, errors       int
	lateScrapes           int
	gpuSamples, gpuErrors int
	missed                int
	running, waiting, kv  []float64
	gpuMean               []float64
	gpus                  map[string]*gpuSeries
	gpuOrder              []string
	firstErrors           []string
}

type gpuSeries struct {
	sum                       GPUSummary
	util, engine, mem, powerW []float64
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
		for _, g := range sv.GPUs {
			gs := s.series(g.Source+"\x00"+g.GPU+"\x00"+g.UUID+"\x00"+g.MIG, func() GPUSummary {
				return GPUSummary{Source: g.Source, GPU: g.GPU, UUID: g.UUID, Name: g.Model, DriverVersion: g.DriverVersion, MIG: g.MIG}
			})
			push(&gs.util, g.Utilization)
			push(&gs.engine, g.EngineActive)
			push(&gs.mem, g.MemoryUsedBytes)
			push(&gs.powerW, g.PowerWatts)
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
	return &Stats{N: len(sorted), Mean: finite(sum / float64(len(sorted))), Max: sorted[len(sorted)-1], P95: sorted[max(rank, 0)]}
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
		GPUUtilization:  summarise(st.gpuMean),
		Devices:         slices.Clone(r.devices),
	}
	if !r.first.IsZero() {
		sum.DurationS = r.last.Sub(r.first).Seconds()
	}
	if len(st.gpuMean) > 0 {
		idle := 0
		for _, u := range st.gpuMean {
			if u < IdleUtilization {
				idle++
			}
		}
		sum.GPUIdleShare = new(float64(idle) / float64(len(st.gpuMean)))
	}
	if sum.GPUUtilization != nil {
		sum.GPUUtilizationFrom = "endpoint"
		if r.gpu != nil {
			sum.GPUUtilizationFrom = "nvml"
		}
	}
	fams := make([]Family, 0, len(r.sources))
	for _, src := range r.sources {
		f := src.family
		if f == "" {
			f = FamilyUnknown
		}
		fams = append(fams, f)
		sum.Sources = append(sum.Sources, SourceSummary{Name: src.name, Family: string(f), Scrapes: src.scrapes, Errors: src.errors, Late: src.lates})
		sum.CounterResets += src.queue.resets + src.ttft.resets + src.e2e.resets + src.prompt.resets + src.gen.resets
	}
	if r.gpu != nil {
		sum.Sources = append(sum.Sources, SourceSummary{Name: "nvml", Family: "nvml", Scrapes: st.gpuSamples, Errors: st.gpuErrors})
	}
	sum.Family = string(mergeFamilies(fams))
	snap := r.snapshotLocked()
	sum.QueueDelay = SummariseHistogram(snap.QueueDelay)
	sum.QueueDelayUnavailable = snap.QueueDelayUnavailable
	sum.ServerTTFT = SummariseHistogram(snap.TTFT)
	sum.ServerE2E = SummariseHistogram(snap.E2E)
	sum.PromptTokens, sum.GenerationTokens = snap.PromptTokens, snap.GenerationTokens
	for _, key := range st.gpuOrder {
		g := st.gpus[key]
		gs := g.sum
		gs.Utilization, gs.EngineActive = summarise(g.util), summarise(g.engine)
		gs.MemoryUsedBytes, gs.PowerWatts = summarise(g.mem), summarise(g.powerW)
		sum.GPUs = append(sum.GPUs, gs)
	}
	return sum
}
