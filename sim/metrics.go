package sim

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bucket bounds as vLLM's v1 metrics logger defines them (seconds).
var (
	ttftBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1.0, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560}
	itlBuckets = []float64{0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75,
		1, 2.5, 5, 7.5, 10, 20, 40, 80}
	e2eBuckets = []float64{0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60,
		120, 240, 480, 960, 1920, 7680}
)

// metrics holds the server's own registry, in vLLM and dcgm-exporter names.
// Each engine (Config.Engines) has its own series, labelled model_name and
// engine="i" as vLLM labels them: vllm:num_requests_running,
// vllm:num_requests_waiting and vllm:kv_cache_usage_perc (reserved KV /
// KVTokens, 0–1) as gauges; vllm:request_queue_time_seconds (arrival →
// admission), vllm:time_to_first_token_seconds and
// vllm:e2e_request_latency_seconds (arrival → first content chunk / end,
// as flushed), and vllm:inter_token_latency_seconds (chunk gap / tokens)
// as histograms with vLLM's buckets; vllm:prompt_tokens_total,
// vllm:generation_tokens_total and
// vllm:request_success_total{finished_reason="length"|"abort"} as
// counters, and with the prefix cache on, vllm:prefix_cache_queries_total
// and vllm:prefix_cache_hits_total in tokens, as vLLM counts them. The
// simulated GPU (labels gpu, UUID, device, modelName,
// Hostname) has DCGM_FI_DEV_GPU_UTIL, the percentage of time the engine
// spent in steps since the previous scrape (at least 100 ms), and
// DCGM_FI_DEV_FB_USED / DCGM_FI_DEV_FB_FREE in MiB: Config.WeightsMiB plus
// reserved KV tokens × KVBytesPerToken. In ModeFixed the gauges report
// requests in flight as running and their prompt + max_tokens as KV use,
// and GPU utilization is the time with at least one request in flight.
type metrics struct {
	reg *prometheus.Registry

	queueTime, ttft, itl, e2e *prometheus.HistogramVec
	promptTokens, genTokens   *prometheus.CounterVec
	success                   *prometheus.CounterVec // engine, finished_reason
	// prefixQueries and prefixHits are nil with the prefix cache off.
	prefixQueries, prefixHits *prometheus.CounterVec
	engines                   []atomic.Pointer[engineSeries]

	llama *llamaStats // MetricsLlamaCpp only
}

// engineSeries are one engine's counters and histograms.
type engineSeries struct {
	queueTime, ttft, itl, e2e prometheus.Observer
	promptTokens, genTokens   prometheus.Counter
	successLen, successAbort  prometheus.Counter
	prefixQueries, prefixHits prometheus.Counter // nil with the prefix cache off
}

// prefix counts one prefix-cache lookup of prompt tokens that hit cached.
func (e *engineSeries) prefix(prompt, cached int) {
	if e.prefixQueries == nil {
		return
	}
	e.prefixQueries.Add(float64(prompt))
	e.prefixHits.Add(float64(cached))
}

// state is what the gauges read at scrape time: one engine's, or the
// whole server's.
type state interface {
	running() int
	waiting() int
	kvUsedTokens() int
}

// newMetrics registers the series; engines holds each engine's gauge
// state (one entry without a batching engine: the server's).
func newMetrics(cfg Config, st state, engines []state, busy *busyMeter) *metrics {
	reg := prometheus.NewRegistry()
	lbl := prometheus.Labels{"model_name": cfg.Model}
	m := &metrics{reg: reg, engines: make([]atomic.Pointer[engineSeries], len(engines))}
	if cfg.Metrics == MetricsLlamaCpp {
		m.llama = &llamaStats{st: st, kvTokens: cfg.KVTokens}
	}
	hist := func(name, help string, b []float64) *prometheus.HistogramVec {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b, ConstLabels: lbl}, []string{"engine"})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: lbl}, append([]string{"engine"}, labels...))
		reg.MustRegister(c)
		return c
	}
	gauge := func(name, help string, l prometheus.Labels, f func() float64) {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: l}, f))
	}

	m.queueTime = hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", e2eBuckets)
	m.ttft = hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", ttftBuckets)
	m.itl = hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", itlBuckets)
	m.e2e = hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", e2eBuckets)
	m.promptTokens = counter("vllm:prompt_tokens_total", "Number of prefill tokens processed.")
	m.genTokens = counter("vllm:generation_tokens_total", "Number of generation tokens processed.")
	m.success = counter("vllm:request_success_total", "Count of successfully processed requests.", "finished_reason")
	if cfg.PrefixCacheBlocks > 0 {
		m.prefixQueries = counter("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.")
		m.prefixHits = counter("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.")
	}
	for i, est := range engines {
		m.engines[i].Store(m.newSeries(i))
		el := prometheus.Labels{"model_name": cfg.Model, "engine": strconv.Itoa(i)}
		gauge("vllm:num_requests_running", "Number of requests in model execution batches.", el,
			func() float64 { return float64(est.running()) })
		gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", el,
			func() float64 { return float64(est.waiting()) })
		gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", el,
			func() float64 { return min(1, float64(est.kvUsedTokens())/float64(cfg.KVTokens)) })
	}

	gpu := prometheus.Labels{"gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-00000000051a",
		"device": "nvidia0", "modelName": cfg.GPUName, "Hostname": "tailgate-sim"}
	fbUsed := func() float64 {
		kv := float64(min(st.kvUsedTokens(), cfg.KVTokens)) * float64(cfg.KVBytesPerToken) / (1 << 20)
		return min(cfg.GPUMemoryMiB, cfg.WeightsMiB+kv)
	}
	gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", gpu,
		func() float64 { return 100 * busy.utilization(time.Now()) })
	gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gpu, fbUsed)
	// Power is the mean since the previous scrape (the counter's slope), as
	// a board's power reading is an average over its sample period.
	var pmu sync.Mutex
	lastAt, lastJ := busy.start, 0.0
	gauge("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", gpu, func() float64 {
		now := time.Now()
		pmu.Lock()
		defer pmu.Unlock()
		j := busy.energy(now, cfg.GPUIdleWatts, cfg.GPUMaxWatts)
		w := cfg.GPUIdleWatts
		if dt := now.Sub(lastAt).Seconds(); dt > 0.01 {
			w = (j - lastJ) / dt
			lastAt, lastJ = now, j
		}
		return w
	})
	reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
		Help: "Total energy consumption since boot (in mJ).", ConstLabels: gpu},
		func() float64 { return 1000 * busy.energy(time.Now(), cfg.GPUIdleWatts, cfg.GPUMaxWatts) }))
	gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gpu,
		func() float64 { return cfg.GPUMemoryMiB - fbUsed() })
	return m
}

// newSeries creates (at zero) engine i's series.
func (m *metrics) newSeries(i int) *engineSeries {
	e := strconv.Itoa(i)
	es := &engineSeries{
		queueTime: m.queueTime.WithLabelValues(e), ttft: m.ttft.WithLabelValues(e),
		itl: m.itl.WithLabelValues(e), e2e: m.e2e.WithLabelValues(e),
		promptTokens: m.promptTokens.WithLabelValues(e), genTokens: m.genTokens.WithLabelValues(e),
		successLen: m.success.WithLabelValues(e, "length"), successAbort: m.success.WithLabelValues(e, "abort"),
	}
	if m.prefixQueries != nil {
		es.prefixQueries, es.prefixHits = m.prefixQueries.WithLabelValues(e), m.prefixHits.WithLabelValues(e)
	}
	return es
}

// engine returns engine i's series.
func (m *metrics) engine(i int) *engineSeries { return m.engines[i].Load() }

// reset starts engine i's counters and histograms again at zero, as a
// restarted engine process's are.
func (m *metrics) reset(i int) {
	e := strconv.Itoa(i)
	for _, v := range []*prometheus.HistogramVec{m.queueTime, m.ttft, m.itl, m.e2e} {
		v.DeleteLabelValues(e)
	}
	m.promptTokens.DeleteLabelValues(e)
	m.genTokens.DeleteLabelValues(e)
	m.success.DeleteLabelValues(e, "length")
	m.success.DeleteLabelValues(e, "abort")
	if m.prefixQueries != nil {
		m.prefixQueries.DeleteLabelValues(e)
		m.prefixHits.DeleteLabelValues(e)
	}
	m.engines[i].Store(m.newSeries(i))
}

// busyMeter accumulates the time the simulated GPU is busy and turns it into
// a utilization over the interval since the previous scrape (at least
// minUtilWindow; a scrape sooner than that repeats the last value), the way
// NVML reports "percent of time over the past sample period".
type busyMeter struct {
	start  time.Time
	mu     sync.Mutex
	window time.Duration // minUtilWindow; tests shorten it
	active int           // overlapping busy spans (ModeFixed: requests in flight)
	since  time.Time     // start of the current busy span
	total  time.Duration // closed busy time

	lastAt    time.Time
	lastTotal time.Duration
	lastUtil  float64
}

const minUtilWindow = 100 * time.Millisecond

func newBusyMeter(start time.Time) *busyMeter {
	return &busyMeter{start: start, lastAt: start, window: minUtilWindow}
}

// busyTotal is the busy time since the meter started.
func (b *busyMeter) busyTotal(now time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	tot := b.total
	if b.active > 0 {
		tot += now.Sub(b.since)
	}
	return tot
}

// energy is the simulated board's energy (J) since the meter started:
// idle power all the time, and the difference to full power while busy.
func (b *busyMeter) energy(now time.Time, idleW, maxW float64) float64 {
	return idleW*now.Sub(b.start).Seconds() + (maxW-idleW)*b.busyTotal(now).Seconds()
}

func (b *busyMeter) begin(now time.Time) {
	b.mu.Lock()
	if b.active == 0 {
		b.since = now
	}
	b.active++
	b.mu.Unlock()
}

func (b *busyMeter) end(now time.Time) {
	b.mu.Lock()
	b.active--
	if b.active == 0 {
		b.total += now.Sub(b.since)
	}
	b.mu.Unlock()
}

// add records a closed busy span of d (an engine step).
func (b *busyMeter) add(d time.Duration) {
	b.mu.Lock()
	b.total += d
	b.mu.Unlock()
}

// utilization returns the busy fraction (0–1) since the previous call.
func (b *busyMeter) utilization(now time.Time) float64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	tot := b.total
	if b.active > 0 {
		tot += now.Sub(b.since)
	}
	dt := now.Sub(b.lastAt)
	if dt < b.window {
		return b.lastUtil
	}
	u := float64(tot-b.lastTotal) / float64(dt)
	u = max(0, min(1, u))
	b.lastAt, b.lastTotal, b.lastUtil = now, tot, u
	return u
}

// llamaStats holds what llama-server's /metrics reports (MetricsLlamaCpp),
// fed by the engine step by step. A nil *llamaStats records nothing, so the
// vLLM flavour pays no lock per step.
type llamaStats struct {
	st       state
	kvTokens int

	mu                      sync.Mutex
	promptTokens, predicted int64
	promptSec, predictedSec float64
	decodes, busySlots      int64
	// since the previous scrape: llama.cpp resets its throughput gauges
	// at every scrape
	bucketPrompt, bucketPredicted       int64
	bucketPromptSec, bucketPredictedSec float64
}

// add records decodes engine steps (llama_decode calls) that processed
// promptTokens in promptDur and predicted tokens in predictedDur, with
// busySlots sequences in the batch summed over those steps.
func (l *llamaStats) add(promptTokens int, promptDur time.Duration, predicted int, predictedDur time.Duration, decodes, busySlots int) {
	if l == nil {
		return
	}
	l.mu.Lock()
	l.promptTokens += int64(promptTokens)
	l.bucketPrompt += int64(promptTokens)
	l.promptSec += promptDur.Seconds()
	l.bucketPromptSec += promptDur.Seconds()
	l.predicted += int64(predicted)
	l.bucketPredicted += int64(predicted)
	l.predictedSec += predictedDur.Seconds()
	l.bucketPredictedSec += predictedDur.Seconds()
	l.decodes += int64(decodes)
	l.busySlots += int64(busySlots)
	l.mu.Unlock()
}

// llamaSeries is one series of llama-server's exposition, in its order,
// with its help text and type as llama.cpp prints them.
type llamaSeries struct {
	name, typ, help string
	value           float64
}

// serve writes the exposition the way llama-server does: twelve unlabelled
// series, values printed as C++ streams print a double (6 significant
// digits, so large counters are rounded, as on the real server).
func (l *llamaStats) serve(w http.ResponseWriter, _ *http.Request) {
	ratio := func(n int64, sec float64) float64 {
		if sec <= 0 {
			return 0
		}
		return float64(n) / sec
	}
	l.mu.Lock()
	perDecode := 0.0
	if l.decodes > 0 {
		perDecode = float64(l.busySlots) / float64(l.decodes)
	}
	series := []llamaSeries{
		{"prompt_tokens_total", "counter", "Number of prompt tokens processed.", float64(l.promptTokens)},
		{"prompt_seconds_total", "counter", "Prompt process time", l.promptSec},
		{"tokens_predicted_total", "counter", "Number of generation tokens processed.", float64(l.predicted)},
		{"tokens_predicted_seconds_total", "counter", "Predict process time", l.predictedSec},
		{"n_decode_total", "counter", "Total number of llama_decode() calls", float64(l.decodes)},
		{"n_busy_slots_per_decode", "counter", "Average number of busy slots per llama_decode() call", perDecode},
		{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", ratio(l.bucketPrompt, l.bucketPromptSec)},
		{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", ratio(l.bucketPredicted, l.bucketPredictedSec)},
	}
	l.bucketPrompt, l.bucketPredicted, l.bucketPromptSec, l.bucketPredictedSec = 0, 0, 0, 0
	l.mu.Unlock()
	kv := min(l.st.kvUsedTokens(), l.kvTokens)
	series = append(series,
		llamaSeries{"kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", float64(kv) / float64(l.kvTokens)},
		llamaSeries{"kv_cache_tokens", "gauge", "KV-cache tokens.", float64(kv)},
		llamaSeries{"requests_processing", "gauge", "Number of requests processing.", float64(l.st.running())},
		llamaSeries{"requests_deferred", "gauge", "Number of requests deferred.", float64(l.st.waiting())},
	)
	b := make([]byte, 0, 2048)
	for _, m := range series {
		b = append(b, "# HELP llamacpp:"+m.name+" "+m.help+"\n# TYPE llamacpp:"+m.name+" "+m.typ+"\nllamacpp:"+m.name+" "...)
		b = strconv.AppendFloat(b, m.value, 'g', 6, 64)
		b = append(b, '\n')
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Write(b)
}
