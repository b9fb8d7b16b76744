package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// A kserve-grpc run against the simulator's gRPC service: faults show under
// their kinds, token counts come from num_output_tokens, and the streams
// spread over --connections.
func TestRunKServeGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, 2*time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP429, Every: 7}, {Kind: sim.FaultTruncate, Every: 11},
		{Kind: sim.FaultErrorInStream, Every: 13}}
	srv := simtest.StartGRPC(t, cfg)
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--api", "kserve-grpc", "--target", "grpc://"+srv.GRPCAddr, "--model", srv.Config().Model,
		"--rate", "100", "--arrival", "constant", "--duration", "1s", "--max-tokens", "8", "--connections", "3",
		"--out", dir, "--max-error-rate", "1", "--nvml", "off")
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	if s.Requests.Sent != 100 {
		t.Errorf("%d sent, want 100", s.Requests.Sent)
	}
	for kind, n := range map[loadgen.ErrorKind]int64{loadgen.ErrRateLimited: 14, loadgen.ErrStreamTruncated: 8, loadgen.ErrStreamError: 6} { // first matching rule wins: 77 and 91 are 429s {
		if got := s.Requests.ErrorsByKind[string(kind)]; got != n {
			t.Errorf("%s: %d, want %d (errors_by_kind %v)", kind, got, n, s.Requests.ErrorsByKind)
		}
	}
	if !strings.Contains(stdout, "from usage") || s.Telemetry != nil {
		t.Errorf("token source or telemetry:\n%s", stdout)
	}
	// With --metrics-url, the simulator's Triton series are sampled (its
	// vLLM ones beside them, as Triton with the vLLM backend exports).
	dir = t.TempDir()
	code, stdout, stderr = runCmd(t, "--api", "kserve-grpc", "--target", "grpc://"+srv.GRPCAddr, "--model", srv.Config().Model,
		"--rate", "50", "--duration", "1s", "--max-tokens", "8", "--out", dir, "--max-error-rate", "1", "--nvml", "off",
		"--metrics-url", srv.URL+"/metrics")
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if s := readSummary(t, dir); s.Telemetry == nil || !strings.Contains(s.Telemetry.Family, "triton") {
		t.Errorf("telemetry %+v, want the triton family", s.Telemetry)
	}
}

// A model the server does not have stops the run before it starts.
func TestRunKServeGRPCMissingModel(t *testing.T) {
	srv := simtest.StartGRPC(t, sim.Config{FixedTTFT: time.Millisecond})
	code, _, stderr := runCmd(t, "--api", "kserve-grpc", "--target", srv.GRPCAddr, "--model", "llama-70b",
		"--rate", "10", "--duration", "1s", "--out", t.TempDir(), "--nvml", "off")
	if code != slo.ExitInvalid || !strings.Contains(stderr, `model "llama-70b" is not ready`) {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if n := len(srv.Truth()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// A triton-generate run against the simulator's generate extension.
func TestRunTritonGenerate(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, 2*time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultErrorInStream, Every: 10}}
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--api", "triton-generate", "--target", srv.URL, "--model", srv.Config().Model,
		"--rate", "50", "--arrival", "constant", "--duration", "1s", "--max-tokens", "8", "--out", dir, "--max-error-rate", "1", "--nvml", "off")
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	if s.Requests.Sent != 50 || s.Requests.ErrorsByKind[string(loadgen.ErrStreamError)] != 5 || s.Requests.OK != 45 {
		t.Errorf("sent %d ok %d errors %v", s.Requests.Sent, s.Requests.OK, s.Requests.ErrorsByKind)
	}
}

// validate runs a plan over kserve-grpc: the preflight reads the model's
// tensors, every stage runs, and the evidence names the server.
func TestValidateKServeGRPC(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.StartGRPC(t, sim.DefaultConfig())
	plan := writePlan(t, "grpc://"+srv.GRPCAddr, "1s", false)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := tgCmd("validate", "--api", "kserve-grpc", "--plan", plan, "--out", out, "--nvml", "off", "--self-check", "warn")
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	env, err := os.ReadFile(filepath.Join(out, "environment.json"))
	if err != nil || !strings.Contains(string(env), "tailgate-sim") {
		t.Errorf("environment.json: %v %s", err, env)
	}
}

// tailgate sim --grpc serves KServe v2 gRPC beside the HTTP API until
// interrupted; a non-loopback --grpc is refused.
func TestSimServesGRPC(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncbuf.Buffer
	done := make(chan int)
	go func() {
		done <- cmdSim(ctx, []string{"--addr", "127.0.0.1:0", "--grpc", "127.0.0.1:0", "--fixed-ttft", "1ms"}, &out, &errb)
	}()
	var addr string
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if out.WaitFor(wctx, "KServe v2 gRPC on grpc://") == nil {
		_, after, _ := strings.Cut(out.String(), "KServe v2 gRPC on grpc://")
		addr = strings.TrimSpace(strings.SplitN(after, "\n", 2)[0])
	}
	if addr == "" {
		cancel()
		<-done
		t.Fatalf("no gRPC address announced:\n%s\n%s", out.String(), errb.String())
	}
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: addr}, Model: "sim-llama-8b", MaxTokens: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Preflight(ctx); err != nil {
		t.Fatal(err)
	}
	rec := loadgen.NewRecord(time.Now())
	c.Do(ctx, &prompts.Prompt{Text: "hi"}, rec)
	if !rec.OK() || len(rec.Chunks) != 3 {
		t.Errorf("%s %q, %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
	}
	cancel()
	if code := <-done; code != slo.ExitOK {
		t.Errorf("exit %d: %s", code, errb.String())
	}
	var o, e bytes.Buffer
	if code := cmdSim(context.Background(), []string{"--grpc", "0.0.0.0:0"}, &o, &e); code != slo.ExitUsage || !strings.Contains(e.String(), "--grpc") {
		t.Errorf("remote --grpc: exit %d %s", code, e.String())
	}
}
