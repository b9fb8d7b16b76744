package telemetry

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// TestAgainstSimulatorAboveCapacity runs more concurrent requests than the
// simulator has slots, and checks that the sampler saw the queue and that
// the queue-delay histogram gained exactly one observation per request.
func TestAgainstSimulatorAboveCapacity(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.Slots = 2
	srv := simtest.Start(t, cfg)

	var c collector
	rounds := make(chan struct{}, 1)
	r := Start(context.Background(), Config{
		Scrapes: []ScrapeConfig{{URL: srv.URL + "/metrics"}},
		// A scrape may answer after its round closed (90% of the
		// interval; under -race on a loaded 2-core machine one took over
		// 90 ms): it counts, late, but the waits below want one in time.
		Interval: 250 * time.Millisecond,
	}, func(s Sample) {
		c.sink(s)
		select {
		case rounds <- struct{}{}:
		default:
		}
	})
	// answeredSince waits, round by round, for a scrape started at or
	// after t0 that answered within its round: the counts then hold
	// everything the server counted before t0.
	answeredSince := func(t0 time.Time, what string) {
		t.Helper()
		deadline := time.NewTimer(20 * time.Second)
		defer deadline.Stop()
		for {
			for _, s := range c.all() {
				if !s.At.Before(t0) && s.Server != nil {
					return
				}
			}
			select {
			case <-rounds:
			case <-deadline.C:
				t.Fatalf("no scrape answered within its round %s", what)
			}
		}
	}
	// The first answer is the baseline: what the server counted before
	// it is history, not the run's, so no load before it.
	answeredSince(time.Time{}, "before the load")
	before := r.Snapshot()

	const requests = 24
	body := `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":false}`
	client := &http.Client{Timeout: 30 * time.Second}
	var served atomic.Int64
	var wg sync.WaitGroup
	for range requests {
		wg.Go(func() {
			resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("HTTP %d: %s", resp.StatusCode, b)
				return
			}
			served.Add(1)
		})
	}
	wg.Wait()
	answeredSince(time.Now(), "after the load")
	after := r.Snapshot()
	sum := r.Stop()

	n := uint64(served.Load())
	if n != requests {
		t.Fatalf("%d of %d requests served", n, requests)
	}
	d := Delta(before, after)
	if d.Source != "vllm:request_queue_time_seconds" || d.Count != n {
		t.Errorf("queue-delay delta: %d observations from %q, want %d", d.Count, d.Source, n)
	}
	// With 2 slots, 24 requests of 16 tokens queue for several decode waves.
	if mean, ok := d.Mean(); !ok || mean <= 0 {
		t.Errorf("queue delay mean %v", mean)
	}
	if sum.Waiting == nil || sum.Waiting.Max <= 0 {
		t.Errorf("sampler never saw a queue: %+v (%d samples)", sum.Waiting, sum.Samples)
	}
	if sum.Running == nil || sum.Running.Max != 2 {
		t.Errorf("running %+v, want max 2 (the slots)", sum.Running)
	}
	// A slow scrape is counted, not fatal; the counts must still be exact
	// because counters are differenced, not sampled.
	if sum.Family != "vllm" || sum.QueueDelay == nil || sum.QueueDelay.Count != n || sum.ScrapeErrors*2 > sum.Samples {
		t.Errorf("summary: family %q queue %+v errors %d %q", sum.Family, sum.QueueDelay, sum.ScrapeErrors, sum.Errors)
	}
	if sum.GenerationTokens == nil || *sum.GenerationTokens != 16*requests {
		t.Errorf("generation tokens %v, want %d", *sum.GenerationTokens, 16*requests)
	}
	if sum.QueueDelay.P99Ms == nil || *sum.QueueDelay.P99Ms < *sum.QueueDelay.P50Ms {
		t.Errorf("queue quantiles %+v", sum.QueueDelay)
	}
	// The simulator's DCGM gauges, on the same endpoint.
	if len(sum.GPUs) != 1 || sum.GPUs[0].Utilization == nil || sum.GPUs[0].Utilization.Max <= 0 || sum.GPUs[0].MemoryUsedBytes == nil {
		t.Errorf("endpoint GPU %+v", sum.GPUs)
	} else if sum.GPUUtilizationFrom != "endpoint" || sum.GPUUtilization.Max > 1 {
		t.Errorf("gpu utilization %q %+v", sum.GPUUtilizationFrom, sum.GPUUtilization)
	}
	t.Logf("%d samples; waiting max %v; queue delay count %d mean %.1f ms p50 %.1f p99 %.1f ms; gpu util mean %.2f",
		sum.Samples, sum.Waiting.Max, sum.QueueDelay.Count, *sum.QueueDelay.MeanMs, *sum.QueueDelay.P50Ms,
		*sum.QueueDelay.P99Ms, sum.GPUUtilization.Mean)
}
