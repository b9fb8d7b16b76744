package sim

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// tritonMetrics are the nv_inference_* series Triton exports for a model,
// fed by every KServe-shaped request (kserve.serve): Triton with the vLLM
// backend exports them beside
// the backend's vllm:* series, as the simulator then does. Durations are
// cumulative microsecond counters, as Triton's are; the first-response
// histogram is Triton's for decoupled models, in milliseconds.
type tritonMetrics struct {
	success, count, execCount     *prometheus.CounterVec
	failure                       *prometheus.CounterVec
	requestUs, queueUs, computeUs *prometheus.CounterVec
	pending                       *prometheus.GaugeVec
	firstResponseMs               *prometheus.HistogramVec
	model, version                string
}

// Triton's failure reasons.
const (
	tritonRejected = "REJECTED"
	tritonCanceled = "CANCELED"
	tritonBackend  = "BACKEND"
)

// newTritonMetrics registers the series on reg, or finds them there if
// they are already registered.
func newTritonMetrics(reg *prometheus.Registry, model string) *tritonMetrics {
	labels := []string{"model", "version"}
	m := &tritonMetrics{model: model, version: "1"}
	counter := func(name, help string, extra ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(labels, extra...))
		return register(reg, c).(*prometheus.CounterVec)
	}
	m.success = counter("nv_inference_request_success", "Number of successful inference requests, all batch sizes")
	m.failure = counter("nv_inference_request_failure", "Number of failed inference requests, all batch sizes", "reason")
	m.count = counter("nv_inference_count", "Number of inferences performed (does not include cached requests)")
	m.execCount = counter("nv_inference_exec_count", "Number of model executions performed (does not include cached requests)")
	m.requestUs = counter("nv_inference_request_duration_us", "Cumulative inference request duration in microseconds (includes cached requests)")
	m.queueUs = counter("nv_inference_queue_duration_us", "Cumulative inference queuing duration in microseconds (includes cached requests)")
	m.computeUs = counter("nv_inference_compute_infer_duration_us", "Cumulative compute inference duration in microseconds (does not include cached requests)")
	m.pending = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nv_inference_pending_request_count",
		Help: "Instantaneous number of pending requests awaiting execution per-model."}, labels)).(*prometheus.GaugeVec)
	m.firstResponseMs = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "nv_inference_first_response_histogram_ms",
		Help:    "Duration from request to first response in milliseconds",
		Buckets: []float64{100, 500, 2000, 5000}}, labels)).(*prometheus.HistogramVec)
	// Series exist from the start, as Triton's do for a loaded model.
	m.success.WithLabelValues(model, m.version)
	m.count.WithLabelValues(model, m.version)
	m.execCount.WithLabelValues(model, m.version)
	m.requestUs.WithLabelValues(model, m.version)
	m.queueUs.WithLabelValues(model, m.version)
	m.computeUs.WithLabelValues(model, m.version)
	m.pending.WithLabelValues(model, m.version)
	return m
}

func register(reg *prometheus.Registry, c prometheus.Collector) prometheus.Collector {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return are.ExistingCollector
		}
		panic(err) // a name clash within the simulator: a bug
	}
	return c
}

// done counts one finished request: arrived → admitted (queue) → end, the
// first response at first (zero: none), or its failure reason.
func (m *tritonMetrics) done(arrived, admitted, first, end time.Time, reason string) {
	if m == nil {
		return
	}
	l := []string{m.model, m.version}
	us := func(d time.Duration) float64 { return float64(d / time.Microsecond) }
	if reason != "" {
		m.failure.WithLabelValues(m.model, m.version, reason).Inc()
	} else {
		m.success.WithLabelValues(l...).Inc()
		m.count.WithLabelValues(l...).Inc()
		m.execCount.WithLabelValues(l...).Inc()
	}
	m.requestUs.WithLabelValues(l...).Add(us(end.Sub(arrived)))
	if !admitted.IsZero() {
		m.queueUs.WithLabelValues(l...).Add(us(admitted.Sub(arrived)))
		m.computeUs.WithLabelValues(l...).Add(us(end.Sub(admitted)))
	}
	if !first.IsZero() {
		m.firstResponseMs.WithLabelValues(l...).Observe(float64(first.Sub(arrived)) / float64(time.Millisecond))
	}
}
