package telemetry

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func parseFile(t *testing.T, name string) *ServerSample {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := ParseExposition(f)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("%s: marshal: %v", name, err)
	}
	return s
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func wantVal(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: missing, want %v", what, want)
		return
	}
	if !near(*got, want) {
		t.Errorf("%s = %v, want %v", what, *got, want)
	}
}

func wantNil[T any](t *testing.T, what string, got *T) {
	t.Helper()
	if got != nil {
		t.Errorf("%s = %v, want absent", what, *got)
	}
}

func wantQuantile(t *testing.T, what string, h *Histogram, q, want float64) {
	t.Helper()
	if h == nil {
		t.Fatalf("%s: no histogram", what)
	}
	e, ok := h.Quantile(q)
	if !ok || !near(e.Value, want) {
		t.Errorf("%s p%v = %v (%v), want %v", what, q*100, e.Value, ok, want)
	}
}

func TestParseVLLM(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "vllm.prom")
	if s.Family != FamilyVLLM {
		t.Errorf("family %q", s.Family)
	}
	// Two engines: counts and tokens summed, KV usage averaged.
	wantVal(t, "running", s.Running, 21)
	wantVal(t, "waiting", s.Waiting, 7)
	wantVal(t, "kv_usage", s.KVUsage, 0.6)
	wantVal(t, "prompt tokens", s.PromptTokens, 22345)
	wantVal(t, "generation tokens", s.GenerationTokens, 100000)

	q := s.QueueDelay
	if q == nil || q.Source != "vllm:request_queue_time_seconds" || q.Count != 150 || !near(q.Sum, 18.5) {
		t.Fatalf("queue delay %+v", q)
	}
	if len(q.Buckets) != 22 || !math.IsInf(q.Buckets[21].LeSeconds, 1) || q.Buckets[21].Count != 150 {
		t.Fatalf("queue buckets %+v", q.Buckets)
	}
	for _, b := range []Bucket{{LeSeconds: 0.3, Count: 120}, {LeSeconds: 0.5, Count: 135}, {LeSeconds: 0.8, Count: 143}, {LeSeconds: 1, Count: 148}, {LeSeconds: 1.5, Count: 150}} {
		if !containsBucket(q.Buckets, b) {
			t.Errorf("queue buckets lack %+v: %+v", b, q.Buckets)
		}
	}
	// Hand-computed: rank 75 in [0, 0.3] holding 120 → 0.3·75/120;
	// rank 135 is exactly the 0.5 bucket's count → 0.5;
	// rank 148.5 in (1, 1.5] holding 2, 0.5 into it → 1.125.
	wantQuantile(t, "queue", q, 0.5, 0.1875)
	wantQuantile(t, "queue", q, 0.9, 0.5)
	wantQuantile(t, "queue", q, 0.99, 1.125)

	if s.TTFT == nil || s.TTFT.Count != 150 || !near(s.TTFT.Sum, 9.3) {
		t.Errorf("ttft %+v", s.TTFT)
	}
	if s.E2E == nil || s.E2E.Count != 150 || !near(s.E2E.Sum, 255) {
		t.Errorf("e2e %+v", s.E2E)
	}
	if len(s.GPUs) != 0 {
		t.Errorf("gpus %+v", s.GPUs)
	}
}

func containsBucket(bs []Bucket, want Bucket) bool {
	for _, b := range bs {
		if near(b.LeSeconds, want.LeSeconds) && b.Count == want.Count {
			return true
		}
	}
	return false
}

func TestParseSGLang(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "sglang.prom")
	if s.Family != FamilySGLang {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running", s.Running, 32)
	wantVal(t, "waiting", s.Waiting, 5)
	wantVal(t, "kv_usage", s.KVUsage, 0.42)
	wantVal(t, "prompt tokens", s.PromptTokens, 80000)
	wantVal(t, "generation tokens", s.GenerationTokens, 20000)
	q := s.QueueDelay
	if q == nil || q.Source != "sglang:queue_time_seconds" || q.Count != 100 || !near(q.Sum, 22) {
		t.Fatalf("queue %+v", q)
	}
	// A le="0.0" bucket holding 10: rank 5 falls in it, and a bucket
	// with bound ≤ 0 returns its bound. Rank 50 in (0.1, 0.2] (40→60).
	wantQuantile(t, "queue", q, 0.05, 0)
	wantQuantile(t, "queue", q, 0.5, 0.15)
	wantQuantile(t, "queue", q, 0.9, 0.75) // (0.5, 1], 80→100
	if s.TTFT == nil || s.TTFT.Count != 100 || s.E2E == nil || s.E2E.Count != 100 {
		t.Errorf("ttft %+v e2e %+v", s.TTFT, s.E2E)
	}
}

func TestParseTGI(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "tgi.prom")
	if s.Family != FamilyTGI {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running", s.Running, 16)
	wantVal(t, "waiting", s.Waiting, 6)
	wantVal(t, "kv_usage", s.KVUsage, 0.25) // 20000 / 80000 tokens
	wantVal(t, "prompt tokens", s.PromptTokens, 1234)
	wantVal(t, "generation tokens", s.GenerationTokens, 5678)
	wantNil(t, "ttft", s.TTFT)
	q := s.QueueDelay
	if q == nil || q.Source != "tgi_request_queue_duration" || q.Count != 10 || len(q.Buckets) != 36 {
		t.Fatalf("queue %+v", q)
	}
	// Buckets 0.0001·1.5^k: 2 by k=6, 6 by k=9, 10 by k=11. Rank 5 lies
	// in (1.5^8, 1.5^9]·1e-4, which holds 4, 3 into it.
	lo, hi := 0.0001*math.Pow(1.5, 8), 0.0001*math.Pow(1.5, 9)
	wantQuantile(t, "queue", q, 0.5, lo+(hi-lo)*0.75)
	if s.E2E == nil || s.E2E.Count != 10 || !near(s.E2E.Sum, 9.5) {
		t.Errorf("e2e %+v", s.E2E)
	}
}

func TestParseTriton(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "triton.prom")
	if s.Family != FamilyTriton {
		t.Errorf("family %q", s.Family)
	}
	wantNil(t, "running", s.Running)
	wantNil(t, "kv_usage", s.KVUsage)
	// No server model named and two models loaded (the ensemble and its
	// tensorrt_llm step): summed, and the note says so.
	wantVal(t, "waiting", s.Waiting, 4)
	if s.ServerModel != "" || !strings.Contains(s.ServerModelNote, "ensemble, tensorrt_llm") {
		t.Errorf("server model %q note %q", s.ServerModel, s.ServerModelNote)
	}
	// Queue: µs counters (1.5 s + 0.52 s) over the successes (150+50):
	// Triton adds to them only when a request succeeds.
	q := s.QueueDelay
	if q == nil || !q.MeanOnly() || q.Count != 200 || !near(q.Sum, 2.02) {
		t.Fatalf("queue %+v", q)
	}
	if m, ok := q.Mean(); !ok || !near(m, 0.0101) {
		t.Errorf("queue mean %v", m)
	}
	if _, ok := q.Quantile(0.5); ok {
		t.Error("mean-only histogram gave a quantile")
	}
	if s.E2E == nil || !s.E2E.MeanOnly() || !near(s.E2E.Sum, 404) {
		t.Errorf("e2e %+v", s.E2E)
	}
	// First-response histogram in ms → seconds: rank 100 in (0.1, 0.5] s
	// (40→160).
	if s.TTFT == nil || s.TTFT.Count != 200 || !near(s.TTFT.Sum, 60) || !near(s.TTFT.Buckets[0].LeSeconds, 0.1) {
		t.Fatalf("ttft %+v", s.TTFT)
	}
	wantQuantile(t, "ttft", s.TTFT, 0.5, 0.1+0.4*60/120)
	if len(s.GPUs) != 1 {
		t.Fatalf("gpus %+v", s.GPUs)
	}
	g := s.GPUs[0]
	if g.UUID != "GPU-8c4a1bd2-1f0c-6b9a-2b4e-5f0d8c1e9a77" || g.GPU != g.UUID {
		t.Errorf("gpu id %+v", g)
	}
	wantVal(t, "utilization", g.Utilization, 0.83)
	wantVal(t, "memory used", g.MemoryUsedBytes, 128849018880)
	wantVal(t, "memory total", g.MemoryTotalBytes, 150754820096)
	wantVal(t, "power", g.PowerWatts, 512.25)
}

func TestParseDCGM(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "dcgm.prom")
	if s.Family != FamilyDCGM {
		t.Errorf("family %q", s.Family)
	}
	wantNil(t, "waiting", s.Waiting)
	wantNil(t, "queue", s.QueueDelay)
	if len(s.GPUs) != 3 {
		t.Fatalf("gpus %+v", s.GPUs)
	}
	g0, g1, g2 := s.GPUs[0], s.GPUs[1], s.GPUs[2]
	if g0.GPU != "0" || g1.GPU != "1" || g2.GPU != "2" || g0.UUID != "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52" || g0.Model != "NVIDIA H200" || g0.DriverVersion != "550.54.15" {
		t.Errorf("gpu ids %+v %+v %+v", g0, g1, g2)
	}
	wantVal(t, "gpu0 utilization", g0.Utilization, 0.85)
	wantVal(t, "gpu1 utilization (two pods)", g1.Utilization, 0.95)
	wantNil(t, "gpu2 utilization (4294967295 %)", g2.Utilization)
	wantVal(t, "gpu0 engine active", g0.EngineActive, 0.78)
	wantNil(t, "gpu2 engine active (blank)", g2.EngineActive)
	wantVal(t, "gpu0 fb used", g0.MemoryUsedBytes, 123000*(1<<20))
	wantVal(t, "gpu0 fb total", g0.MemoryTotalBytes, (123000+20000+768)*(1<<20))
	wantVal(t, "gpu1 power", g1.PowerWatts, 655)
	wantVal(t, "gpu2 temperature", g2.TemperatureC, 33)
}

func TestParseTritonWithVLLMBackend(t *testing.T) {
	t.Parallel()
	// Triton's vLLM backend exports vllm:* beside nv_*: the richer vllm
	// histogram wins, and the family says both.
	vllm, _ := os.ReadFile("testdata/vllm.prom")
	triton, _ := os.ReadFile("testdata/triton.prom")
	s, err := ParseExposition(strings.NewReader(string(triton) + string(vllm)))
	if err != nil {
		t.Fatal(err)
	}
	if s.Family != "triton+vllm" {
		t.Errorf("family %q", s.Family)
	}
	if s.QueueDelay == nil || s.QueueDelay.Source != "vllm:request_queue_time_seconds" {
		t.Errorf("queue %+v", s.QueueDelay)
	}
	wantVal(t, "waiting", s.Waiting, 7)
}

func TestParseWithoutTypeLines(t *testing.T) {
	t.Parallel()
	// No # TYPE: the parser sees untyped name_bucket/_count/_sum series.
	text := `vllm:request_queue_time_seconds_bucket{model_name="a",le="0.1"} 4
vllm:request_queue_time_seconds_bucket{model_name="a",le="1"} 8
vllm:request_queue_time_seconds_bucket{model_name="a",le="+Inf"} 10
vllm:request_queue_time_seconds_count{model_name="a"} 10
vllm:request_queue_time_seconds_sum{model_name="a"} 3.5
vllm:request_queue_time_seconds_bucket{model_name="b",le="0.1"} 1
vllm:request_queue_time_seconds_bucket{model_name="b",le="1"} 2
vllm:request_queue_time_seconds_bucket{model_name="b",le="+Inf"} 2
vllm:request_queue_time_seconds_count{model_name="b"} 2
vllm:request_queue_time_seconds_sum{model_name="b"} 0.5
vllm:num_requests_waiting{model_name="a"} 2
vllm:num_requests_waiting{model_name="b"} 1
`
	s, err := ParseExposition(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	wantVal(t, "waiting", s.Waiting, 3)
	q := s.QueueDelay
	if q == nil || q.Count != 12 || !near(q.Sum, 4) || len(q.Buckets) != 3 || q.Buckets[0].Count != 5 || q.Buckets[1].Count != 10 {
		t.Fatalf("queue %+v", q)
	}
}

func TestParseDifferentLayoutsAndBrokenInput(t *testing.T) {
	t.Parallel()
	// Two label sets with different bounds: summed over the shared ones.
	text := `# TYPE sglang:queue_time_seconds histogram
sglang:queue_time_seconds_bucket{dp_rank="0",le="0.1"} 1
sglang:queue_time_seconds_bucket{dp_rank="0",le="0.5"} 3
sglang:queue_time_seconds_bucket{dp_rank="0",le="+Inf"} 4
sglang:queue_time_seconds_sum{dp_rank="0"} 1
sglang:queue_time_seconds_count{dp_rank="0"} 4
sglang:queue_time_seconds_bucket{dp_rank="1",le="0.2"} 2
sglang:queue_time_seconds_bucket{dp_rank="1",le="0.5"} 5
sglang:queue_time_seconds_bucket{dp_rank="1",le="+Inf"} 6
sglang:queue_time_seconds_sum{dp_rank="1"} 2
sglang:queue_time_seconds_count{dp_rank="1"} 6
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0"} NaN
sglang:num_queue_reqs{dp_rank="1"} 4
`
	s, err := ParseExposition(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	q := s.QueueDelay
	if q == nil || len(q.Buckets) != 2 || q.Buckets[0] != (Bucket{LeSeconds: 0.5, Count: 8}) || q.Count != 10 || q.Sum != 3 {
		t.Fatalf("queue %+v", q)
	}
	wantVal(t, "waiting (NaN series skipped)", s.Waiting, 4)

	// A syntax error part-way: what came before is kept, with the error.
	s, err = ParseExposition(strings.NewReader("vllm:num_requests_running 3\nvllm:num_requests_waiting{ 2\n"))
	if err == nil {
		t.Fatal("no error for broken text")
	}
	wantVal(t, "running before the error", s.Running, 3)
	if s.Family != FamilyVLLM {
		t.Errorf("family %q", s.Family)
	}

	s, err = ParseExposition(strings.NewReader(""))
	if err != nil || s.Family != FamilyUnknown || s.Running != nil {
		t.Errorf("empty: %+v %v", s, err)
	}
}

func TestSampleJSONStableKeys(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "vllm.prom")
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{`"family":"vllm"`, `"running":21`, `"waiting":7`, `"kv_usage":0.6`,
		`"prompt_tokens_total":22345`, `"queue_delay":{"source":"vllm:request_queue_time_seconds"`,
		`{"le":0.3,"count":120}`, `{"le":"+Inf","count":150}`, `"sum_s":18.5`} {
		if !strings.Contains(string(b), key) {
			t.Errorf("JSON lacks %s:\n%s", key, b)
		}
	}
}

// TestParseLlamaCPP reads llama.cpp's llama-server /metrics: the capture
// as served (idle, all zero) and the same text with load on it.
func TestParseLlamaCPP(t *testing.T) {
	t.Parallel()
	idle := parseFile(t, "llamacpp-idle.prom")
	if idle.Family != FamilyLlamaCPP {
		t.Errorf("idle family %q", idle.Family)
	}
	wantVal(t, "idle running", idle.Running, 0)
	wantVal(t, "idle waiting", idle.Waiting, 0)
	wantVal(t, "idle kv", idle.KVUsage, 0)

	s := parseFile(t, "llamacpp.prom")
	if s.Family != FamilyLlamaCPP {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running", s.Running, 4)
	wantVal(t, "waiting", s.Waiting, 3)
	wantVal(t, "kv_usage", s.KVUsage, 0.4375)
	wantVal(t, "prompt tokens", s.PromptTokens, 6886)
	wantVal(t, "generation tokens", s.GenerationTokens, 3469)
	wantNil(t, "queue delay", s.QueueDelay)
	wantNil(t, "ttft", s.TTFT)
	wantNil(t, "e2e", s.E2E)
	for _, x := range []*ServerSample{idle, s} {
		if x.QueueDelayUnavailable != NoQueueLlamaCPP {
			t.Errorf("queue delay unavailable %q, want %q", x.QueueDelayUnavailable, NoQueueLlamaCPP)
		}
	}
}
