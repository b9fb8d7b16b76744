package canary

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
)

// probeGate stands in front of a simulator and lets only the first n
// probes (POSTs) through; every later one gets 503 at once. A canary never
// stops probing, so this is what bounds its rounds: after n probes its
// latency histograms hold still (a failed probe observes no latency) and a
// scrape of them covers exactly the probes the test counted.
type probeGate struct {
	n, admitted, inFlight atomic.Int64
	next                  http.Handler
}

func (g *probeGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		g.next.ServeHTTP(w, r) // the preflight's model list
		return
	}
	if g.admitted.Add(1) > g.n.Load() {
		http.Error(w, "probe gate closed", http.StatusServiceUnavailable)
		return
	}
	g.inFlight.Add(1)
	defer g.inFlight.Add(-1)
	g.next.ServeHTTP(w, r)
}

// recordTap keeps the canary's records of one target as a run's
// summary.json counts them (measure.Metrics), so its TTFT p99 is the one a
// summary of the same probes would hold.
type recordTap struct {
	mu      sync.Mutex
	metrics *measure.Metrics
	ok      int
}

func (rt *recordTap) sinks(Target) []pipeline.Sink {
	return []pipeline.Sink{pipeline.Func(func(r *loadgen.Record) {
		rt.mu.Lock()
		defer rt.mu.Unlock()
		rt.metrics.Add(r)
		if r.OK() {
			rt.ok++
		}
	})}
}

func (rt *recordTap) okCount() int { rt.mu.Lock(); defer rt.mu.Unlock(); return rt.ok }

func (rt *recordTap) ttft() schema.Hist {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.metrics.Summary(loadgen.Info{}, schema.SummaryMeta{}).LatencyMs[measure.MetricTTFT]
}

// The canary's native TTFT histogram scraped by Debian's Prometheus with
// --enable-feature=native-histograms (which asks /metrics for protobuf,
// the only exposition that carries native histograms): after a bounded
// number of probes against the simulator with known delays,
// histogram_quantile(0.99) over the stored native series agrees with the
// TTFT p99 that summary.json's arithmetic (measure.Metrics, HDR) gives for
// the same probes, within the schema's resolution, for histograms: native
// and both. The instant quantile of the series is compared, not one over
// rate(): the series holds every probe since the daemon started, which is
// what the summary's p99 covers, while an increase over a window misses
// the probes before the series' first scrape and is extrapolated.
// Skips without the binary unless TAILGATE_REQUIRE_PROMTOOL=1.
func TestCanaryNativeHistogramOnRealPrometheus(t *testing.T) {
	promtest.Tool(t, "prometheus")
	if testing.Short() {
		t.Skip("starts Prometheus: not in -short")
	}
	const probes = 150
	for _, mode := range []prom.HistogramMode{prom.HistogramsNative, prom.HistogramsBoth} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := sim.DefaultConfig()
			// A spread of TTFTs (20 ms ± 15 ms) over several native buckets.
			cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 20*time.Millisecond, time.Millisecond, 15*time.Millisecond
			s, err := sim.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			// Closed after the front server (cleanups run last first), so
			// the front's Close finds no simulator handler still running.
			t.Cleanup(func() { s.Close() })
			gate := &probeGate{next: s.Handler()}
			gate.n.Store(probes)
			front := httptest.NewServer(gate)
			t.Cleanup(front.Close)

			tap := &recordTap{metrics: measure.NewMetrics()}
			body := strings.Replace(fmt.Sprintf(canaryFile, front.URL, "2s", 50, ""), "evaluation_interval: 200ms\n",
				fmt.Sprintf("evaluation_interval: 200ms\nhistograms: %s\n", mode), 1)
			d, _, logs := startCanaryWith(t, body, Options{Sinks: tap.sinks})
			p := promtest.Start(t, promtest.Options{Target: d.Addr(), Job: "canary", Native: true})

			// Every admitted probe answered, and the canary has them all.
			if !waitUntil(logs, 30*time.Second, func() bool {
				return gate.admitted.Load() > probes && gate.inFlight.Load() == 0 && tap.okCount() == probes
			}) {
				t.Fatalf("after 30s: %d probes let through (%d in flight), %d successful; want %d successful",
					min(gate.admitted.Load(), probes), gate.inFlight.Load(), tap.okCount(), probes)
			}
			want := tap.ttft()
			if want.Count != probes {
				t.Fatalf("summary TTFT count %d, want %d", want.Count, probes)
			}
			series := fmt.Sprintf(`%s{job="canary",target="sim"}`, prom.TTFTSeconds)
			// Polled until a scrape after the last probe is stored.
			promtest.WaitFor(t, 30*time.Second, fmt.Sprintf("a native TTFT count of %d in Prometheus", probes), func() bool {
				got := p.Query(t, fmt.Sprintf("histogram_count(%s)", series))
				return len(got) == 1 && got[0].Value == probes
			})
			got := p.Query(t, fmt.Sprintf("histogram_quantile(0.99, %s)", series))
			if len(got) != 1 {
				t.Fatalf("histogram_quantile: %v", got)
			}
			// The canary's factor 1.1 gives schema 3, buckets of width
			// 2^(1/8) ≈ 1.0905. Prometheus interpolates within the bucket
			// holding the 99th percentile's rank and the summary's p99 (HDR,
			// 3 significant digits) lies in that bucket up to HDR's 0.1%,
			// so their ratio is at most 1.0905 × 1.001 < 1.1.
			p99 := want.P99 / 1e3
			if r := got[0].Value / p99; r > 1.1 || r < 1/1.1 || math.IsNaN(r) {
				t.Errorf("histogram_quantile(0.99) %.6fs, canary TTFT p99 %.6fs: ratio %.4f, beyond the factor 1.1", got[0].Value, p99, r)
			}
			if sum := p.Query(t, fmt.Sprintf("histogram_sum(%s)", series)); len(sum) != 1 ||
				math.Abs(sum[0].Value-want.Mean*probes/1e3) > 0.01*want.Mean*probes/1e3 {
				t.Errorf("native TTFT sum %v, summary mean %.3f ms × %d", sum, want.Mean, probes)
			}
			t.Logf("TTFT p99: Prometheus %.3f ms, canary (summary arithmetic) %.3f ms, ratio %.4f; count %d",
				got[0].Value*1e3, want.P99, got[0].Value/p99, probes)
			if classic := p.Query(t, fmt.Sprintf(`%s_bucket{job="canary"}`, prom.TTFTSeconds)); len(classic) != 0 {
				t.Errorf("%d classic _bucket series stored: the native histogram was not negotiated", len(classic))
			}
		})
	}
}
