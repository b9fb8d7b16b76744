package otlp

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tailgate-llm/tailgate/internal/collectortest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/slo"
)

// received is what a loopback OTLP receiver got: the operation.duration
// count of each export, told on a channel as it arrives.
type received struct {
	counts chan uint64
}

func (rc *received) consume(_ context.Context, md pmetric.Metrics) error {
	var n uint64
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		sms := md.ResourceMetrics().At(i).ScopeMetrics()
		for j := 0; j < sms.Len(); j++ {
			ms := sms.At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				if m.Name() != MetricOperationDuration {
					continue
				}
				switch m.Type() {
				case pmetric.MetricTypeExponentialHistogram:
					for p := 0; p < m.ExponentialHistogram().DataPoints().Len(); p++ {
						n += m.ExponentialHistogram().DataPoints().At(p).Count()
					}
				case pmetric.MetricTypeHistogram:
					for p := 0; p < m.Histogram().DataPoints().Len(); p++ {
						n += m.Histogram().DataPoints().At(p).Count()
					}
				}
			}
		}
	}
	select {
	case rc.counts <- n:
	default: // the test reads only what it waits for
	}
	return nil
}

// startCollector starts, on addr, a Collector assembled from the
// Collector's own modules, receiving OTLP/HTTP; its pipeline ends in rc.
func startCollector(t *testing.T, addr string, rc *received) *collectortest.Collector {
	t.Helper()
	return collectortest.Start(t, ProtocolHTTP, addr, rc.consume)
}

func okRecord(seq int64) *loadgen.Record {
	return &loadgen.Record{Seq: seq, Class: "default", Intended: time.Millisecond, Sent: time.Millisecond,
		Chunks: []loadgen.Chunk{{At: 20 * time.Millisecond, Tokens: 1}, {At: 30 * time.Millisecond, Tokens: 2}},
		End:    40 * time.Millisecond, InputTokens: 10, OutputTokens: 3}
}

// waitCount waits, within a minute, for an export whose count is want.
func waitCount(t *testing.T, rc *received, want uint64) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case n := <-rc.counts:
			if n == want {
				return
			}
		case <-deadline:
			t.Fatalf("no export counting %d requests within a minute", want)
		}
	}
}

// Through a Collector restart: exports fail while it is down (one
// warning), and the cumulative export after it is back counts every
// request, those recorded while it was down included.
func TestCollectorRestart(t *testing.T) {
	addr := collectortest.FreeAddr(t)
	rc := &received{counts: make(chan uint64, 1)}
	col := startCollector(t, addr, rc)
	var mu sync.Mutex
	var warnings []string
	warned := make(chan struct{}, 1)
	e, err := New(context.Background(), Options{Endpoint: "http://" + addr, Protocol: ProtocolHTTP,
		Interval: 50 * time.Millisecond, Timeout: time.Second, Operation: "chat", Provider: "openai",
		Warn: func(msg string) {
			mu.Lock()
			warnings = append(warnings, msg)
			mu.Unlock()
			warned <- struct{}{}
		}})
	if err != nil {
		t.Fatal(err)
	}
	s := e.Sink()
	for i := range 5 {
		s.Add(okRecord(int64(i)))
	}
	waitCount(t, rc, 5)
	// The whole Collector goes, and a new one takes the same port.
	if err := col.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		s.Add(okRecord(int64(5 + i)))
	}
	select {
	case <-warned:
	case <-time.After(time.Minute):
		t.Fatal("no warning while the collector was down")
	}
	startCollector(t, addr, rc)
	for i := range 2 {
		s.Add(okRecord(int64(8 + i)))
	}
	waitCount(t, rc, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err = e.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "exports failed") {
		t.Errorf("Shutdown: %v, want the failures counted", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 {
		t.Errorf("%d warnings, want one: %q", len(warnings), warnings)
	}
}

// The records summary.json leaves out are left out here too; in Operate
// mode a probe the canary cancelled counts nowhere, and events follow
// OperateEvents.
func TestSinkLeavesOut(t *testing.T) {
	addr := collectortest.FreeAddr(t)
	rc := &received{counts: make(chan uint64, 64)}
	startCollector(t, addr, rc)
	e, err := New(context.Background(), Options{Endpoint: "http://" + addr, Interval: time.Hour, Operate: true})
	if err != nil {
		t.Fatal(err)
	}
	s := e.Sink()
	warm := okRecord(0)
	warm.Warmup = true
	for _, r := range []*loadgen.Record{warm, {ErrorKind: loadgen.ErrDropped}, {ErrorKind: loadgen.ErrNotDue},
		{ErrorKind: loadgen.ErrCancelled}, {ErrorKind: loadgen.ErrServer, Intended: time.Millisecond, End: 5 * time.Millisecond}, okRecord(1)} {
		s.Add(r)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	waitCount(t, rc, 2) // the server error and the success
}

func TestEndpointURL(t *testing.T) {
	for _, c := range []struct{ in, protocol, want string }{
		{"http://c:4318", ProtocolHTTP, "http://c:4318/v1/metrics"},
		{"http://c:4318/", ProtocolHTTP, "http://c:4318/v1/metrics"},
		{"https://c/otlp/v1/metrics", ProtocolHTTP, "https://c/otlp/v1/metrics"},
		{"http://c:4317", ProtocolGRPC, "http://c:4317"},
	} {
		if got, err := endpointURL(c.in, c.protocol); err != nil || got != c.want {
			t.Errorf("endpointURL(%q, %s) = %q, %v; want %q", c.in, c.protocol, got, err, c.want)
		}
	}
	for _, bad := range []string{"c:4318", "grpc://c:4317", "http://"} {
		if _, err := endpointURL(bad, ProtocolHTTP); err == nil {
			t.Errorf("endpointURL(%q) accepted", bad)
		}
	}
	if _, err := endpointURL("http://user:hunter2@c:4318 x", ProtocolHTTP); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("bad URL with a password: %v", err)
	}
}

func TestServerOf(t *testing.T) {
	for _, c := range []struct {
		in   string
		host string
		port int
	}{
		{"http://127.0.0.1:8000", "127.0.0.1", 8000},
		{"https://api.example.com/v1", "api.example.com", 443},
		{"http://[::1]:9000", "::1", 9000},
		{"grpc://triton:8001", "triton", 8001},
	} {
		if h, p := serverOf(c.in); h != c.host || p != c.port {
			t.Errorf("serverOf(%q) = %s, %d", c.in, h, p)
		}
	}
}

// Explicit buckets are the conventions' plus the SLO's thresholds on the
// same metric, sorted, each once.
func TestEdges(t *testing.T) {
	spec := &slo.Spec{Objectives: []slo.Objective{
		{Name: "ttft", Metric: slo.Metric(measure.MetricTTFT), Threshold: 500 * time.Millisecond},
		{Name: "ttft2", Metric: slo.Metric(measure.MetricTTFT), Threshold: 640 * time.Millisecond},
		{Name: "e2e", Metric: slo.Metric(measure.MetricE2E), Threshold: 3 * time.Second},
	}}
	got := edges(measure.MetricTTFT, DurationBuckets, []*slo.Spec{spec})
	if !slices.Contains(got, 0.5) || slices.Contains(got, 3) || len(got) != len(DurationBuckets)+1 || !slices.IsSorted(got) {
		t.Errorf("ttft edges %v", got)
	}
}

// The environment's protocol and endpoint; OTEL_METRICS_EXPORTER=none
// turns the variables off.
func TestEnv(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")
	if Protocol() != ProtocolGRPC || EnvEndpoint() != "http://c:4317" {
		t.Errorf("Protocol %q EnvEndpoint %q", Protocol(), EnvEndpoint())
	}
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:4318")
	if Protocol() != ProtocolHTTP || EnvEndpoint() != "http://m:4318" {
		t.Errorf("metrics-specific: Protocol %q EnvEndpoint %q", Protocol(), EnvEndpoint())
	}
	t.Setenv("OTEL_METRICS_EXPORTER", "none")
	if EnvEndpoint() != "" {
		t.Errorf("OTEL_METRICS_EXPORTER=none: EnvEndpoint %q", EnvEndpoint())
	}
	if CheckProtocol("http/json") == nil || CheckHistogram("linear") == nil {
		t.Error("unknown protocol or histogram accepted")
	}
}

// BenchmarkSinkAdd is the cost a record adds to the pipeline's goroutine:
// a 128-token stream, chunk per token.
func BenchmarkSinkAdd(b *testing.B) {
	e, err := New(context.Background(), Options{Endpoint: "http://127.0.0.1:1", Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Shutdown(ctx)
	}()
	s := e.Sink()
	r := okRecord(0)
	r.Chunks = nil
	for i := range 128 {
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: time.Duration(20+i) * time.Millisecond, Tokens: 1})
	}
	r.End, r.OutputTokens = 150*time.Millisecond, 128
	b.ReportAllocs()
	for b.Loop() {
		s.Add(r)
	}
}
