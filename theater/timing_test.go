//go:build timing && !race

// Timing tests: held against the simulator's model or its clock, they run
// without the race detector (which slows client and simulator 5-10x, and
// they would measure it), from `make test-timing` (go test -tags timing).

package theater_test

import "testing"

func TestMetricTheaterPastCapacityNotAtLowLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	low := run(t, 40)
	if low.MetricTheater {
		t.Errorf("flagged at 40 req/s (32%% of capacity)")
	}
	busy := false
	for _, b := range low.Buckets {
		if b.GPUUtilization != nil && *b.GPUUtilization >= 0.8 {
			busy = true
		}
	}
	if !busy {
		t.Errorf("the simulator's GPU was not busy at low load: the test shows nothing")
	}
	high := run(t, 200)
	if !high.MetricTheater {
		t.Errorf("not flagged at 200 req/s (1.6× capacity)")
	}
}
