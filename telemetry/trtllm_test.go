package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Triton with the TensorRT-LLM backend: running, queued and KV blocks come
// from the in-flight batcher's nv_trt_llm_* gauges; Triton's queue time is
// its own scheduler's, and the sample says so.
func TestParseTritonTRTLLM(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("testdata/triton-trtllm.prom")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseExpositionWith(strings.NewReader(string(b)), ParseOptions{ServerModel: "ensemble"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Family != "triton+trtllm" {
		t.Errorf("family %q", s.Family)
	}
	wantVal(t, "running (scheduled)", s.Running, 24)
	wantVal(t, "waiting (the executor's queue)", s.Waiting, 7)
	wantVal(t, "kv blocks used", s.KVBlocksUsed, 4680)
	wantVal(t, "kv blocks max", s.KVBlocksMax, 6240)
	wantVal(t, "kv usage (used/max)", s.KVUsage, 0.75)
	if s.QueueDelayNote != QueueTritonScheduler || s.QueueDelayUnavailable != NoQueueMeanOnly {
		t.Errorf("queue note %q, unavailable %q", s.QueueDelayNote, s.QueueDelayUnavailable)
	}
	if m, ok := s.QueueDelay.Mean(); !ok || !near(m, 1) {
		t.Errorf("queue mean %v (the ensemble's)", m)
	}
}

// trtllm-serve answers /metrics with JSON and serves Prometheus text at
// /prometheus/metrics: the Run reads that, says so once, and counts no
// error.
func TestTRTLLMServePrometheusEndpoint(t *testing.T) {
	t.Parallel()
	read := func(n string) []byte {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	js, before, after := read("trtllm-serve-metrics.json"), read("trtllm-serve-before.prom"), read("trtllm-serve-after.prom")
	var jsonAsks, promAsks atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		jsonAsks.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Write(js)
	})
	mux.HandleFunc("/prometheus/metrics", func(w http.ResponseWriter, _ *http.Request) {
		if promAsks.Add(1) == 1 {
			w.Write(before)
		} else {
			w.Write(after)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: time.Hour}, nil)
	r.Snapshot()
	sum := r.Stop()
	if sum.Family != string(FamilyTRTLLM) || sum.ScrapeErrors != 0 || sum.Sources[0].Note != NoteTRTLLMServe {
		t.Errorf("family %q errors %d %q note %q", sum.Family, sum.ScrapeErrors, sum.Errors, sum.Sources[0].Note)
	}
	if n := jsonAsks.Load(); n != 1 {
		t.Errorf("/metrics asked %d times", n)
	}
	if *sum.PromptTokens != 2000 || *sum.GenerationTokens != 4000 || sum.QueueDelay == nil || sum.QueueDelay.Count != 20 {
		t.Errorf("tokens %v/%v queue %+v", *sum.PromptTokens, *sum.GenerationTokens, sum.QueueDelay)
	}
	if sum.Running == nil || sum.Running.Max != 13 || sum.KVBlocksMax == nil || sum.KVBlocksMax.Max != 6240 || sum.KVUsage.Max != 0.5 {
		t.Errorf("running %+v kv blocks %+v kv %+v", sum.Running, sum.KVBlocksMax, sum.KVUsage)
	}
}
