package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
)

// The soft memory limit a load sets for its own process: what the process
// holds when the load is planned (the binary, the prompt mix, the
// histograms) plus a base, and what one in-flight stream holds live, its
// buffers and its goroutine's stack. Past the limit the collector runs
// sooner instead of letting the heap double, so the peak a pod's memory
// limit must hold follows the streams, not the collector's headroom.
// A gRPC stream holds more than an HTTP one (grpc-go's per-stream state
// and its second goroutine).
const (
	memLimitBase          = 32 << 20
	memLimitPerStream     = 16 << 10
	memLimitPerGRPCStream = 48 << 10
)

// The limit never stays below what the streams really hold: long prompts
// or a session's growing context can hold far more per stream than the
// plan's budget, and a limit under the live heap would make the collector
// run without pause, taking CPU from the measurement. The limiter raises
// it to the live heap with this much headroom (a share of the live heap,
// at least memFloorSlack), checked every memLimitEvery.
const (
	memFloorHeadroom = 2 // live/2
	memFloorSlack    = 8 << 20
	memLimitEvery    = 250 * time.Millisecond
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

// memoryLimit is the planned soft limit for inFlight streams of api over
// inUse bytes already held, or 0 (leave the runtime's own) when the user
// set GOMEMLIMIT, whose value is gomemlimit, or nothing is planned.
func memoryLimit(api string, inFlight, inUse int64, gomemlimit string) int64 {
	if gomemlimit != "" || inFlight <= 0 {
		return 0
	}
	per := int64(memLimitPerStream)
	if api == kserve.APIGRPC {
		per = memLimitPerGRPCStream
	}
	return inUse + memLimitBase + inFlight*per
}

// memSample is what the limiter reads of the runtime's memory.
type memSample struct {
	live    int64 // the heap live at the end of the last collection
	nonHeap int64 // stacks, runtime metadata and the rest outside the heap
}

// inUse is what the process holds now beyond free and released pages.
func (s memSample) inUse() int64 { return s.nonHeap + s.live }

// floorLimit is the lowest limit the streams' live memory allows: live
// plus headroom, so the collector never runs without pause.
func floorLimit(s memSample) int64 {
	return s.nonHeap + s.live + max(s.live/memFloorHeadroom, memFloorSlack)
}

var memMetrics = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/unused:bytes",
}

func readMemSample() memSample {
	ss := make([]metrics.Sample, len(memMetrics))
	for i, n := range memMetrics {
		ss[i].Name = n
	}
	metrics.Read(ss)
	v := func(i int) int64 {
		if ss[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return int64(ss[i].Value.Uint64())
	}
	heap := v(2) + v(3) + v(4) + v(5)
	return memSample{live: v(0), nonHeap: max(v(1)-heap, 0)}
}

// memLimiter holds the soft limit at the plan's, raised to the floor the
// live memory sets while the load runs.
type memLimiter struct {
	planned int64
	set     int64
	read    func() memSample
	setter  func(int64) int64
}

// adjust sets the limit to the larger of the plan's and the floor.
func (m *memLimiter) adjust() {
	l := max(m.planned, floorLimit(m.read()))
	if l != m.set {
		m.setter(l)
		m.set = l
	}
}

// The limit is the process's: loads that overlap in one process (the
// commands' tests run in parallel) share it, at the largest of their plans,
// and the last to stop restores the limit from before the first. Each load
// watches the live memory from a goroutine of its own, ended by its stop,
// so a load leaves nothing running behind it.
type memLimitState struct {
	sync.Mutex
	plans map[*int64]bool
	prev  int64
	m     memLimiter
}

var memLimits = memLimitState{m: memLimiter{read: readMemSample, setter: debug.SetMemoryLimit}}

// startMemoryLimit sets the soft memory limit for the load o plans over
// api, before it starts, and keeps it above the live memory until stop;
// every command that starts a load calls it. Nothing is set when
// GOMEMLIMIT is.
func startMemoryLimit(api string, o loadgen.Options) (stop func()) {
	planned := memoryLimit(api, plannedInFlight(o), readMemSample().inUse(), os.Getenv("GOMEMLIMIT"))
	if planned <= 0 {
		return func() {}
	}
	key := &planned
	ml := &memLimits
	ml.Lock()
	if len(ml.plans) == 0 {
		ml.plans = map[*int64]bool{}
		ml.prev = debug.SetMemoryLimit(-1)
		ml.m.set = ml.prev
	}
	ml.plans[key] = true
	ml.adjustLocked()
	ml.Unlock()
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		t := time.NewTicker(memLimitEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				ml.Lock()
				ml.adjustLocked()
				ml.Unlock()
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-ended
		ml.Lock()
		defer ml.Unlock()
		delete(ml.plans, key)
		if len(ml.plans) == 0 {
			debug.SetMemoryLimit(ml.prev)
			return
		}
		ml.adjustLocked()
	}
}

// adjustLocked sets the limit for the loads running now.
func (ml *memLimitState) adjustLocked() {
	var l int64
	for p := range ml.plans {
		l = max(l, *p)
	}
	ml.m.planned = l
	ml.m.adjust()
}
