package bench

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// driveGRPC is drive over KServe v2 gRPC (ModelStreamInfer, one stream per
// request, spread over 4 connections) against the simulator's gRPC
// service, or TAILGATE_BENCH_GRPC_TARGET (host:port, model
// TAILGATE_BENCH_GRPC_MODEL).
func driveGRPC(b *testing.B, cfg sim.Config, maxTokens int, opts loadgen.Options) result {
	b.Helper()
	addr, model := os.Getenv("TAILGATE_BENCH_GRPC_TARGET"), os.Getenv("TAILGATE_BENCH_GRPC_MODEL")
	if addr == "" {
		srv := simtest.StartGRPC(b, cfg)
		addr, model = srv.GRPCAddr, srv.Config().Model
	}
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: addr}, Model: model, MaxTokens: maxTokens, Connections: 4})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Preflight(context.Background()); err != nil {
		b.Fatal(err)
	}
	return driveClient(b, c, opts)
}

// BenchmarkGRPCCapacity is BenchmarkCapacity for the gRPC streaming path:
// closed loop at zero server delay, one token per response.
func BenchmarkGRPCCapacity(b *testing.B) {
	for _, conc := range []int{64, 1024} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			res := driveGRPC(b, zeroDelay(), tokensPerRequest, loadgen.Options{Closed: true, Timeout: time.Minute,
				Stages: []loadgen.Stage{{Concurrency: conc, Duration: 4 * time.Second}}})
			s := res.metrics.Summary(res.info, schema.SummaryMeta{})
			el := res.info.Elapsed.Seconds()
			b.ReportMetric(float64(s.Tokens.Output)/el, "tokens/s")
			b.ReportMetric(float64(s.Requests.OK)/el, "req/s")
			b.ReportMetric(float64(s.Requests.Errors), "errors")
			b.ReportMetric(s.LatencyMs[measure.MetricScheduleLag].P99, "lag-p99-ms")
			if res.peakLive > 0 {
				b.ReportMetric(float64(res.peakHeap)/float64(res.peakLive)/1024, "KiB/stream")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkGRPCScheduleLag is BenchmarkScheduleLag's decode50 shape (64
// tokens 20 ms apart) over gRPC, at 64 and 1024 requests in flight.
func BenchmarkGRPCScheduleLag(b *testing.B) {
	const itl, tokens = 20 * time.Millisecond, 64
	for _, inflight := range []int{64, 1024} {
		b.Run(fmt.Sprintf("decode50/inflight%d", inflight), func(b *testing.B) {
			cfg := zeroDelay()
			cfg.FixedITL = itl
			rate := float64(inflight) / (itl * tokens).Seconds()
			res := driveGRPC(b, cfg, tokens, loadgen.Options{Arrival: loadgen.ArrivalPoisson, Seed: 1, Timeout: time.Minute,
				Stages: []loadgen.Stage{{Rate: rate, Duration: 5 * time.Second}}})
			s := res.metrics.Summary(res.info, schema.SummaryMeta{})
			lag := s.LatencyMs[measure.MetricScheduleLag]
			b.ReportMetric(lag.P50, "lag-p50-ms")
			b.ReportMetric(lag.P99, "lag-p99-ms")
			b.ReportMetric(lag.Max, "lag-max-ms")
			b.ReportMetric(float64(res.peakLive), "peak-inflight")
			b.ReportMetric(float64(s.Tokens.Output)/res.info.Elapsed.Seconds(), "tokens/s")
			b.ReportMetric(float64(s.Requests.Errors), "errors")
			b.ReportMetric(res.info.CPUUtilization*100, "cpu-%")
			b.ReportMetric(0, "ns/op")
		})
	}
}
