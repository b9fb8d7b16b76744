package main

import (
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
)

func TestMemoryLimitDerivation(t *testing.T) {
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

	if got, want := memoryLimit(4096, ""), int64(memLimitBase+4096*memLimitPerStream); got != want {
		t.Errorf("4096 streams: limit %d, want base + 4096 × per-stream = %d", got, want)
	}
	if a, b := memoryLimit(256, ""), memoryLimit(4096, ""); (b-a)/(4096-256) != memLimitPerStream {
		t.Errorf("limit grows by %d per stream, want %d", (b-a)/(4096-256), memLimitPerStream)
	}
	if got := memoryLimit(4096, "1GiB"); got != 0 {
		t.Errorf("GOMEMLIMIT set: limit %d, want 0 (the user's stands)", got)
	}
	if got := memoryLimit(4096, "off"); got != 0 {
		t.Errorf("GOMEMLIMIT=off: limit %d, want 0 (the user's stands)", got)
	}
	if got := memoryLimit(0, ""); got != 0 {
		t.Errorf("nothing planned: limit %d, want 0", got)
	}
}
