package bench

import (
	"math"
	"runtime/metrics"
	"testing"
)

func schedP99(b *testing.B) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	h := s[0].Value.Float64Histogram()
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	var cum uint64
	for i, c := range h.Counts {
		cum += c
		if float64(cum) >= 0.99*float64(total) {
			b.Logf("runtime scheduling latency p99 ≤ %.3f ms (over %d goroutine wake-ups)", math.Min(h.Buckets[i+1], 1e9)*1000, total)
			return
		}
	}
}
