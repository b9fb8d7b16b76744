//go:build timing && !race

// Timing tests: held against the simulator's model or its clock, they run
// without the race detector (which slows client and simulator 5-10x, and
// they would measure it), from `make test-timing` (go test -tags timing).
//
// The exact schedule is held on a fake clock (TestRunOnTimerExact,
// TestRunOnTimerJitter). These tests hold what only the real clock shows:
// chunks are written no earlier than due and flushed as written, not
// buffered. A shared machine delays any single instant by tens of
// milliseconds, never makes one early, so each test holds the hard bound
// (never early, the client never before the server) on every chunk and the
// lateness only in the median, which one stall of the whole machine
// cannot move.

package sim

import (
	"context"
	"slices"
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
	var late, read, clientTTFT []time.Duration
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
		// Deadlines are absolute from admission: chunk k is due
		// ttft + k·itl after it however late the ones before it were.
		for k, ch := range tr.Chunks {
			due := tr.Admitted.Add(ttft + time.Duration(k)*itl)
			if ch.Began.Before(due) {
				t.Errorf("%s: chunk %d begun %v before its deadline", id, k, due.Sub(ch.Began))
			}
			if ce[k].at.Before(ch.Began) {
				t.Errorf("%s: chunk %d read by the client %v before the server began writing it", id, k, ch.Began.Sub(ce[k].at))
			}
			late = append(late, ch.Began.Sub(due))
			read = append(read, ce[k].at.Sub(ch.At))
		}
		d := ce[0].at.Sub(res.sent)
		if d < ttft {
			t.Errorf("%s: client TTFT %v, shorter than the configured %v", id, d, ttft)
		}
		clientTTFT = append(clientTTFT, d-ttft)
	}
	for _, m := range []struct {
		what string
		ds   []time.Duration
	}{{"chunk lateness (begun − due)", late}, {"client read − server flush", read}, {"client TTFT − configured", clientTTFT}} {
		med := median(m.ds)
		t.Logf("%s: median %v, max %v over %d", m.what, med, slices.Max(m.ds), len(m.ds))
		if med > slack {
			t.Errorf("%s: median %v, want within %v", m.what, med, slack)
		}
	}
}

func TestFixedJitter(t *testing.T) {
	const itl, jitter, n = 10 * time.Millisecond, 5 * time.Millisecond, 20
	cfg := fixedCfg(itl, itl)
	cfg.Jitter = jitter
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", n, true, false), map[string]string{"X-Request-Id": "j"})
	if res.readErr != nil {
		t.Fatal(res.readErr)
	}
	waitIdle(t, r.Server)
	tr := truthByID(t, r.Server, "j")
	if len(tr.Chunks) != n {
		t.Fatalf("truth has %d chunks, want %d", len(tr.Chunks), n)
	}
	// Each deadline is the one before plus itl ± jitter, so the k-th is at
	// least k·(itl − jitter) after admission: never early however the
	// machine ran.
	for k, ch := range tr.Chunks {
		if earliest := tr.Admitted.Add(time.Duration(k+1) * (itl - jitter)); ch.Began.Before(earliest) {
			t.Errorf("chunk %d begun %v after admission, earlier than %d·(itl − jitter)", k, ch.Began.Sub(tr.Admitted), k+1)
		}
	}
	var gaps []time.Duration
	distinct := map[time.Duration]bool{}
	for k := 1; k < len(tr.Chunks); k++ {
		gap := tr.Chunks[k].Began.Sub(tr.Chunks[k-1].Began)
		gaps = append(gaps, gap)
		distinct[gap.Round(time.Millisecond)] = true
	}
	// A stall lengthens one gap and shortens the next (absolute
	// deadlines), so the median gap stays inside itl ± jitter.
	if med := median(gaps); med < itl-jitter || med > itl+jitter {
		t.Errorf("median gap %v outside %v ± %v (gaps %v)", med, itl, jitter, gaps)
	}
	if len(distinct) < 3 {
		t.Errorf("gaps do not vary: %v", distinct)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
