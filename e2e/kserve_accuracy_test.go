package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// runKServe drives the real runner and the KServe gRPC client against a
// simulator's gRPC service.
func runKServe(t *testing.T, srv *simtest.GRPCServer, opts loadgen.Options, maxTokens int, stream bool, api string) ([]*loadgen.Record, loadgen.Info) {
	t.Helper()
	c, err := protocol.New(protocol.Target{Endpoint: transport.Endpoint{URL: "grpc://" + srv.GRPCAddr}, API: api, Model: srv.Config().Model,
		Stream: stream, MaxTokens: maxTokens, Connections: 4})
	if api != kserve.APIGRPC {
		c, err = protocol.New(protocol.Target{Endpoint: transport.Endpoint{URL: srv.URL}, API: api, Model: srv.Config().Model, Stream: stream, MaxTokens: maxTokens})
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
	return drive(t, context.Background(), c, opts)
}

// TestAccuracyKServeGRPC is TestAccuracyAgainstServerTruth for the gRPC
// path: streamed (ModelStreamInfer) at concurrency 1, 64 and 512 and
// unstreamed (ModelInfer: TTFT = E2E, no ITL) at 1 and 64, and for
// Triton's HTTP generate_stream, TGI's /generate_stream and Ollama's
// /api/chat at 64. Every request is paired by id with the simulator's own
// record (the KServe request id, or X-Request-Id over HTTP; compareWithTruth),
// the truth again running from the client's intended start to the server's
// send.
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
			measureKServe(t, tc.concurrency, tc.requests, tokens, tc.stream, tc.api)
		})
	}
}

func measureKServe(t *testing.T, concurrency, requests, tokens int, stream bool, api string) {
	t.Helper()
	cfg := accuracyConfig(concurrency)
	cfg.TruthLimit = requests + 10
	srv := simtest.StartGRPC(t, cfg)
	waited := osWait(t, concurrency)
	recs, info := runKServe(t, srv, loadgen.Options{Closed: true, Requests: requests, WarmupRequests: concurrency,
		Stages: []loadgen.Stage{{Concurrency: concurrency, Duration: time.Minute}}}, tokens, stream, api)
	waited()
	if len(recs) != requests {
		t.Fatalf("%d records, want %d", len(recs), requests)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	compareWithTruth(t, recs, info, srv.Truth(), tokens, concurrency, stream)
}
