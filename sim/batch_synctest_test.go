package sim

import (
	"context"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// engineRun is one request as the batching engine served it, in offsets
// from its arrival.
type engineRun struct {
	queue, ttft time.Duration   // admission; first token
	chunks      []time.Duration // each time the engine made tokens for it
}

// runEngine sends requests of prompt and max tokens through the batching
// engine at the given arrival offsets, on synctest's fake clock (every
// instant exact, whatever the machine's load), and returns them in arrival
// order. atArrival, when set, is called at each arrival, just after the
// request is submitted and the engine has taken it in; done, when set,
// once every request has finished.
func runEngine(t *testing.T, cfg Config, arrivals []time.Duration, prompt, max int, atArrival func(s *Server, i int), done func(s *Server)) []engineRun {
	t.Helper()
	runs := make([]engineRun, len(arrivals))
	synctest.Test(t, func(t *testing.T) {
		cfg.Mode = ModeBatch
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		start := time.Now()
		var wg sync.WaitGroup
		for i, at := range arrivals {
			time.Sleep(time.Until(start.Add(at))) // the arrival schedule under test
			arrived := time.Now()
			wg.Add(1)
			go func() {
				defer wg.Done()
				run := &runs[i]
				made := 0
				ok := s.runOnEngine(context.Background(), engineJob{prompt: prompt, max: max, arrived: arrived},
					func(int) {}, func(at time.Time) { run.queue = at.Sub(arrived) },
					func(avail int) bool {
						if avail > made {
							made = avail
							run.chunks = append(run.chunks, time.Since(arrived))
						}
						return true
					})
				if !ok {
					t.Errorf("request %d did not finish", i)
				}
				run.ttft = run.chunks[0]
			}()
			if atArrival != nil {
				synctest.Wait() // the engine has taken it in
				atArrival(s, i)
			}
		}
		wg.Wait()
		if done != nil {
			synctest.Wait() // the engine's last step published
			done(s)
		}
	})
	return runs
}

func every(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = time.Duration(i) * d
	}
	return out
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
	// Each request holds a slot for 20 steps ≈ 85 ms: capacity ≈ 47 req/s.
	const maxTokens = 20

	t.Run("below", func(t *testing.T) {
		for i, r := range runEngine(t, cfg, every(10, 50*time.Millisecond), 1, maxTokens, nil, nil) { // 20 req/s
			// Admitted when the step in progress ends (at most a prefill
			// step, 5 ms), first token one prefill step (1 + 4 ms) later.
			if r.queue > 5*time.Millisecond || r.ttft != r.queue+5*time.Millisecond {
				t.Errorf("request %d: TTFT %v queue %v below capacity, want queue ≤ 5ms and TTFT queue + 5ms", i, r.ttft, r.queue)
			}
		}
	})

	t.Run("above", func(t *testing.T) {
		maxWaiting := 0
		var histCount uint64
		var histSum float64
		waitingAfter := -1
		runs := runEngine(t, cfg, every(40, 5*time.Millisecond), 1, maxTokens, func(s *Server, _ int) { // 200 req/s
			maxWaiting = max(maxWaiting, s.waiting())
		}, func(s *Server) {
			waitingAfter = s.waiting()
			families, err := s.metrics.reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range families {
				if f.GetName() == "vllm:request_queue_time_seconds" {
					h := f.GetMetric()[0].GetHistogram()
					histCount, histSum = h.GetSampleCount(), h.GetSampleSum()
				}
			}
		})
		if waitingAfter != 0 {
			t.Errorf("waiting %d after the run", waitingAfter)
		}
		if maxWaiting < 10 {
			t.Errorf("max waiting %d, want a queue", maxWaiting)
		}
		// The first four start at once; later ones wait for slots.
		for i := 0; i < 4; i++ {
			if runs[i].queue > 5*time.Millisecond || runs[i].ttft > 10*time.Millisecond {
				t.Errorf("request %d: queue %v TTFT %v, want immediate admission", i, runs[i].queue, runs[i].ttft)
			}
		}
		ttft := make([]time.Duration, len(runs))
		var queueSum time.Duration
		for i, r := range runs {
			ttft[i] = r.ttft
			queueSum += r.queue
			if i >= 4 && (r.queue <= 0 || r.ttft < r.queue) {
				t.Errorf("request %d: queue %v TTFT %v", i, r.queue, r.ttft)
			}
		}
		sort.Slice(ttft, func(i, j int) bool { return ttft[i] < ttft[j] })
		if p90 := ttft[len(ttft)*9/10]; p90 < 400*time.Millisecond {
			t.Errorf("p90 TTFT %v above capacity, want queueing (≥ 400 ms)", p90)
		}
		if last := runs[len(runs)-1].ttft; last < 5*runs[0].ttft {
			t.Errorf("TTFT did not grow: first %v last %v", runs[0].ttft, last)
		}
		if queueSum < 40*200*time.Millisecond {
			t.Errorf("queue time sum %v, want ≥ 8s", queueSum)
		}
		// The histogram holds what the requests saw.
		if d := histSum - queueSum.Seconds(); histCount != 40 || d < -1e-9 || d > 1e-9 {
			t.Errorf("queue time histogram: count %v sum %v, want 40 and %v", histCount, histSum, queueSum.Seconds())
		}
	})
}

// Decode time grows with the batch: a step is DecodeBase + DecodePerSeq ×
// running.
func TestBatchDecodeScales(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Slots = 16
	cfg.PrefillBase, cfg.PrefillPerToken = 0, 0
	cfg.DecodeBase = 2 * time.Millisecond
	cfg.DecodePerSeq = time.Millisecond
	for i, r := range runEngine(t, cfg, make([]time.Duration, 8), 1, 30, nil, nil) {
		// With 8 running, a step is 2 + 8 = 10 ms.
		if gap := (r.chunks[20] - r.chunks[10]) / 10; gap != 10*time.Millisecond {
			t.Errorf("request %d: mean ITL %v with 8 running, want 10 ms", i, gap)
		}
	}
}
