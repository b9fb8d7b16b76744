package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

const tokensPerRequest = 256

type result struct {
	metrics  *measure.Metrics
	info     loadgen.Info
	peakHeap uint64 // heap+stacks sampled mid-run, over the idle baseline
	peakLive int64  // most requests seen in flight at a sample
}

// drive runs opts against a fresh simulator (same process, so it shares the
// two cores with the load generator) and samples memory while it runs.
func drive(b *testing.B, cfg sim.Config, maxTokens int, opts loadgen.Options) result {
	b.Helper()
	url := os.Getenv("TAILGATE_BENCH_TARGET")
	if url == "" {
		url = simtest.Start(b, cfg).URL
	}
	// TAILGATE_BENCH_HTTP_CLIENT: lean, nethttp or auto (the default, as
	// tailgate's --http-client).
	hc := os.Getenv("TAILGATE_BENCH_HTTP_CLIENT")
	if hc == "" {
		hc = transport.HTTPClientAuto
	}
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: url, Transport: transport.Config{HTTPClient: hc}}, Model: "sim", MaxTokens: maxTokens})
	if err != nil {
		b.Fatal(err)
	}
	defer c.CloseIdleConnections()
	return driveClient(b, c, opts)
}

// driveClient runs opts through c and samples memory while it runs.
func driveClient(b *testing.B, c loadgen.Client, opts loadgen.Options) result {
	b.Helper()
	r, err := loadgen.NewRunner(c, &loadgen.Repeat{Prompt: prompts.Prompt{Text: "benchmark"}}, opts)
	if err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)

	out := make(chan *loadgen.Record, 8192)
	var res result
	res.metrics = measure.NewMetrics()
	var finished atomic.Int64
	done := make(chan struct{})
	go func() {
		for rec := range out {
			res.metrics.Add(rec)
			finished.Add(1)
		}
		close(done)
	}()
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				used := ms.HeapInuse + ms.StackInuse
				if b0 := base.HeapInuse + base.StackInuse; used > b0 && used-b0 > res.peakHeap {
					res.peakHeap = used - b0
				}
				if live := r.Sent() - finished.Load(); live > res.peakLive {
					res.peakLive = live
				}
			}
		}
	}()
	b.ResetTimer()
	res.info, err = r.Run(context.Background(), out)
	b.StopTimer()
	close(stop)
	<-sampled
	<-done
	if err != nil {
		b.Fatal(err)
	}
	return res
}

func zeroDelay() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.Mode = sim.ModeFixed
	cfg.FixedTTFT, cfg.FixedITL = 0, 0
	cfg.TruthLimit = -1
	return cfg
}

// BenchmarkCapacity: closed loop at zero server delay, one token per chunk
// (the parser's worst case): the most streamed tokens/s and requests/s the
// generator sustains, and memory per in-flight stream (load generator and
// simulator together, as both run in this process).
func BenchmarkCapacity(b *testing.B) {
	for _, conc := range []int{64, 1024, 4096} {
		b.Run(fmt.Sprintf("c%d", conc), func(b *testing.B) {
			res := drive(b, zeroDelay(), tokensPerRequest, loadgen.Options{Closed: true, Timeout: time.Minute,
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

// BenchmarkScheduleLag: open loop holding N requests in flight, the
// generator's lateness against its schedule. "decode50" streams 64 tokens
// at 50 tokens/s per request (20 ms apart, a typical decode speed): N/1.28
// req/s. "decode250" streams 256 tokens 4 ms apart (N req/s of 1 s
// responses), five times the chunk rate, to show where the two shared
// cores run out. "decode10" is bench-peers' shape: 20 tokens 100 ms apart.
func BenchmarkScheduleLag(b *testing.B) {
	for _, shape := range []struct {
		name   string
		itl    time.Duration
		tokens int
	}{{"decode50", 20 * time.Millisecond, 64}, {"decode250", 4 * time.Millisecond, 256}, {"decode10", 100 * time.Millisecond, 20}} {
		for _, inflight := range []int{64, 1024, 4096} {
			b.Run(fmt.Sprintf("%s/inflight%d", shape.name, inflight), func(b *testing.B) {
				cfg := zeroDelay()
				cfg.FixedITL = shape.itl
				life := shape.itl * time.Duration(shape.tokens)
				rate := float64(inflight) / life.Seconds()
				res := drive(b, cfg, shape.tokens, loadgen.Options{Arrival: loadgen.ArrivalPoisson, Seed: 1, Timeout: time.Minute,
					Stages: []loadgen.Stage{{Rate: rate, Duration: 5 * time.Second}}})
				s := res.metrics.Summary(res.info, schema.SummaryMeta{})
				lag := s.LatencyMs[measure.MetricScheduleLag]
				schedP99(b)

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
}
