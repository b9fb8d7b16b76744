//go:build timing && !race

// Timing tests: held against the simulator's model or its clock, they run
// without the race detector (which slows client and simulator 5-10x, and
// they would measure it), from `make test-timing` (go test -tags timing).

package sim

import (
	"context"
	"sync"
	"testing"
	"time"
)

// Fixed mode: the client's measurements match the configured delays and the
// server's truth, independent of concurrency.
func TestFixedDelays(t *testing.T) {
	const ttft, itl, n, streams = 40 * time.Millisecond, 15 * time.Millisecond, 6, 8
	r := startSim(t, fixedCfg(ttft, itl))
	c := testClient(t)
	var wg sync.WaitGroup
	results := make([]result, streams)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", n, true, true),
				map[string]string{"X-Request-Id": "fixed-" + string(rune('a'+i))})
		}()
	}
	wg.Wait()
	waitIdle(t, r.Server)
	const slack = 10 * time.Millisecond
	for i, res := range results {
		id := "fixed-" + string(rune('a'+i))
		ce := contentEvents(t, res.events)
		if len(ce) != n {
			t.Fatalf("%s: %d content events", id, len(ce))
		}
		tr := truthByID(t, r.Server, id)
		if len(tr.Chunks) != n {
			t.Fatalf("%s: truth has %d chunks", id, len(tr.Chunks))
		}
		got, _ := tr.TTFT()
		if got < ttft || got > ttft+slack {
			t.Errorf("%s: truth TTFT %v, want %v", id, got, ttft)
		}
		if d := ce[0].at.Sub(res.sent); d < ttft || d > ttft+slack {
			t.Errorf("%s: client TTFT %v, want %v", id, d, ttft)
		}
		for k := range ce {
			if diff := absDur(ce[k].at.Sub(tr.Chunks[k].At)); diff > slack {
				t.Errorf("%s: chunk %d client %v vs truth: %v apart", id, k, ce[k].at, diff)
			}
			if k > 0 {
				gap := tr.Chunks[k].At.Sub(tr.Chunks[k-1].At)
				// Deadlines are absolute, so a chunk flushed late (a busy
				// machine) is followed by a shorter gap: allow the slack
				// both ways; the span check below holds the average.
				if gap < itl-slack || gap > itl+slack {
					t.Errorf("%s: truth gap %d = %v, want %v", id, k, gap, itl)
				}
			}
		}
		// Absolute deadlines: the last chunk is due ttft + (n-1)·itl after
		// arrival however late the ones before it were, so the server
		// begins writing it at most a scheduling delay after that (held on
		// Began: At is after the write returned, which a busy machine
		// delays further).
		due := tr.Arrived.Add(ttft + (n-1)*itl)
		if late := tr.Chunks[n-1].Began.Sub(due); late < 0 || late > slack {
			t.Errorf("%s: last chunk begun %v after its deadline, want within [0, %v]", id, late, slack)
		}
	}
}

func TestFixedJitter(t *testing.T) {
	cfg := fixedCfg(10*time.Millisecond, 10*time.Millisecond)
	cfg.Jitter = 5 * time.Millisecond
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 20, true, false), map[string]string{"X-Request-Id": "j"})
	if res.readErr != nil {
		t.Fatal(res.readErr)
	}
	waitIdle(t, r.Server)
	tr := truthByID(t, r.Server, "j")
	distinct := map[time.Duration]bool{}
	for k := 1; k < len(tr.Chunks); k++ {
		gap := tr.Chunks[k].At.Sub(tr.Chunks[k-1].At)
		if gap < 4*time.Millisecond || gap > 25*time.Millisecond {
			t.Errorf("gap %d = %v outside 10ms ± 5ms (+ scheduling)", k, gap)
		}
		distinct[gap.Round(time.Millisecond)] = true
	}
	if len(distinct) < 3 {
		t.Errorf("gaps do not vary: %v", distinct)
	}
}
