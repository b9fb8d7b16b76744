package e2e

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
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
	return drive(t, ctx, c, opts)
}

// drive runs the real runner with c and returns the finalized records in
// sequence order, with the runner's Info.
func drive(t *testing.T, ctx context.Context, c loadgen.Client, opts loadgen.Options) ([]*loadgen.Record, loadgen.Info) {
	t.Helper()
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

// TestAccuracyAgainstServerTruth: with the simulator injecting known TTFT
// and inter-chunk delays (jittered, so the distributions have tails),
// tailgate's TTFT, ITL and E2E are paired request by request with what the
// server itself recorded, at concurrency 1, 64 and 512 (compareWithTruth):
// no measurement precedes the server's send, and the median difference is
// within medianBoundMs. TTFT and E2E truth runs from the client's intended
// start to the server's flush (one process, one monotonic clock): a server
// slow to read the request (it shares two cores with 512 client streams)
// delays both alike, and only what the client adds is judged.
func TestAccuracyAgainstServerTruth(t *testing.T) {
	if raceEnabled {
		t.Skip("timing accuracy is checked without -race (make test runs e2e again without it)")
	}
	const tokens = 12
	for _, tc := range []struct{ concurrency, requests int }{{1, 30}, {64, 320}, {512, 1536}} {
		t.Run(fmt.Sprintf("c%d", tc.concurrency), func(t *testing.T) {
			measureAgainstTruth(t, tc.concurrency, tc.requests, tokens)
		})
	}
}

// accuracyConfig is the simulator of the accuracy tests: known TTFT and
// inter-chunk delays, jittered so the distributions have tails. Above 64
// streams every delay is stretched by streams/64, so n streams replay the
// timeline of 64 slowed n/64 times: the same events per second (3200
// chunks/s) and the same bursts, in a process that client and server
// share on (in CI) two cores. These tests judge what many streams in
// flight do to a measurement; how many events a second the process can
// take is bench/'s question. At 512 streams on 20 ms the reads queued
// for tens of ms on a busy two-core box: the process measured its own
// starvation.
func accuracyConfig(concurrency int) sim.Config {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 60*time.Millisecond, 20*time.Millisecond, 15*time.Millisecond
	if concurrency > 64 {
		stretch := func(d time.Duration) time.Duration { return d * time.Duration(concurrency) / 64 }
		cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = stretch(cfg.FixedTTFT), stretch(cfg.FixedITL), stretch(cfg.Jitter)
	}
	return cfg
}

// measureAgainstTruth runs requests at the given concurrency against a
// simulator with known, jittered delays and pairs tailgate's TTFT, ITL and
// E2E with the server's own record of them.
func measureAgainstTruth(t *testing.T, concurrency, requests, tokens int) {
	t.Helper()
	tc := struct{ concurrency, requests int }{concurrency, requests}
	cfg := accuracyConfig(concurrency)
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
	// A handler records its end after the client has read it: wait for
	// every handler, not a while.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	compareWithTruth(t, recs, info, srv.Truth(), tokens, tc.concurrency, true)
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

// causalSlack is how far below the server's instant a measurement may read
// and still be causal: the metric table truncates both the intended start
// and the measured instant to the microsecond (TruncMicros) before it
// subtracts, so a figure can sit up to 1 µs below the exact difference of
// the two monotonic readings. Nothing else separates them: client and
// server read the same process's monotonic clock (ns resolution on Linux).
const causalSlack = time.Microsecond

// medianBoundMs bounds the median, over requests, of tailgate's figure
// minus the server's: what the client typically adds by reading a chunk
// after the server flushed it. It is the absolute part of the accuracy
// claim (2 ms; at these 60 ms TTFTs 3% would be 1.8 ms). A median moves
// only when most requests move, so a burst of CPU starvation on a shared
// two-core box (client and server in one process) widens the tail but
// not this; a measurement error (a missed chunk, a stamp taken after
// parsing a batch, a wrong start) shifts every request and the median
// with them.
const medianBoundMs = 2.0

// paired is one metric's per-request differences, tailgate − server.
type paired struct {
	name  string
	diffs []float64 // ms
	// causal: every difference must be ≥ −causalSlack (the client cannot
	// read a chunk before the server sent it). ITL gaps are not: a gap
	// after a late read is short.
	causal  bool
	broken  int     // differences below −causalSlack
	worstMs float64 // the most negative difference
	worstAt string
}

// add pairs one measurement with the server's instants, as durations from
// the same start: lower, before which no client could have seen it, for
// causality; truth, the server's own figure, for the median.
func (p *paired) add(id string, measured, lower, truth time.Duration) {
	p.diffs = append(p.diffs, float64(measured-truth)/float64(time.Millisecond))
	if d := measured - lower; p.causal && d < -causalSlack {
		p.broken++
		if ms := float64(d) / float64(time.Millisecond); p.broken == 1 || ms < p.worstMs {
			p.worstMs, p.worstAt = ms, id
		}
	}
}

// compareWithTruth pairs every measured request with the simulator's
// record of the same request (by id: tailgate sends its sequence number as
// X-Request-Id, or as the KServe request id) and fails t where tailgate's
// TTFT, E2E or (streamed) ITL breaks causality for any request or where the
// median difference exceeds medianBoundMs. Both clocks are this process's
// monotonic clock, so TTFT and E2E truth runs from the client's intended
// start to the server's send of the first and last chunk: the client can
// only add the time it takes to read them. An unstreamed answer is one
// response at the end: its first token is its end, and it has no ITL.
func compareWithTruth(t *testing.T, recs []*loadgen.Record, info loadgen.Info, truths []sim.Truth, tokens, concurrency int, stream bool) {
	t.Helper()
	truth := map[string]sim.Truth{}
	for _, tr := range truths {
		truth[tr.ID] = tr
	}
	ttft := &paired{name: "ttft", causal: true}
	e2e := &paired{name: "e2e", causal: true}
	itl := &paired{name: "itl"}
	for _, r := range recs {
		if !r.OK() {
			t.Fatalf("request %d failed: %s %s", r.Seq, r.ErrorKind, r.Error)
		}
		if r.Warmup {
			continue
		}
		id := strconv.FormatInt(r.Seq, 10)
		tr, ok := truth[id]
		if !ok {
			t.Fatalf("no server truth for request %d", r.Seq)
		}
		if r.OutputTokens != tokens || stream && len(r.Chunks) != len(tr.Chunks) || r.Unstreamed == stream || tr.End.IsZero() {
			t.Fatalf("request %d: %d tokens in %d chunks (unstreamed %v), server sent %d chunks (ended %v)", r.Seq, r.OutputTokens, len(r.Chunks), r.Unstreamed, len(tr.Chunks), !tr.End.IsZero())
		}
		start := info.Started.Add(r.Intended)
		m, _ := r.TTFT()
		if !stream {
			// The server records End as its handler returns the
			// answer, before the transport writes it: causal as it is.
			end := tr.End.Sub(start)
			ttft.add(id, m, end, end)
			e2e.add(id, r.E2E(), end, end)
			continue
		}
		// A content chunk's Began precedes its write; its At follows
		// the write's return (which a starved server goroutine reaches
		// late), and End follows the [DONE] after the last chunk.
		first, last := tr.Chunks[0], tr.Chunks[len(tr.Chunks)-1]
		ttft.add(id, m, first.Began.Sub(start), first.At.Sub(start))
		e2e.add(id, r.E2E(), last.Began.Sub(start), tr.End.Sub(start))
		i := 1
		r.EachITL(func(per time.Duration, n int) {
			gap := tr.Chunks[i].At.Sub(tr.Chunks[i-1].At) / time.Duration(tr.Chunks[i].Tokens)
			itl.add(id, per, 0, gap)
			i++
		})
	}
	metrics := []*paired{ttft, e2e}
	if stream {
		metrics = append(metrics, itl)
	}
	for _, p := range metrics {
		med := quantile(p.diffs, 0.5)
		t.Logf("c%d %s, tailgate − server over %d: median %+.3f ms, min %+.3f, p99 %+.3f, max %+.3f", concurrency, p.name, len(p.diffs),
			med, quantile(p.diffs, 0), quantile(p.diffs, 0.99), quantile(p.diffs, 1))
		if p.broken > 0 {
			t.Errorf("c%d %s: %d of %d measurements precede the server's send by more than %v (worst %.3f ms, request %s): not causal",
				concurrency, p.name, p.broken, len(p.diffs), causalSlack, p.worstMs, p.worstAt)
		}
		if math.Abs(med) > medianBoundMs {
			t.Errorf("c%d %s: median tailgate − server %+.3f ms over %d: beyond ±%v ms", concurrency, p.name, med, len(p.diffs), medianBoundMs)
		}
	}
}

// TestPairedCausality: the paired check flags a measurement that precedes
// the server's send by more than causalSlack, and only that.
func TestPairedCausality(t *testing.T) {
	p := &paired{name: "ttft", causal: true}
	p.add("1", 10*time.Millisecond, 10*time.Millisecond+causalSlack, 10*time.Millisecond) // truncation: allowed
	p.add("2", 12*time.Millisecond, 10*time.Millisecond, 11*time.Millisecond)
	if p.broken != 0 {
		t.Fatalf("%d broken, want 0", p.broken)
	}
	p.add("3", 9*time.Millisecond, 10*time.Millisecond, 10*time.Millisecond)
	if p.broken != 1 || p.worstAt != "3" || p.worstMs != -1 {
		t.Fatalf("broken %d, worst %v ms at %q: want 1, -1 ms at 3", p.broken, p.worstMs, p.worstAt)
	}
	if got := quantile(p.diffs, 0.5); got != 0 {
		t.Errorf("median difference %v ms, want 0 (diffs %v)", got, p.diffs)
	}
}
