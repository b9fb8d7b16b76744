package telemetry

import (
	"math"
	"testing"
	"time"
)

func fp(v float64) *float64 { return &v }

// Counters are summed over GPUs by their increase, through a reset; power
// is integrated by trapezoids; NVML wins over an endpoint, and an endpoint
// that describes the same GPUs a second time is not counted.
func TestEnergyAccumulation(t *testing.T) {
	t.Parallel()
	var e energyAcc
	sample := func(at time.Duration, gpus []GPUStat, server []EndpointGPU) {
		s := &Sample{Elapsed: at, GPUs: gpus}
		if server != nil {
			s.Server = &ServerSample{GPUs: server}
		}
		e.addEnergy(s)
	}
	dcgm := func(j float64) []EndpointGPU {
		return []EndpointGPU{{Source: "dcgm", GPU: "0", EnergyJoules: fp(j), PowerWatts: fp(999)}}
	}
	// Two NVML GPUs at 100 W and 300 W, counters from 5 kJ and 9 kJ.
	sample(time.Second, []GPUStat{{Index: 0, EnergyJoules: fp(5000), PowerWatts: fp(100)}, {Index: 1, EnergyJoules: fp(9000), PowerWatts: fp(300)}}, dcgm(1))
	first := e.reading()
	sample(3*time.Second, []GPUStat{{Index: 0, EnergyJoules: fp(5200), PowerWatts: fp(100)}, {Index: 1, EnergyJoules: fp(9600), PowerWatts: fp(300)}}, dcgm(2))
	// GPU 1's driver reloaded: its counter starts again at 50 J.
	sample(4*time.Second, []GPUStat{{Index: 0, EnergyJoules: fp(5300), PowerWatts: fp(100)}, {Index: 1, EnergyJoules: fp(50), PowerWatts: fp(300)}}, dcgm(3))
	r := e.reading()
	if r.From != "nvml" || r.GPUs != 2 || !r.Counter || !r.Power || r.Since != time.Second || r.At != 4*time.Second {
		t.Fatalf("reading %+v", r)
	}
	if r.CounterJ != 300+600+50 {
		t.Errorf("counter %v J, want 950", r.CounterJ)
	}
	if math.Abs(r.PowerJ-400*3) > 1e-9 {
		t.Errorf("power integral %v J, want 1200 (400 W for 3 s)", r.PowerJ)
	}
	w := EnergyDelta(first, r)
	if w == nil || w.Source != EnergyCounter || w.Joules != 950 || w.FromS != 1 || w.ToS != 4 {
		t.Errorf("window %+v", w)
	}
	if w := EnergyDelta(EnergyReading{}, r); w == nil || w.FromS != 1 || w.Joules != 950 {
		t.Errorf("from the start: %+v", w)
	}
	// Power only: the window is an estimate, and says so.
	var p energyAcc
	p.addEnergy(&Sample{Elapsed: 0, Server: &ServerSample{GPUs: []EndpointGPU{{Source: "a", GPU: "0", PowerWatts: fp(200)}}}})
	p.addEnergy(&Sample{Elapsed: 2 * time.Second, Server: &ServerSample{GPUs: []EndpointGPU{{Source: "a", GPU: "0", PowerWatts: fp(400)}}}})
	if w := EnergyDelta(EnergyReading{}, p.reading()); w == nil || w.Source != EnergyPower || w.Joules != 600 {
		t.Errorf("power only: %+v", w)
	}
	// Nothing read: no window, never zero.
	var none energyAcc
	none.addEnergy(&Sample{Elapsed: time.Second})
	if w := EnergyDelta(EnergyReading{}, none.reading()); w != nil {
		t.Errorf("no energy read: %+v", w)
	}
}
