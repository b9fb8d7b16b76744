package main

import (
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
)

func TestMemoryLimitDerivation(t *testing.T) {
	t.Parallel()
	closed := loadgen.Options{Closed: true, Stages: []loadgen.Stage{{Concurrency: 256}, {Concurrency: 4096}, {Concurrency: 1024}}}
	if got := plannedInFlight(closed); got != 4096 {
		t.Errorf("closed loop: planned in flight %d, want the highest stage's 4096", got)
	}
	sharded := closed
	sharded.Shard = loadgen.Shard{Index: 1, Count: 4}
	if got := plannedInFlight(sharded); got != 1024 {
		t.Errorf("shard 1/4 of 4096: planned in flight %d, want 1024", got)
	}
	open := loadgen.Options{Stages: []loadgen.Stage{{Rate: 500}}, MaxInFlight: 2000}
	if got := plannedInFlight(open); got != 2000 {
		t.Errorf("open loop: planned in flight %d, want its cap 2000", got)
	}
	if got := plannedInFlight(loadgen.Options{Stages: []loadgen.Stage{{Rate: 5}}}); got != loadgen.DefaultMaxInFlight {
		t.Errorf("open loop, no cap given: planned in flight %d, want the default %d", got, loadgen.DefaultMaxInFlight)
	}

	const held = 100 << 20
	if got, want := memoryLimit("openai-chat", 4096, held, ""), int64(held+memLimitBase+4096*memLimitPerStream); got != want {
		t.Errorf("4096 streams: limit %d, want held + base + 4096 × per-stream = %d", got, want)
	}
	if a, b := memoryLimit("openai-chat", 256, 0, ""), memoryLimit("openai-chat", 4096, 0, ""); (b-a)/(4096-256) != memLimitPerStream {
		t.Errorf("limit grows by %d per stream, want %d", (b-a)/(4096-256), memLimitPerStream)
	}
	if h, g := memoryLimit("openai-chat", 1024, 0, ""), memoryLimit(kserve.APIGRPC, 1024, 0, ""); g <= h {
		t.Errorf("a gRPC stream's budget (%d for 1024) is not above an HTTP one's (%d)", g, h)
	}
	if got := memoryLimit("openai-chat", 4096, held, "1GiB"); got != 0 {
		t.Errorf("GOMEMLIMIT set: limit %d, want 0 (the user's stands)", got)
	}
	if got := memoryLimit("openai-chat", 4096, held, "off"); got != 0 {
		t.Errorf("GOMEMLIMIT=off: limit %d, want 0 (the user's stands)", got)
	}
	if got := memoryLimit("openai-chat", 0, held, ""); got != 0 {
		t.Errorf("nothing planned: limit %d, want 0", got)
	}
}

// Streams that hold more than the plan's budget (long prompts, a growing
// context) raise the limit above their live memory instead of making the
// collector run without pause; when they let go it falls back to the
// plan's.
func TestMemoryLimitFollowsLiveMemory(t *testing.T) {
	t.Parallel()
	sample := memSample{live: 10 << 20, nonHeap: 5 << 20}
	var set []int64
	m := &memLimiter{planned: 64 << 20, read: func() memSample { return sample },
		setter: func(l int64) int64 { set = append(set, l); return 0 }}
	m.adjust()
	if len(set) != 1 || set[0] != 64<<20 {
		t.Fatalf("live memory under the plan: limits set %v, want the plan's %d", set, 64<<20)
	}
	m.adjust()
	if len(set) != 1 {
		t.Errorf("an unchanged limit was set again: %v", set)
	}
	sample = memSample{live: 400 << 20, nonHeap: 20 << 20}
	m.adjust()
	if got := set[len(set)-1]; got <= sample.live+sample.nonHeap {
		t.Errorf("live memory %d over the plan: limit %d, want above it", sample.live+sample.nonHeap, got)
	} else if want := sample.nonHeap + sample.live + sample.live/memFloorHeadroom; got != want {
		t.Errorf("limit %d, want live + non-heap + live/%d = %d", got, memFloorHeadroom, want)
	}
	sample = memSample{live: 1 << 20, nonHeap: 5 << 20}
	m.adjust()
	if got := set[len(set)-1]; got != 64<<20 {
		t.Errorf("live memory back under the plan: limit %d, want the plan's", got)
	}
	if s := readMemSample(); s.live <= 0 || s.nonHeap <= 0 {
		t.Errorf("the runtime's memory read as live %d, non-heap %d", s.live, s.nonHeap)
	}
}
