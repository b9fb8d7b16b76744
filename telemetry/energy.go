package telemetry

import (
	"math"
	"strconv"
	"time"
)

// Energy is counted from the GPUs' energy counters where they have one
// (NVML's total energy consumption, dcgm-exporter's
// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION): the increase between two readings
// is what the boards used, whatever happened between samples. Without a
// counter, power readings are integrated over time (trapezoids between
// samples): an estimate, said so. One source is counted, local GPUs (NVML)
// first, else the first endpoint that reports energy or power, so a GPU two
// exporters describe is not counted twice.

// Energy sources (EnergyReading.Source, EnergyWindow.Source).
const (
	EnergyCounter = "counter"        // the boards' energy counters: measured
	EnergyPower   = "power sampling" // power readings integrated over time: an estimate
)

// EnergyReading is what the Run has counted since its first sample: the
// counters' increase and the integral of power, summed over the GPUs of
// one source.
type EnergyReading struct {
	// Since and At are when the first and the last sample counted were
	// taken (since the Run's start).
	Since time.Duration `json:"since"`
	At    time.Duration `json:"at"`
	// CounterJ is the counters' increase (Counter: every GPU counted has
	// one); PowerJ the integral of power (Power: every GPU has power).
	CounterJ float64 `json:"counter_j"`
	PowerJ   float64 `json:"power_j"`
	Counter  bool    `json:"counter"`
	Power    bool    `json:"power"`
	GPUs     int     `json:"gpus"`
	// From is the GPUs' source: "nvml" or the endpoint's.
	From string `json:"from,omitempty"`
}

// EnergyWindow is the energy used between two readings.
type EnergyWindow struct {
	Joules float64 `json:"joules"`
	// Source is EnergyCounter (measured) or EnergyPower (an estimate).
	Source string `json:"source"`
	From   string `json:"from,omitempty"`
	GPUs   int    `json:"gpus"`
	// FromS and ToS bound the window, in seconds since sampling began.
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
}

// EnergyDelta is the energy between readings a and b (nil when neither
// counters nor power were read, or the source changed).
func EnergyDelta(a, b EnergyReading) *EnergyWindow {
	if b.GPUs == 0 || (a.From != "" && a.From != b.From) || b.At <= a.At {
		return nil
	}
	from := a.At
	if a.GPUs == 0 { // from the first reading
		from = b.Since
	}
	w := &EnergyWindow{From: b.From, GPUs: b.GPUs, FromS: from.Seconds(), ToS: b.At.Seconds()}
	switch {
	case b.Counter && (a.Counter || a.GPUs == 0):
		w.Joules, w.Source = b.CounterJ-a.CounterJ, EnergyCounter
	case b.Power && (a.Power || a.GPUs == 0):
		w.Joules, w.Source = b.PowerJ-a.PowerJ, EnergyPower
	default:
		return nil
	}
	if w.Joules < 0 || math.IsNaN(w.Joules) {
		return nil
	}
	return w
}

// energyAcc accumulates one source's GPUs.
type energyAcc struct {
	from      string
	series    map[string]*energySeries
	order     []string
	since, at time.Duration
}

type energySeries struct {
	haveCounter, havePower bool
	lastCounter, counterJ  float64
	lastPower, powerJ      float64
	lastAt                 time.Duration
	counterMissing         bool // a reading without a counter after the first
}

// energyGPU is one GPU's reading in a sample.
type energyGPU struct {
	key           string
	energy, power *float64
}

// add counts one sample's readings of the source's GPUs.
func (e *energyAcc) add(at time.Duration, gpus []energyGPU) {
	if e.series == nil {
		e.series = map[string]*energySeries{}
		e.since = at
	}
	e.at = at
	for _, g := range gpus {
		s := e.series[g.key]
		if s == nil {
			s = &energySeries{}
			e.series[g.key] = s
			e.order = append(e.order, g.key)
		}
		if v := g.energy; v != nil && !math.IsNaN(*v) {
			switch {
			case !s.haveCounter:
				s.haveCounter = true
			case *v >= s.lastCounter:
				s.counterJ += *v - s.lastCounter
			default: // the counter restarted (driver reload): count from zero
				s.counterJ += *v
			}
			s.lastCounter = *v
		} else if s.haveCounter {
			s.counterMissing = true
		}
		if v := g.power; v != nil && !math.IsNaN(*v) {
			if s.havePower && at > s.lastAt {
				s.powerJ += (*v + s.lastPower) / 2 * (at - s.lastAt).Seconds()
			}
			s.havePower, s.lastPower, s.lastAt = true, *v, at
		}
	}
}

func (e *energyAcc) reading() EnergyReading {
	r := EnergyReading{Since: e.since, At: e.at, From: e.from, GPUs: len(e.series), Counter: len(e.series) > 0, Power: len(e.series) > 0}
	for _, k := range e.order {
		s := e.series[k]
		r.CounterJ += s.counterJ
		r.PowerJ += s.powerJ
		r.Counter = r.Counter && s.haveCounter
		r.Power = r.Power && s.havePower
	}
	return r
}

// addEnergy picks the sample's energy readings: local GPUs (NVML) when
// sampled, else the first endpoint source's GPUs that report energy or
// power; the source chosen first stays.
func (e *energyAcc) addEnergy(smp *Sample) {
	var gpus []energyGPU
	from := ""
	for _, g := range smp.GPUs {
		if g.EnergyJoules != nil || g.PowerWatts != nil {
			gpus = append(gpus, energyGPU{key: "nvml/" + strconv.Itoa(g.Index), energy: g.EnergyJoules, power: g.PowerWatts})
			from = "nvml"
		}
	}
	if len(gpus) == 0 && smp.Server != nil {
		for _, g := range smp.Server.GPUs {
			if g.EnergyJoules == nil && g.PowerWatts == nil {
				continue
			}
			if from == "" {
				from = g.Source
			}
			if g.Source == from {
				gpus = append(gpus, energyGPU{key: g.GPU + "\x00" + g.UUID + "\x00" + g.MIG, energy: g.EnergyJoules, power: g.PowerWatts})
			}
		}
	}
	if len(gpus) == 0 || (e.from != "" && from != e.from) {
		return
	}
	e.from = from
	e.add(smp.Elapsed, gpus)
}
