package telemetry

import (
	"testing"
)

func wantPtr(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil || !near(*got, want) {
		if got == nil {
			t.Errorf("%s = nil, want %v", what, want)
			return
		}
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

// vLLM with two engines, engine 1 restarted between the readings: the
// capacity counters' increases are taken per series like the tokens.
func TestCapacityVLLM(t *testing.T) {
	t.Parallel()
	_, sum := runSequence(t, fixtures(t, "vllm-capacity-before.prom", "vllm-capacity-after.prom"), Config{})
	c := sum.Capacity
	if c == nil {
		t.Fatal("no capacity")
	}
	wantPtr(t, "preemptions (+2, restarted at 1)", c.Preemptions, 3)
	wantPtr(t, "prefix cache queries", c.PrefixCacheQueries, 700)
	wantPtr(t, "prefix cache hits", c.PrefixCacheHits, 220)
	wantPtr(t, "prefix cache hit rate", c.PrefixCacheHitRate, 220.0/700)
	wantPtr(t, "spec draft tokens", c.SpecDraftTokens, 100)
	wantPtr(t, "spec acceptance", c.SpecAcceptanceRate, 0.7)
	if c.EngineSteps == nil || *c.EngineSteps != 15 {
		t.Errorf("engine steps %v, want 15", c.EngineSteps)
	}
	wantPtr(t, "tokens per step", c.TokensPerStep, 1700.0/15)
	wantPtr(t, "kv blocks (two engines' num_gpu_blocks)", c.KVBlocks, 54000)
	// Engine 1's preemptions, prefix queries and hits, and step histogram.
	if sum.CounterResets != 4 {
		t.Errorf("counter resets %d, want 4", sum.CounterResets)
	}
}

// SGLang dp 2 × tp 2 with every scheduler's metrics: retractions and the
// cache hit rate from tp_rank 0 of each dp_rank.
func TestCapacitySGLang(t *testing.T) {
	t.Parallel()
	_, sum := runSequence(t, fixtures(t, "sglang-capacity-before.prom", "sglang-capacity-after.prom"), Config{})
	c := sum.Capacity
	if c == nil {
		t.Fatal("no capacity")
	}
	wantPtr(t, "retracted requests", c.RetractedRequests, 6)
	if c.CacheHitRate == nil || !near(c.CacheHitRate.Mean, 0.45) || c.CacheHitRate.Max != 0.5 {
		t.Errorf("cache hit rate %+v", c.CacheHitRate)
	}
}

// TGI: batch size and forward time means from its histograms.
func TestCapacityTGI(t *testing.T) {
	t.Parallel()
	_, sum := runSequence(t, fixtures(t, "tgi-capacity-before.prom", "tgi-capacity-after.prom"), Config{})
	c := sum.Capacity
	if c == nil {
		t.Fatal("no capacity")
	}
	wantPtr(t, "batch size", c.BatchSize, 10)
	if c.BatchSizeFrom != "tgi_batch_next_size" {
		t.Errorf("batch size from %q", c.BatchSizeFrom)
	}
	wantPtr(t, "forward ms", c.BatchForwardMs, 5500.0/210)
}

// Triton: inferences per execution of the server model (the ensemble).
func TestCapacityTritonBatch(t *testing.T) {
	t.Parallel()
	_, sum := runSequence(t, fixtures(t, "triton-ensemble-before.prom", "triton-ensemble-after.prom"), Config{ServerModel: "ensemble"})
	if c := sum.Capacity; c == nil || c.BatchSize == nil || *c.BatchSize != 4 || c.BatchSizeFrom != "nv_inference_count / nv_inference_exec_count" {
		t.Errorf("capacity %+v", c)
	}
}
