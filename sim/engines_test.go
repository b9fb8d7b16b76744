package sim

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// Two data-parallel engines: requests are dealt round robin, each engine's
// vllm:* series carry its engine label, and RestartEngine starts one
// engine's counters again at zero while the other's keep theirs.
func TestTwoEnginesAndARestart(t *testing.T) {
	cfg := fastBatch()
	cfg.Engines = 2
	r := startSim(t, cfg)
	c := testClient(t)
	ctx := context.Background()
	for range 4 {
		if res := do(ctx, c, r.URL, "/v1/chat/completions", chatBody("hi", 5, true, true), nil); res.err != nil || res.status != 200 {
			t.Fatalf("request: %+v", res)
		}
	}
	waitIdle(t, r.Server)
	text := scrape(t, c, r.URL)
	for _, e := range []string{`engine="0"`, `engine="1"`} {
		if v, ok := metricValue(t, text, "vllm:generation_tokens_total", e); !ok || v != 10 {
			t.Errorf("%s generation tokens %v %v, want 10", e, v, ok)
		}
		if v, ok := metricValue(t, text, "vllm:request_queue_time_seconds_count", e); !ok || v != 2 {
			t.Errorf("%s queue count %v, want 2", e, v)
		}
		if _, ok := metricValue(t, text, "vllm:num_requests_running", e); !ok {
			t.Errorf("%s: no running gauge", e)
		}
	}

	// The restart waits for a scrape that begins after engine 1 is idle.
	done := make(chan error, 1)
	go func() { done <- r.RestartEngine(ctx, 1) }()
	deadline := time.Now().Add(5 * time.Second)
	for {
		scrape(t, c, r.URL)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("restart did not finish")
			}
			continue
		}
		break
	}
	if res := do(ctx, c, r.URL, "/v1/chat/completions", chatBody("hi", 3, true, true), nil); res.err != nil || res.status != 200 {
		t.Fatalf("request after restart: %+v", res)
	}
	waitIdle(t, r.Server)
	text = scrape(t, c, r.URL)
	e0, _ := metricValue(t, text, "vllm:generation_tokens_total", `engine="0"`)
	e1, _ := metricValue(t, text, "vllm:generation_tokens_total", `engine="1"`)
	if e0+e1 != 13 || (e1 != 0 && e1 != 3) || (e0 != 10 && e0 != 13) {
		t.Errorf("after the restart: engine 0 %v, engine 1 %v tokens", e0, e1)
	}
	if !strings.Contains(text, `vllm:request_queue_time_seconds_count{engine="1"`) {
		t.Errorf("engine 1's queue series missing after its restart:\n%s", text)
	}

	if err := r.RestartEngine(ctx, 2); !errors.Is(err, ErrRestart) {
		t.Errorf("restart of a missing engine: %v", err)
	}
	one := startSim(t, fastBatch())
	if err := one.RestartEngine(ctx, 0); !errors.Is(err, ErrRestart) {
		t.Errorf("restart with one engine: %v", err)
	}
	if _, err := New(Config{Engines: 2, Metrics: MetricsLlamaCpp}); err == nil {
		t.Error("two engines with llama.cpp metrics accepted")
	}
}
