package e2e

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// runKServe drives the real runner and the KServe gRPC client against a
// simulator's gRPC service.
func runKServe(t *testing.T, srv *simtest.GRPCServer, opts loadgen.Options, maxTokens int, stream bool, api string) ([]*loadgen.Record, loadgen.Info) {
	t.Helper()
	c, err := protocol.New(protocol.Target{URL: "grpc://" + srv.GRPCAddr, API: api, Model: srv.Config().Model,
		Stream: stream, MaxTokens: maxTokens, Connections: 4})
	if api != kserve.APIGRPC {
		c, err = protocol.New(protocol.Target{URL: srv.URL, API: api, Model: srv.Config().Model, Stream: stream, MaxTokens: maxTokens})
	}
	if err != nil {
		t.Fatal(err)
	}
	if cl, ok := c.(interface{ Close() error }); ok {
		defer cl.Close()
	}
	if cl, ok := c.(interface{ CloseIdleConnections() }); ok {
		defer cl.CloseIdleConnections()
	}
	if err := c.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
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
	info, err := r.Run(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	recs := <-done
	sort.Slice(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	return recs, info
}

// TestAccuracyKServeGRPC is TestAccuracyAgainstServerTruth for the gRPC
// path: streamed (ModelStreamInfer) at concurrency 1, 64 and 512, and
// unstreamed (ModelInfer: TTFT = E2E, no ITL) at 1 and 64, and Triton's
// HTTP generate_stream, TGI's /generate_stream and Ollama's /api/chat at
// 64, tailgate's p50
// and p99 must agree with the simulator's own record within 2 ms / 3%,
// the truth again running from the client's intended start to the
// server's send.
func TestAccuracyKServeGRPC(t *testing.T) {
	if raceEnabled {
		t.Skip("timing accuracy is checked without -race (make test runs e2e again without it)")
	}
	const tokens = 12
	for _, tc := range []struct {
		concurrency, requests int
		stream                bool
		api                   string
	}{{1, 30, true, kserve.APIGRPC}, {64, 320, true, kserve.APIGRPC}, {512, 1536, true, kserve.APIGRPC},
		{1, 30, false, kserve.APIGRPC}, {64, 320, false, kserve.APIGRPC},
		{64, 320, true, kserve.APIGenerate}, {64, 320, true, tgi.API}, {64, 320, true, ollama.API}} {
		t.Run(fmt.Sprintf("%s/c%d/stream=%v", tc.api, tc.concurrency, tc.stream), func(t *testing.T) {
			var bad []string
			for attempt := 1; attempt <= 5; attempt++ {
				if bad = measureKServe(t, tc.concurrency, tc.requests, tokens, tc.stream, tc.api); len(bad) == 0 {
					return
				}
				t.Logf("attempt %d disagrees with the server: %s", attempt, strings.Join(bad, "; "))
			}
			for _, b := range bad {
				t.Error(b)
			}
		})
	}
}

func measureKServe(t *testing.T, concurrency, requests, tokens int, stream bool, api string) []string {
	t.Helper()
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.Jitter = 60*time.Millisecond, 20*time.Millisecond, 15*time.Millisecond
	cfg.TruthLimit = requests + 10
	srv := simtest.StartGRPC(t, cfg)
	rd0, _ := runDelay()
	w0 := time.Now()
	recs, info := runKServe(t, srv, loadgen.Options{Closed: true, Requests: requests, WarmupRequests: concurrency,
		Stages: []loadgen.Stage{{Concurrency: concurrency, Duration: time.Minute}}}, tokens, stream, api)
	rd1, _ := runDelay()
	t.Logf("c%d: threads waited %v on the OS run queues over %v", concurrency, (rd1 - rd0).Round(time.Millisecond), time.Since(w0).Round(time.Millisecond))
	if len(recs) != requests {
		t.Fatalf("%d records, want %d", len(recs), requests)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	truth := map[string]sim.Truth{}
	for _, tr := range srv.Truth() {
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
			// One response at the end: its first token is its end.
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
	metrics := []struct {
		name            string
		measured, truth []float64
	}{{"ttft", mTTFT, tTTFT}, {"e2e", mE2E, tE2E}}
	if stream {
		metrics = append(metrics, struct {
			name            string
			measured, truth []float64
		}{"itl", mITL, tITL})
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
