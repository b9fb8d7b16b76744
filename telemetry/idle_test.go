package telemetry

import (
	"context"
	"sync"
	"testing"
	"time"
)

// seqGPU reads one GPU whose utilisation follows a script, one value per
// sample.
type seqGPU struct {
	mu   sync.Mutex
	vals []float64
	i    int
}

func (g *seqGPU) Sample() ([]GPUStat, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.vals[min(g.i, len(g.vals)-1)]
	g.i++
	return []GPUStat{{Index: 0, Utilization: new(v)}}, nil
}
func (g *seqGPU) Devices() []GPUInfo { return []GPUInfo{{Index: 0, Name: "test"}} }
func (g *seqGPU) Close()             {}

// Idle share counts samples under 5%: 0.04 is idle, 0.05 is not.
func TestGPUIdleShare(t *testing.T) {
	t.Parallel()
	g := &seqGPU{vals: []float64{0, 0.04, 0.05, 0.9}}
	r := Start(context.Background(), Config{GPU: g, Interval: time.Hour}, func(Sample) {})
	r.Snapshot()
	r.Snapshot()
	sum := r.Stop() // start, two snapshots, stop: four samples
	if sum.GPUIdleShare == nil || *sum.GPUIdleShare != 0.5 {
		t.Fatalf("idle share %v over %d samples, want 0.5 (2 of 4)", sum.GPUIdleShare, sum.Samples)
	}
	r = Start(context.Background(), Config{Interval: time.Hour}, func(Sample) {})
	if sum := r.Stop(); sum.GPUIdleShare != nil {
		t.Errorf("no GPU: idle share %v", *sum.GPUIdleShare)
	}
}
