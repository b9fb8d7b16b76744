package sim

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// openLoop sends n requests at a fixed interval (not waiting for answers)
// and returns them in order.
func openLoop(t *testing.T, r *Running, n int, every time.Duration, maxTokens int, prefix string) []result {
	t.Helper()
	c := testClient(t)
	res := make([]result, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n; i++ {
		// The client's pacing is the load under test, not a wait.
		time.Sleep(time.Until(start.Add(time.Duration(i) * every)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hello", maxTokens, true, false),
				map[string]string{"X-Request-Id": fmt.Sprintf("%s-%03d", prefix, i)})
		}()
	}
	wg.Wait()
	waitIdle(t, r.Server)
	return res
}

func truthTTFTs(t *testing.T, s *Server, prefix string) (ttft, queue []time.Duration) {
	for _, tr := range s.Truth() {
		if !strings.HasPrefix(tr.ID, prefix+"-") {
			continue
		}
		d, ok := tr.TTFT()
		if !ok {
			t.Fatalf("%s: no token", tr.ID)
		}
		ttft = append(ttft, d)
		queue = append(queue, tr.QueueTime())
	}
	return ttft, queue
}

// Above capacity the queue builds, queue time and TTFT grow; below it TTFT
// stays about one prefill step.
func TestBatchingCapacity(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Slots = 4
	cfg.PrefillBase = time.Millisecond
	cfg.PrefillPerToken = 0
	cfg.DecodeBase = 4 * time.Millisecond
	cfg.DecodePerSeq = 0
	// Each request holds a slot for ~20 steps ≈ 85 ms: capacity ≈ 47 req/s.
	const maxTokens = 20

	t.Run("below", func(t *testing.T) {
		r := startSim(t, cfg)
		openLoop(t, r, 10, 50*time.Millisecond, maxTokens, "below") // 20 req/s
		ttft, queue := truthTTFTs(t, r.Server, "below")
		for i := range ttft {
			// arrival waits ≤ one step (4 ms), then one prefill step (5 ms)
			if ttft[i] > 25*time.Millisecond || queue[i] > 15*time.Millisecond {
				t.Errorf("request %d: TTFT %v queue %v below capacity", i, ttft[i], queue[i])
			}
		}
	})

	t.Run("above", func(t *testing.T) {
		r := startSim(t, cfg)
		c := testClient(t)
		var maxWaiting atomic.Int64
		stop := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			for {
				select {
				case <-stop:
					return
				case <-time.After(5 * time.Millisecond):
				}
				if w := int64(r.waiting()); w > maxWaiting.Load() {
					maxWaiting.Store(w)
				}
			}
		}()
		openLoop(t, r, 40, 5*time.Millisecond, maxTokens, "above") // 200 req/s
		close(stop)
		<-sampled
		ttft, queue := truthTTFTs(t, r.Server, "above")
		if maxWaiting.Load() < 10 {
			t.Errorf("max waiting %d, want a queue", maxWaiting.Load())
		}
		// The first four start at once; later ones wait for slots.
		for i := 0; i < 4; i++ {
			if ttft[i] > 30*time.Millisecond {
				t.Errorf("request %d: TTFT %v, want immediate admission", i, ttft[i])
			}
		}
		sorted := append([]time.Duration(nil), ttft...)
		sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
		if p90 := sorted[len(sorted)*9/10]; p90 < 400*time.Millisecond {
			t.Errorf("p90 TTFT %v above capacity, want queueing (≥ 400 ms)", p90)
		}
		for i := 4; i < len(queue); i++ {
			if queue[i] <= 0 || ttft[i] < queue[i] {
				t.Errorf("request %d: queue %v TTFT %v", i, queue[i], ttft[i])
			}
		}
		if ttft[len(ttft)-1] < 5*ttft[0] {
			t.Errorf("TTFT did not grow: first %v last %v", ttft[0], ttft[len(ttft)-1])
		}
		m := scrape(t, c, r.URL)
		sum, _ := metricValue(t, m, "vllm:request_queue_time_seconds_sum", "")
		cnt, _ := metricValue(t, m, "vllm:request_queue_time_seconds_count", "")
		if cnt != 40 || sum < 40*0.2 {
			t.Errorf("queue time histogram: count %v sum %v", cnt, sum)
		}
		if w, _ := metricValue(t, m, "vllm:num_requests_waiting", ""); w != 0 {
			t.Errorf("waiting %v after the run", w)
		}
	})
}

// Decode time grows with the batch: DecodePerSeq × running.
func TestBatchDecodeScales(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Slots = 16
	cfg.PrefillBase, cfg.PrefillPerToken = 0, 0
	cfg.DecodeBase = 2 * time.Millisecond
	cfg.DecodePerSeq = time.Millisecond
	r := startSim(t, cfg)
	c := testClient(t)
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("x", 30, true, false),
				map[string]string{"X-Request-Id": fmt.Sprintf("dec-%d", i)})
		}()
	}
	wg.Wait()
	waitIdle(t, r.Server)
	// With 8 running, a step is 2 + 8 = 10 ms; look at the middle of a stream.
	for _, tr := range r.Truth() {
		gap := tr.Chunks[20].At.Sub(tr.Chunks[10].At) / 10
		if gap < 8*time.Millisecond || gap > 14*time.Millisecond {
			t.Errorf("%s: mean ITL %v with 8 running, want ≈ 10 ms", tr.ID, gap)
		}
	}
}

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
