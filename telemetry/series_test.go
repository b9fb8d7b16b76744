package telemetry

import (
	"context"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"
)

// fixtures reads testdata files for a sequence server.
func fixtures(t *testing.T, names ...string) *sequence {
	t.Helper()
	seq := &sequence{}
	for _, n := range names {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			t.Fatal(err)
		}
		seq.texts = append(seq.texts, string(b))
	}
	return seq
}

// runSequence starts a Run on seq (no timer rounds) and takes one
// Snapshot per text.
func runSequence(t *testing.T, seq *sequence, cfg Config) ([]Snapshot, Summary) {
	t.Helper()
	srv := httptest.NewServer(seq)
	t.Cleanup(srv.Close)
	cfg.Scrapes = []ScrapeConfig{{URL: srv.URL}}
	cfg.Interval = time.Hour
	r := Start(context.Background(), cfg, nil)
	var snaps []Snapshot
	for i := range seq.texts {
		seq.cur.Store(int32(i))
		snaps = append(snaps, r.Snapshot())
	}
	return snaps, r.Stop()
}

// Two data-parallel vLLM engines; engine 1 restarts between the first and
// second scrape, then its series disappear (it is restarting again). The
// increases are taken per series, as Prometheus does: on the sums, the
// restart would look like +15 tokens (150 → 165) and the queue histogram
// like a whole-server reset (+106 requests, the server's history).
func TestPerSeriesIncreasesOneEngineRestarts(t *testing.T) {
	t.Parallel()
	seq := fixtures(t, "vllm-dp2-before.prom", "vllm-dp2-engine1-restarted.prom", "vllm-dp2-engine1-gone.prom")
	snaps, sum := runSequence(t, seq, Config{})
	s0, s1, s2 := snaps[0], snaps[1], snaps[2]

	// Engine 0: 100 → 150 generation tokens (+50); engine 1 restarted:
	// 50 → 15 (+15). 65, not 15.
	if g := *s1.GenerationTokens - *s0.GenerationTokens; g != 65 {
		t.Errorf("generation tokens over the restart: %v, want 65", g)
	}
	if p := *s1.PromptTokens - *s0.PromptTokens; p != 650 { // +500, restarted +150
		t.Errorf("prompt tokens over the restart: %v, want 650", p)
	}
	// Queue: engine 0 +5 requests, engine 1 restarted at 1: 6, not 106.
	d := Delta(s0, s1)
	if d.Count != 6 || !near(d.Sum, 2.6) {
		t.Errorf("queue over the restart: count %d sum %v, want 6 and 2.6", d.Count, d.Sum)
	}
	// le 0.3: +3 and 1; 0.5…1: +4 and 1; from 1.5: +5 and 1.
	want := []uint64{4, 5, 5, 5}
	for range 18 {
		want = append(want, 6)
	}
	if !equalU(counts(&d), want...) {
		t.Errorf("queue buckets over the restart %v, want %v", counts(&d), want)
	}

	// Engine 1's series disappear: they add nothing further (the sums
	// would fall, and look like a reset adding 1520 prompt tokens).
	if g := *s2.GenerationTokens - *s1.GenerationTokens; g != 2 {
		t.Errorf("generation tokens after engine 1 went: %v, want 2", g)
	}
	if p := *s2.PromptTokens - *s1.PromptTokens; p != 20 {
		t.Errorf("prompt tokens after engine 1 went: %v, want 20", p)
	}
	if d := Delta(s1, s2); d.Count != 1 || !near(d.Sum, 0.2) {
		t.Errorf("queue after engine 1 went: count %d sum %v, want 1 and 0.2", d.Count, d.Sum)
	}

	if *sum.GenerationTokens != 67 || *sum.PromptTokens != 670 || sum.QueueDelay.Count != 7 {
		t.Errorf("summary tokens %v/%v queue %d, want 67/670 and 7", *sum.GenerationTokens, *sum.PromptTokens, sum.QueueDelay.Count)
	}
	// One reset each of engine 1's queue histogram, prompt and generation
	// counters.
	if sum.CounterResets != 3 {
		t.Errorf("counter resets %d, want 3", sum.CounterResets)
	}
}

// A series that comes back after it disappeared continues from its last
// reading (a reset only if it fell), and a series first seen mid-run
// counts from zero: its first reading is the increase since it began.
func TestPerSeriesReturningAndNewSeries(t *testing.T) {
	t.Parallel()
	tok := func(rows string) string {
		return "# TYPE vllm:generation_tokens_total counter\n" + rows
	}
	seq := &sequence{texts: []string{
		tok(`vllm:generation_tokens_total{engine="0"} 100` + "\n" + `vllm:generation_tokens_total{engine="1"} 50` + "\n"),
		tok(`vllm:generation_tokens_total{engine="0"} 110` + "\n"),                                                        // engine 1 gone: +10
		tok(`vllm:generation_tokens_total{engine="0"} 120` + "\n" + `vllm:generation_tokens_total{engine="1"} 53` + "\n"), // back, not reset: +10 +3
		tok(`vllm:generation_tokens_total{engine="0"} 120` + "\n" + `vllm:generation_tokens_total{engine="1"} 53` + "\n" +
			`vllm:generation_tokens_total{engine="2"} 7` + "\n"), // engine 2 joined: +7
	}}
	snaps, sum := runSequence(t, seq, Config{})
	for i, want := range []float64{0, 10, 23, 30} {
		if got := *snaps[i].GenerationTokens; got != want {
			t.Errorf("snapshot %d: %v tokens, want %v", i, got, want)
		}
	}
	if sum.CounterResets != 0 {
		t.Errorf("counter resets %d", sum.CounterResets)
	}
}

// Point 6: a counter went down only if one series' new reading is below
// its old one. Summed as floats, three engines' counters listed in another
// order round to a smaller total (1+1+1e16 = 1e16+2, 1e16+1+1 = 1e16),
// which the old code took for a restart and counted 1e16 tokens.
func TestResetDetectionIsPerSeriesNotOnFloatSums(t *testing.T) {
	t.Parallel()
	seq := &sequence{texts: []string{
		"# TYPE vllm:prompt_tokens_total counter\n" +
			`vllm:prompt_tokens_total{engine="1"} 1` + "\n" + `vllm:prompt_tokens_total{engine="2"} 1` + "\n" +
			`vllm:prompt_tokens_total{engine="0"} 1e16` + "\n",
		"# TYPE vllm:prompt_tokens_total counter\n" +
			`vllm:prompt_tokens_total{engine="0"} 1e16` + "\n" + `vllm:prompt_tokens_total{engine="1"} 1` + "\n" +
			`vllm:prompt_tokens_total{engine="2"} 1` + "\n",
	}}
	snaps, sum := runSequence(t, seq, Config{})
	if got := *snaps[1].PromptTokens; got != 0 || sum.CounterResets != 0 {
		t.Errorf("prompt tokens %v resets %d, want 0 and 0", got, sum.CounterResets)
	}
}

// Triton with the TRT-LLM ensemble (preprocessing → tensorrt_llm →
// postprocessing), half the requests rejected at the ensemble. The queue
// and request duration counters grow only on successes, so the mean is
// over nv_inference_request_success: 1 s, not 0.5 s (over success +
// failure), nor 0.303 s (summed over the composing models too).
func TestTritonEnsembleMeansOverTheTargetModel(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/triton-ensemble-before.prom")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseExpositionWith(strings.NewReader(string(b)), ParseOptions{ServerModel: "ensemble"})
	if err != nil {
		t.Fatal(err)
	}
	if s.ServerModel != "ensemble" || s.ServerModelNote != "" {
		t.Errorf("server model %q note %q", s.ServerModel, s.ServerModelNote)
	}
	if m, ok := s.QueueDelay.Mean(); !ok || !near(m, 1) || s.QueueDelay.Count != 100 {
		t.Errorf("queue mean %v over %d, want 1 s over 100", m, s.QueueDelay.Count)
	}
	if m, ok := s.E2E.Mean(); !ok || !near(m, 4) {
		t.Errorf("request mean %v, want 4 s", m)
	}
	wantVal(t, "pending (the ensemble's only)", s.Waiting, 6)

	seq := fixtures(t, "triton-ensemble-before.prom", "triton-ensemble-after.prom")
	_, sum := runSequence(t, seq, Config{ServerModel: "ensemble"})
	if sum.ServerModel != "ensemble" || sum.ServerModelNote != "" {
		t.Errorf("summary server model %q note %q", sum.ServerModel, sum.ServerModelNote)
	}
	q := sum.QueueDelay
	if q == nil || q.Count != 100 || q.MeanMs == nil || !near(*q.MeanMs, 1000) || q.Method != MethodMeanOnly {
		t.Errorf("summary queue %+v", q)
	}
	if e := sum.ServerE2E; e == nil || e.MeanMs == nil || !near(*e.MeanMs, 4000) {
		t.Errorf("summary e2e %+v", e)
	}
	if sum.Waiting == nil || sum.Waiting.Max != 6 {
		t.Errorf("summary waiting %+v", sum.Waiting)
	}

	// Not named: four models loaded, summed, and the summary says so.
	_, sum = runSequence(t, fixtures(t, "triton-ensemble-before.prom", "triton-ensemble-after.prom"), Config{})
	if sum.ServerModel != "" || !strings.Contains(sum.ServerModelNote, "ensemble, postprocessing, preprocessing, tensorrt_llm") ||
		!strings.Contains(sum.ServerModelNote, "--server-model") {
		t.Errorf("unnamed: server model %q note %q", sum.ServerModel, sum.ServerModelNote)
	}
}

// SGLang --dp 2 --tp 2 --enable-metrics-for-all-schedulers: every TP rank
// exports the same scheduler series; tp_rank 0 of each dp_rank is read,
// not 2× the requests.
func TestSGLangOneTPRankPerDPRank(t *testing.T) {
	t.Parallel()
	s := parseFile(t, "sglang-dp2-tp2.prom")
	wantVal(t, "running", s.Running, 16)
	wantVal(t, "waiting", s.Waiting, 6)
	wantVal(t, "kv usage", s.KVUsage, 0.5)
	if q := s.QueueDelay; q == nil || q.Count != 80 || !near(q.Sum, 14) {
		t.Fatalf("queue %+v, want 80 requests, 14 s", q)
	}
	wantQuantile(t, "queue p50", s.QueueDelay, 0.5, 0.1*33/43) // rank 40 of 80: 7 at le 0, 50 at le 0.1
	wantVal(t, "prompt tokens", s.PromptTokens, 8000)
}

// A Triton model unloaded between two readings (its series disappear)
// adds nothing further; the others' increases stand. Summed, the
// vanished model's counts would be taken off the others'.
func TestTritonModelUnloaded(t *testing.T) {
	t.Parallel()
	seq := fixtures(t, "triton-ensemble-before.prom", "triton-ensemble-after.prom")
	var kept []string
	for _, line := range strings.Split(seq.texts[1], "\n") {
		if !strings.Contains(line, `model="postprocessing"`) {
			kept = append(kept, line)
		}
	}
	seq.texts[1] = strings.Join(kept, "\n")
	_, sum := runSequence(t, seq, Config{})
	// ensemble, preprocessing and tensorrt_llm: +100 successes each.
	if q := sum.QueueDelay; q == nil || q.Count != 300 || q.MeanMs == nil || !near(*q.MeanMs, 1000*(100+1+50)/300.0) {
		t.Errorf("queue %+v, want 300 requests, mean %v ms", q, 1000*(100+1+50)/300.0)
	}
	if sum.CounterResets != 0 {
		t.Errorf("counter resets %d", sum.CounterResets)
	}
}
