package kserve_test

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func newClient(t *testing.T, srv *simtest.GRPCServer, stream bool, headers ...string) *kserve.Client {
	t.Helper()
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: "grpc://" + srv.GRPCAddr, Transport: transport.Config{Headers: headers}}, Model: srv.Config().Model,
		Stream: kserve.Bool(stream), MaxTokens: 8, Connections: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c
}

func do(t *testing.T, c *kserve.Client, seq int64, p prompts.Prompt, timeout time.Duration) *loadgen.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	rec := loadgen.NewRecord(time.Now())
	rec.Seq = seq
	c.Do(ctx, &p, rec)
	rec.Finalize()
	return rec
}

// waitIdle waits until the simulator has finished every request, so its
// truth has every End.
func waitIdle(t *testing.T, srv *simtest.GRPCServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
}

func fixed() sim.Config {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 20*time.Millisecond, 5*time.Millisecond
	return cfg
}

// A streamed answer: one chunk per response with text, each carrying the
// response's num_output_tokens, at the instants the server sent them.
func TestStreamAgainstSimulator(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c := newClient(t, srv, true)
	rec := do(t, c, 7, prompts.Prompt{Text: "hello there"}, 5*time.Second)
	if !rec.OK() {
		t.Fatalf("%s: %s", rec.ErrorKind, rec.Error)
	}
	if len(rec.Chunks) != 8 || rec.OutputTokens != 8 || rec.TokenSource != loadgen.TokensFromUsage ||
		rec.ChunkTokenSource != "server" || rec.InputTokens != 2 || rec.Unstreamed {
		t.Fatalf("record %+v", rec)
	}
	waitIdle(t, srv)
	var tr sim.Truth
	for _, x := range srv.Truth() {
		if x.ID == "7" {
			tr = x
		}
	}
	if tr.Path != sim.GRPCPathStream || len(tr.Chunks) != 8 || tr.Outcome != "ok" {
		t.Fatalf("truth %+v", tr)
	}
	epoch := rec.Epoch()
	// Every chunk is read no earlier than sent (the server stamps after Send
	// returns, so the reader may be a little quicker); the lateness is held
	// in the median only, which one stall of a busy machine (another
	// package's tests on the same cores) cannot move. e2e judges accuracy.
	var lags []time.Duration
	for i, ch := range rec.Chunks {
		lag := epoch.Add(ch.At).Sub(tr.Chunks[i].At)
		if lag < -time.Millisecond {
			t.Errorf("chunk %d read %v before the server sent it", i, -lag)
		}
		lags = append(lags, lag)
	}
	slices.Sort(lags)
	if med := lags[len(lags)/2]; med > 10*time.Millisecond {
		t.Errorf("chunks read a median %v after the server sent them (%v)", med, lags)
	}
	// No sooner than the model's 20 ms; how much later is the busy
	// machine's, and the chunks' pairing with the server's record holds it.
	if ttft, _ := rec.TTFT(); ttft < 20*time.Millisecond {
		t.Errorf("TTFT %v, want at least the model's 20 ms", ttft)
	}
}

// The record keeps the model the responses name (gen_ai.response.model),
// streamed and unary, and over the generate extension: the served name
// when the server answers as asked, another when it answers under an
// alias's target.
func TestResponseModel(t *testing.T) {
	for _, answer := range []string{"", "sim-llama-8b-fp8"} {
		cfg := fixed()
		cfg.AnswerModel = answer
		want := cmp.Or(answer, sim.DefaultConfig().Model)
		srv := simtest.StartGRPC(t, cfg)
		for _, stream := range []bool{true, false} {
			rec := do(t, newClient(t, srv, stream), 1, prompts.Prompt{Text: "hi"}, 5*time.Second)
			if !rec.OK() || rec.ResponseModel != want {
				t.Errorf("answer %q, stream %v: %s %q, response model %q, want %q", answer, stream, rec.ErrorKind, rec.Error, rec.ResponseModel, want)
			}
		}
		hs := simtest.Start(t, cfg)
		rec := doGenerate(t, newGenerate(t, hs.URL, hs.Config().Model, true), 1)
		if !rec.OK() || rec.ResponseModel != want {
			t.Errorf("generate, answer %q: %s %q, response model %q, want %q", answer, rec.ErrorKind, rec.Error, rec.ResponseModel, want)
		}
	}
}

func TestUnaryAgainstSimulator(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c := newClient(t, srv, false)
	p := prompts.Prompt{Text: "hello there"}
	p.FollowUp = func(string) *prompts.Prompt { return nil }
	rec := do(t, c, 1, p, 5*time.Second)
	if !rec.OK() {
		t.Fatalf("%s: %s", rec.ErrorKind, rec.Error)
	}
	if !rec.Unstreamed || len(rec.Chunks) != 1 || rec.OutputTokens != 8 || rec.Chunks[0].At != rec.End ||
		rec.Text != " the of and to in a is that" {
		t.Fatalf("record %+v", rec)
	}
	waitIdle(t, srv)
	if tr := srv.Truth()[0]; tr.Path != sim.GRPCPathInfer || tr.Stream || tr.Outcome != "ok" {
		t.Fatalf("truth %+v", tr)
	}
}

// Every status a server or gateway can end a request with gets its kind,
// and the code stays in Status.
func TestStatusKinds(t *testing.T) {
	srv := simtest.StartGRPC(t, sim.Config{FixedTTFT: time.Millisecond})
	for code := codes.Canceled; code <= codes.Unauthenticated; code++ {
		want := kserve.CodeKind(code)
		if code == codes.Canceled {
			want = loadgen.ErrServer // not our context: the server cancelled
		}
		for _, stream := range []bool{true, false} {
			c := newClient(t, srv, stream, sim.GRPCStatusHeader+": "+code.String())
			rec := do(t, c, int64(code), prompts.Prompt{Text: "hi"}, 5*time.Second)
			if rec.ErrorKind != want || rec.Status != int(code) || !strings.Contains(rec.Error, code.String()) {
				t.Errorf("%v stream=%v: %s (status %d) %q, want %s", code, stream, rec.ErrorKind, rec.Status, rec.Error, want)
			}
		}
	}
	for code, want := range map[codes.Code]loadgen.ErrorKind{
		codes.ResourceExhausted: loadgen.ErrRateLimited, codes.Unavailable: loadgen.ErrServer,
		codes.DeadlineExceeded: loadgen.ErrTimeout, codes.NotFound: loadgen.ErrClient,
		codes.Internal: loadgen.ErrServer, codes.Unauthenticated: loadgen.ErrClient,
	} {
		if got := kserve.CodeKind(code); got != want {
			t.Errorf("CodeKind(%v) = %s, want %s", code, got, want)
		}
	}
}

// The simulator's faults, over both RPCs.
func TestFaults(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	for _, tc := range []struct {
		fault  string
		stream bool
		kind   loadgen.ErrorKind
		chunks int
		msg    string
	}{
		{"truncate", true, loadgen.ErrStreamTruncated, 4, "without triton_final_response after 4 responses"},
		{"error_in_stream", true, loadgen.ErrStreamError, 4, "simulated engine failure"},
		{"malformed", true, loadgen.ErrProtocol, 4, "runs past the end"},
		{"http_429", true, loadgen.ErrRateLimited, 0, "ResourceExhausted"},
		{"http_503", true, loadgen.ErrServer, 0, "Unavailable"},
		{"http_429", false, loadgen.ErrRateLimited, 0, "ResourceExhausted"},
		{"error_in_stream", false, loadgen.ErrServer, 0, "Internal"},
		{"hang", true, loadgen.ErrTimeout, 0, "eadline"}, // ours, or grpc-go's DeadlineExceeded
		{"stall_mid=100ms", true, loadgen.ErrNone, 8, ""},
	} {
		c := newClient(t, srv, tc.stream, "X-Sim-Fault: "+tc.fault)
		rec := do(t, c, 1, prompts.Prompt{Text: "hi"}, time.Second)
		if rec.ErrorKind != tc.kind || len(rec.Chunks) != tc.chunks || !strings.Contains(rec.Error, tc.msg) {
			t.Errorf("%s stream=%v: %s %q with %d chunks, want %s with %d", tc.fault, tc.stream, rec.ErrorKind, rec.Error,
				len(rec.Chunks), tc.kind, tc.chunks)
		}
	}
}

func TestConnectFailure(t *testing.T) {
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: "127.0.0.1:1", Transport: transport.Config{DialTimeout: time.Second}}, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rec := do(t, c, 1, prompts.Prompt{Text: "hi"}, 3*time.Second)
	if rec.ErrorKind != loadgen.ErrConnect || rec.Status != int(codes.Unavailable) {
		t.Errorf("%s (%d) %q", rec.ErrorKind, rec.Status, rec.Error)
	}
	if err := c.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), "grpc://127.0.0.1:1 does not answer ServerLive") {
		t.Errorf("preflight: %v", err)
	}
}

// With no model given, a target that does not answer says so, as the
// HTTP protocols' discovery does: the refused dial and the target, not
// the protocol's lack of a model list, which would send the user to
// --model for a server that is down.
func TestDiscoverModelDeadTarget(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: "grpc://" + addr,
		Transport: transport.Config{APIKey: "sk-SECRET-1", DialTimeout: time.Second}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.DiscoverModel(context.Background())
	if err == nil || !strings.Contains(err.Error(), "grpc://"+addr+" does not answer ServerLive") ||
		!strings.Contains(err.Error(), "connection refused") || strings.Contains(err.Error(), "lists no models") ||
		strings.Contains(err.Error(), "SECRET") {
		t.Errorf("discover: %v", err)
	}
	var u *transport.Undiscovered
	if !errors.As(err, &u) {
		t.Errorf("discover: %T, want a *transport.Undiscovered", err)
	}
}

// A missing model fails the preflight, naming it, before any request.
func TestPreflightMissingModel(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: srv.GRPCAddr, Transport: transport.Config{APIKey: "sk-SECRET-1"}}, Model: "llama-70b"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	err = c.Preflight(context.Background())
	if err == nil || !strings.Contains(err.Error(), `model "llama-70b" is not ready`) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("preflight: %v", err)
	}
	if n := len(srv.Truth()); n != 0 {
		t.Errorf("%d inference requests before the run", n)
	}
	// No flag in the words: protocol.Check says which setting to give,
	// as each front end names it.
	if _, err := c.DiscoverModel(context.Background()); err == nil || !strings.Contains(err.Error(), "lists no models") ||
		strings.Contains(err.Error(), "--") {
		t.Errorf("discover: %v", err)
	}
	info := c.DescribeServer(context.Background())
	if info.Error != "" || info.Headers["server"] != "tailgate-sim" || info.URL != "grpc://"+srv.GRPCAddr {
		t.Errorf("describe: %+v", info)
	}
}

// Concurrent streams over a few connections all complete, each with its
// own answer (responses are not crossed between streams).
func TestConcurrentStreams(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c := newClient(t, srv, true)
	const n = 64
	done := make(chan *loadgen.Record, n)
	for i := range n {
		go func() { done <- do(t, c, int64(i+1), prompts.Prompt{Text: "hi", MaxTokens: 4 + i%5}, 5*time.Second) }()
	}
	for range n {
		rec := <-done
		if !rec.OK() || rec.OutputTokens != 4+int(rec.Seq-1)%5 {
			t.Errorf("request %d: %s %q, %d tokens", rec.Seq, rec.ErrorKind, rec.Error, rec.OutputTokens)
		}
	}
	waitIdle(t, srv)
	if tr := srv.Truth(); len(tr) != n {
		t.Errorf("%d requests reached the server", len(tr))
	}
}

func TestParseTarget(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9": "grpc://127.0.0.1:9", "grpc://h": "grpc://h:8001", "grpcs://h": "grpcs://h:443",
		"http://h:5": "grpc://h:5", "https://h:6": "grpcs://h:6", "h": "grpc://h:8001",
	} {
		c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: in}, Model: "m"})
		if err != nil || c.Target() != want {
			t.Errorf("%q: %v %v, want %s", in, c, err, want)
			continue
		}
		c.Close()
	}
	for _, bad := range []string{"", "ftp://h", "grpc://u:SECRET@h:1", "grpc://h:1/v2"} {
		if _, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: bad}}); err == nil || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	if _, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: "h:1", Transport: transport.Config{CAFile: "ca.pem"}}}); err == nil {
		t.Error("TLS files with a plaintext target accepted")
	}
}

// A server whose connection goes away mid-stream: the request is
// stream_truncated, with the chunks it got kept; the next request, with
// nothing served, is connect.
func TestConnectionLostMidStream(t *testing.T) {
	cfg := fixed()
	cfg.StallFor = 5 * time.Second
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	g, err := s.ServeGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: g.Addr, Transport: transport.Config{Headers: []string{"X-Sim-Fault: stall_mid"}}}, Model: cfg.Model, MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.AfterFunc(200*time.Millisecond, func() { g.Close() })
	rec := do(t, c, 1, prompts.Prompt{Text: "hi"}, 5*time.Second)
	if rec.ErrorKind != loadgen.ErrStreamTruncated || len(rec.Chunks) != 4 || rec.Status != int(codes.Unavailable) {
		t.Errorf("%s (%d) %q with %d chunks", rec.ErrorKind, rec.Status, rec.Error, len(rec.Chunks))
	}
	rec = do(t, c, 2, prompts.Prompt{Text: "hi"}, 5*time.Second)
	if rec.ErrorKind != loadgen.ErrConnect {
		t.Errorf("after the server went: %s %q", rec.ErrorKind, rec.Error)
	}
}

// The simulator's /metrics carries Triton's series for what the gRPC
// service served, beside the vLLM ones.
func TestSimulatorTritonMetrics(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c := newClient(t, srv, true)
	do(t, c, 1, prompts.Prompt{Text: "hi"}, 5*time.Second)
	c2 := newClient(t, srv, true, "X-Sim-Fault: http_429")
	do(t, c2, 2, prompts.Prompt{Text: "hi"}, 5*time.Second)
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`nv_inference_request_success{model="sim-llama-8b",version="1"} 1`,
		`nv_inference_request_failure{model="sim-llama-8b",reason="REJECTED",version="1"} 1`,
		`nv_inference_pending_request_count{model="sim-llama-8b",version="1"} 0`,
		`nv_inference_first_response_histogram_ms_count{model="sim-llama-8b",version="1"} 1`,
		`vllm:num_requests_running`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// A decoupled model refuses ModelInfer (Triton's vLLM backend): the client
// says so once and sends unstreamed requests over ModelStreamInfer with
// stream false, one response each; the first one is sent again.
func TestDecoupledModelUnstreamed(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	var warned []string
	c, err := kserve.New(kserve.Config{
		Endpoint: transport.Endpoint{URL: srv.GRPCAddr, Transport: transport.Config{Headers: []string{sim.GRPCDecoupledHeader + ": true"}},
			Warn: func(m string) { warned = append(warned, m) }},
		Model: srv.Config().Model, Stream: kserve.Bool(false), MaxTokens: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i, retries := range []int{1, 0} {
		rec := do(t, c, int64(i+1), prompts.Prompt{Text: "hi"}, 5*time.Second)
		if !rec.OK() || !rec.Unstreamed || len(rec.Chunks) != 1 || rec.OutputTokens != 8 || rec.Retries != retries {
			t.Errorf("request %d: %s %q, %d chunks, %d tokens, %d retries", i+1, rec.ErrorKind, rec.Error, len(rec.Chunks), rec.OutputTokens, rec.Retries)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "decoupled") {
		t.Errorf("warnings %q", warned)
	}
}

// Against a model shaped like the TensorRT-LLM ensemble: the preflight
// picks its convention from the metadata, and the requests it sends (with
// the batch dimension, max_tokens as an INT32 tensor, a mix's temperature
// and end_id as tensors) pass the simulator's checks of names, types and
// shapes. Without per-response counts, tokens are one per chunk.
func TestTensorRTLLMEnsemble(t *testing.T) {
	srv := simtest.StartGRPC(t, fixed())
	c := newClient(t, srv, true, sim.GRPCTensorsHeader+": trtllm")
	p := prompts.Prompt{Text: "What is ML?", Params: map[string]any{"temperature": 0.2, "end_id": 2}}
	rec := do(t, c, 1, p, 5*time.Second)
	if !rec.OK() || len(rec.Chunks) != 8 || rec.OutputTokens != 8 || rec.TokenSource != loadgen.TokensFromChunks {
		t.Fatalf("%s %q, %d chunks, %d tokens from %s", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.OutputTokens, rec.TokenSource)
	}
	// The vLLM convention forced on it misses max_tokens: the server says so.
	v, err := kserve.New(kserve.Config{Model: srv.Config().Model, MaxTokens: 8, Tensors: kserve.TensorsVLLM,
		Endpoint: transport.Endpoint{URL: srv.GRPCAddr, Transport: transport.Config{Headers: []string{sim.GRPCTensorsHeader + ": trtllm"}}}})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if err := v.Preflight(context.Background()); err != nil {
		t.Fatal(err)
	}
	if rec := do(t, v, 2, prompts.Prompt{Text: "hi"}, 5*time.Second); rec.ErrorKind != loadgen.ErrStreamError || !strings.Contains(rec.Error, "max_tokens") {
		t.Errorf("vLLM tensors on the ensemble: %s %q", rec.ErrorKind, rec.Error)
	}
}
