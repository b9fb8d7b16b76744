package sim

import (
	"sync"
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
type metrics struct {
	reg *prometheus.Registry

	queueTime    prometheus.Histogram
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
	e2e          prometheus.Histogram
	promptTokens prometheus.Counter
	genTokens    prometheus.Counter
	successLen   prometheus.Counter
	successAbort prometheus.Counter
}

// state is what the gauges read at scrape time.
type state interface {
	running() int
	waiting() int
	kvUsedTokens() int
}

func newMetrics(cfg Config, st state, busy *busyMeter) *metrics {
	reg := prometheus.NewRegistry()
	lbl := prometheus.Labels{"model_name": cfg.Model, "engine": "0"}
	m := &metrics{reg: reg}
	hist := func(name, help string, b []float64) prometheus.Histogram {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: b, ConstLabels: lbl})
		reg.MustRegister(h)
		return h
	}
	counter := func(name, help string) prometheus.Counter {
		c := prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: lbl})
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
	success := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
		Help: "Count of successfully processed requests.", ConstLabels: lbl}, []string{"finished_reason"})
	reg.MustRegister(success)
	m.successLen = success.WithLabelValues("length")
	m.successAbort = success.WithLabelValues("abort")

	gauge("vllm:num_requests_running", "Number of requests in model execution batches.", lbl,
		func() float64 { return float64(st.running()) })
	gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.", lbl,
		func() float64 { return float64(st.waiting()) })
	gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", lbl,
		func() float64 { return min(1, float64(st.kvUsedTokens())/float64(cfg.KVTokens)) })

	gpu := prometheus.Labels{"gpu": "0", "UUID": "GPU-00000000-0000-0000-0000-00000000051a",
		"device": "nvidia0", "modelName": cfg.GPUName, "Hostname": "tailgate-sim"}
	fbUsed := func() float64 {
		kv := float64(min(st.kvUsedTokens(), cfg.KVTokens)) * float64(cfg.KVBytesPerToken) / (1 << 20)
		return min(cfg.GPUMemoryMiB, cfg.WeightsMiB+kv)
	}
	gauge("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", gpu,
		func() float64 { return 100 * busy.utilization(time.Now()) })
	gauge("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", gpu, fbUsed)
	gauge("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).", gpu,
		func() float64 { return cfg.GPUMemoryMiB - fbUsed() })
	return m
}

// busyMeter accumulates the time the simulated GPU is busy and turns it into
// a utilization over the interval since the previous scrape (at least
// minUtilWindow; a scrape sooner than that repeats the last value), the way
// NVML reports "percent of time over the past sample period".
type busyMeter struct {
	mu     sync.Mutex
	active int           // overlapping busy spans (ModeFixed: requests in flight)
	since  time.Time     // start of the current busy span
	total  time.Duration // closed busy time

	lastAt    time.Time
	lastTotal time.Duration
	lastUtil  float64
}

const minUtilWindow = 100 * time.Millisecond

func newBusyMeter(start time.Time) *busyMeter { return &busyMeter{lastAt: start} }

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
	if dt < minUtilWindow {
		return b.lastUtil
	}
	u := float64(tot-b.lastTotal) / float64(dt)
	u = max(0, min(1, u))
	b.lastAt, b.lastTotal, b.lastUtil = now, tot, u
	return u
}
