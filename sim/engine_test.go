package sim

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// A request needs prompt + max_tokens of KV: when two do not fit, the second
// waits for the first to finish.
func TestKVAdmission(t *testing.T) {
	cfg := fastBatch()
	cfg.KVTokens = 100
	r := startSim(t, cfg)
	c := testClient(t)
	prompt := strings.Repeat("y", 80) // 20 tokens; + 50 = 70 KV tokens each
	var wg sync.WaitGroup
	var usage float64
	var sawUsage sync.Once
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody(prompt, 50, true, false),
				map[string]string{"X-Request-Id": fmt.Sprintf("kv-%d", i)})
		}()
		if i == 0 {
			waitFor(t, r.Server, "the first admitted", func() bool { return r.running() == 1 })
			sawUsage.Do(func() {
				usage, _ = metricValue(t, scrape(t, c, r.URL), "vllm:kv_cache_usage_perc", "")
			})
		}
	}
	wg.Wait()
	waitIdle(t, r.Server)
	first, second := truthByID(t, r.Server, "kv-0"), truthByID(t, r.Server, "kv-1")
	if usage != 0.7 {
		t.Errorf("kv_cache_usage_perc %v with one 70-token request of 100", usage)
	}
	lastTok := first.Chunks[len(first.Chunks)-1].At
	// Admission happens at the engine's step end, a hair before the
	// handler's flush of the first request's last token.
	if second.Admitted.Before(lastTok.Add(-2 * time.Millisecond)) {
		t.Errorf("second admitted at +%v, before the first finished at +%v",
			second.Admitted.Sub(first.Arrived), lastTok.Sub(first.Arrived))
	}
	if second.QueueTime() < 60*time.Millisecond {
		t.Errorf("second queued only %v", second.QueueTime())
	}
}

// Cancelling a request frees its slot at once; cancelling a waiting one
// takes it off the queue.
func TestCancelFreesSlot(t *testing.T) {
	cfg := fastBatch()
	cfg.Slots = 1
	cfg.DecodeBase = 5 * time.Millisecond
	r := startSim(t, cfg)
	c := testClient(t)

	ctxA, cancelA := context.WithCancel(context.Background())
	defer cancelA()
	gotToken := make(chan struct{})
	doneA := make(chan result, 1)
	go func() {
		// 2000 tokens × 5 ms = 10 s if never cancelled
		doneA <- doSignal(ctxA, c, r.URL, "a", 2000, gotToken)
	}()
	select {
	case <-gotToken:
	case <-time.After(3 * time.Second):
		t.Fatal("no first token")
	}

	// B waits behind A; cancel it while queued.
	ctxB, cancelB := context.WithCancel(context.Background())
	go do(ctxB, c, r.URL, "/v1/chat/completions", chatBody("x", 5, true, false), map[string]string{"X-Request-Id": "b"})
	waitFor(t, r.Server, "B queued", func() bool { return r.waiting() == 1 })
	cancelB()
	waitFor(t, r.Server, "B off the queue", func() bool { return r.waiting() == 0 })

	cancelA()
	<-doneA
	waitFor(t, r.Server, "A's slot freed", func() bool { return r.running() == 0 })

	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("x", 2, true, false), map[string]string{"X-Request-Id": "c"})
	if res.readErr != nil {
		t.Fatal(res.readErr)
	}
	waitIdle(t, r.Server)
	if ttft, _ := truthByID(t, r.Server, "c").TTFT(); ttft > 100*time.Millisecond {
		t.Errorf("C TTFT %v after A was cancelled", ttft)
	}
	a := truthByID(t, r.Server, "a")
	if a.Outcome != "cancelled" || a.OutputTokens >= 2000 || a.End.IsZero() {
		t.Errorf("A truth %+v", a.Outcome)
	}
	if b := truthByID(t, r.Server, "b"); b.Outcome != "cancelled" || !b.Admitted.IsZero() {
		t.Errorf("B truth outcome %q admitted %v", b.Outcome, b.Admitted)
	}
	m := scrape(t, c, r.URL)
	if v, _ := metricValue(t, m, "vllm:request_success_total", `finished_reason="abort"`); v != 2 {
		t.Errorf("abort count %v", v)
	}
}

// waitFor waits for the server to reach a state, on its events (Await).
func waitFor(t *testing.T, s *Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
