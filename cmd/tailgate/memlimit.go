package main

import (
	"os"
	"runtime/debug"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// The soft memory limit a load sets for its own process: what the runtime
// holds before the streams (the binary's heap, the prompt mix, the
// histograms) and what one in-flight stream holds live, its buffers and
// its goroutine's stack. Past the limit the collector runs sooner instead
// of letting the heap double, so the peak a pod's memory limit must hold
// follows the streams, not the collector's headroom; the runtime caps the
// collector's share of the CPU when live memory is over the limit, so a
// limit set too low costs CPU, never the run.
const (
	memLimitBase      = 32 << 20
	memLimitPerStream = 16 << 10
)

// plannedInFlight is the most requests this process holds at once: the
// closed loop's highest concurrency, or the open loop's cap on requests in
// flight, this shard's share of either.
func plannedInFlight(o loadgen.Options) int64 {
	if !o.Closed {
		lim := o.MaxInFlight
		if lim == 0 {
			lim = loadgen.DefaultMaxInFlight
		}
		return int64(lim)
	}
	var peak int64
	for _, st := range o.Stages {
		peak = max(peak, o.Shard.Share(int64(st.Concurrency)))
	}
	return peak
}

// memoryLimit is the soft limit for inFlight streams, or 0 (leave the
// runtime's own) when the user set GOMEMLIMIT, whose value is gomemlimit,
// or nothing is planned.
func memoryLimit(inFlight int64, gomemlimit string) int64 {
	if gomemlimit != "" || inFlight <= 0 {
		return 0
	}
	return memLimitBase + inFlight*memLimitPerStream
}

// applyMemoryLimit sets the soft memory limit for the load o plans, before
// it starts; every command that starts a load calls it.
func applyMemoryLimit(o loadgen.Options) {
	if l := memoryLimit(plannedInFlight(o), os.Getenv("GOMEMLIMIT")); l > 0 {
		debug.SetMemoryLimit(l)
	}
}
