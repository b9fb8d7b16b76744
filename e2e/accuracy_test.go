package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// run drives the real runner and OpenAI client against srv and returns
// the finalized records in sequence order.
func run(t *testing.T, ctx context.Context, url string, opts loadgen.Options, maxTokens int) []*loadgen.Record {
	t.Helper()
	recs, _ := runInfo(t, ctx, url, opts, maxTokens)
	return recs
}

// runInfo is run, with the runner's Info.
func runInfo(t *testing.T, ctx context.Context, url string, opts loadgen.Options, maxTokens int) ([]*loadgen.Record, loadgen.Info) {
	t.Helper()
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: url}, API: openai.APIChat, Model: "sim", MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	r, err := loadgen.NewRunner(c, &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hello there, simulator"}}, opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 8192)
	done := make(chan []*loadgen.Record)
	go func() {
		var recs []*loadgen.Record
		for rec := range out {
			recs = append(recs, rec)
		}
		done <- recs
	}()
	info, err := r.Run(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	recs := <-done
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs, info
}

// quantile is the exact nearest-rank quantile (0–1) of xs.
func quantile(xs []float64, q float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// agree reports whether measured is within 2 ms or 3% (whichever is
// larger) of truth — the accuracy bound.
func agree(measured, truth float64) bool {
	return math.Abs(measured-truth) <= math.Max(2, 0.03*truth)
}

// TestAccuracyAgainstServerTruth: with the simulator injecting known TTFT
// and inter-chunk delays (jittered, so the distributions have tails),
// tailgate's p50 and p99 TTFT, ITL and E2E must agree with what the server
// itself recorded, at concurrency 1, 64 and 512. TTFT and E2E truth runs
// from the client's intended start to the server's flush (one process,
// one monotonic clock): a server slow to read the request (it shares two
// cores with 512 client streams) delays both alike, and only what the
// client adds is judged.
func TestAccuracyAgainstServerTruth(t *testing.T) {
	if raceEnabled {
		t.Skip("timing accuracy is checked without -race (make test runs e2e again without it)")
	}
	const tokens = 12
	for _, tc := range []struct{ concurrency, requests int }{{1, 30}, {64, 320}, {512, 1536}} {
		t.Run(fmt.Sprintf("c%d", tc.concurrency), func(t *testing.T) {
			// With two CPU hogs running, one c512 attempt in three
			// disagreed: see retryAgainstTruth.
			retryAgainstTruth(t, func() []string { return measureAgainstTruth(t, tc.concurrency, tc.requests, tokens) })
		})
	}
}

// measureAgainstTruth runs requests at the given concurrency against a
// simulator with known, jittered delays and returns how tailgate's p50 and
// p99 TTFT, ITL and E2E disagree with the server's own record of them.
func measureAgainstTruth(t *testing.T, concurrency, requests, tokens int) []string {
	t.Helper()
	tc := struct{ concurrency, requests int }{concurrency, requests}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 60*time.Millisecond, 20*time.Millisecond, 15*time.Millisecond
	cfg.TruthLimit = tc.requests + 10
	srv := simtest.Start(t, cfg)
	waited := osWait(t, concurrency)
	// The first request of each worker opens its connection; those
	// are warm-up, so the comparison is of measurement, not of TCP
	// connection setup (which the server cannot see).
	recs, info := runInfo(t, context.Background(), srv.URL, loadgen.Options{Closed: true, Requests: tc.requests,
		WarmupRequests: tc.concurrency,
		Stages:         []loadgen.Stage{{Concurrency: tc.concurrency, Duration: time.Minute}}}, tokens)
	waited()
	if len(recs) != tc.requests {
		t.Fatalf("%d records, want %d", len(recs), tc.requests)
	}
	return compareWithTruth(t, recs, info, srv.Truth(), tokens, tc.concurrency, true)
}

// retryAgainstTruth runs measure until it finds no disagreement, five
// times at most; the last attempt's disagreements fail t. Another process
// taking both cores for a few ms delays the client's reads of a burst of
// chunks by 5–10 ms; such a burst does not repeat at will, a measurement
// error does.
func retryAgainstTruth(t *testing.T, measure func() []string) {
	t.Helper()
	var bad []string
	for attempt := 1; attempt <= 5; attempt++ {
		if bad = measure(); len(bad) == 0 {
			return
		}
		t.Logf("attempt %d disagrees with the server: %s", attempt, strings.Join(bad, "; "))
	}
	for _, b := range bad {
		t.Error(b)
	}
}

// osWait starts timing how long the operating system kept this process's
// threads waiting; the returned func logs it, for whoever reads a
// disagreement: other processes on the machine (builds, tests) cause it,
// not the client.
func osWait(t *testing.T, concurrency int) func() {
	rd0, _ := runDelay()
	w0 := time.Now()
	return func() {
		rd1, _ := runDelay()
		t.Logf("c%d: threads waited %v on the OS run queues over %v", concurrency, (rd1 - rd0).Round(time.Millisecond), time.Since(w0).Round(time.Millisecond))
	}
}

// compareWithTruth sets tailgate's p50 and p99 TTFT, E2E and (streamed)
// ITL beside the simulator's record of the same requests and returns where
// they disagree beyond 2 ms / 3%. Both clocks are this process's monotonic
// clock, so TTFT and E2E truth runs from the client's intended start to
// the server's flush of the first and last chunk: the client can add only
// the time it takes to read them. An unstreamed answer is one response at
// the end: its first token is its end, and it has no ITL.
func compareWithTruth(t *testing.T, recs []*loadgen.Record, info loadgen.Info, truths []sim.Truth, tokens, concurrency int, stream bool) []string {
	t.Helper()
	truth := map[string]sim.Truth{}
	for _, tr := range truths {
		truth[tr.ID] = tr
	}
	var mTTFT, tTTFT, mITL, tITL, mE2E, tE2E []float64
	msf := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	for _, r := range recs {
		if !r.OK() {
			t.Fatalf("request %d failed: %s %s", r.Seq, r.ErrorKind, r.Error)
		}
		if r.Warmup {
			continue
		}
		tr, ok := truth[strconv.FormatInt(r.Seq, 10)]
		if !ok {
			t.Fatalf("no server truth for request %d", r.Seq)
		}
		if r.OutputTokens != tokens || stream && len(r.Chunks) != len(tr.Chunks) || r.Unstreamed == stream {
			t.Fatalf("request %d: %d tokens in %d chunks (unstreamed %v), server sent %d chunks", r.Seq, r.OutputTokens, len(r.Chunks), r.Unstreamed, len(tr.Chunks))
		}
		start := info.Started.Add(r.Intended)
		ttft, _ := r.TTFT()
		mTTFT = append(mTTFT, msf(ttft))
		mE2E = append(mE2E, msf(r.E2E()))
		tE2E = append(tE2E, msf(tr.End.Sub(start)))
		if !stream {
			tTTFT = append(tTTFT, msf(tr.End.Sub(start)))
			continue
		}
		tTTFT = append(tTTFT, msf(tr.Chunks[0].At.Sub(start)))
		r.EachITL(func(per time.Duration, n int) {
			for range n {
				mITL = append(mITL, msf(per))
			}
		})
		for i := 1; i < len(tr.Chunks); i++ {
			gap := tr.Chunks[i].At.Sub(tr.Chunks[i-1].At) / time.Duration(tr.Chunks[i].Tokens)
			for range tr.Chunks[i].Tokens {
				tITL = append(tITL, msf(gap))
			}
		}
	}
	type metric struct {
		name            string
		measured, truth []float64
	}
	metrics := []metric{{"ttft", mTTFT, tTTFT}, {"e2e", mE2E, tE2E}}
	if stream {
		metrics = append(metrics, metric{"itl", mITL, tITL})
	}
	var bad []string
	for _, m := range metrics {
		for _, q := range []float64{0.5, 0.99} {
			got, want := quantile(m.measured, q), quantile(m.truth, q)
			t.Logf("%s p%v: tailgate %.2f ms, server %.2f ms", m.name, q*100, got, want)
			if !agree(got, want) {
				bad = append(bad, fmt.Sprintf("c%d %s p%v: tailgate %.2f ms, server truth %.2f ms: beyond 2 ms / 3%%", concurrency, m.name, q*100, got, want))
			}
		}
	}
	return bad
}
