package canary

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// kserveTarget is a kserve-grpc target whose model is the TensorRT-LLM
// ensemble (the simulator's x-sim-tensors header): requests must carry its
// tensors (max_tokens among them), which the client learns only by
// preparing (ModelMetadata); the vLLM tensors it would send otherwise are
// refused.
const kserveTarget = `
kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
evaluation_interval: 200ms
slo: slo.yaml
targets:
  - name: trt
    url: http://%s
    api: kserve-grpc
    model: sim-llama-8b
    max_tokens: 8
    headers: {x-sim-tensors: trtllm}
    timeout: 2s
    schedule: {rate: 20}
`

// gatedGRPC serves the simulator's KServe v2 gRPC service, answering every
// RPC Unavailable until open is set: a server still starting.
func gatedGRPC(t *testing.T, srv *sim.Server, open *atomic.Bool) string {
	t.Helper()
	refuse := func() error {
		if open.Load() {
			return nil
		}
		return grpcstatus.Error(codes.Unavailable, "starting")
	}
	gs := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := refuse(); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(s any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := refuse(); err != nil {
				return err
			}
			return h(s, ss)
		}))
	pb.RegisterGRPCInferenceServiceServer(gs, srv.GRPCService())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	return ln.Addr().String()
}

// The canary opens its targets as run does (protocol.Open), so a KServe
// client learns its model's tensors before probing: a TensorRT-LLM target
// up at start gets its own tensors from the first probe, and one down at
// start, probed anyway (its failures are what a canary measures), is
// prepared in the background once it answers, after which its probes
// succeed.
func TestCanaryPreparesKServeTargets(t *testing.T) {
	srv := simtest.Start(t, fastSim())
	trt := map[string]string{"target": "trt"}
	ok := map[string]string{"target": "trt", "outcome": "ok"}

	t.Run("up at start", func(t *testing.T) {
		var open atomic.Bool
		open.Store(true)
		addr := gatedGRPC(t, srv.Server, &open)
		d, _, logs := startCanaryWith(t, fmt.Sprintf(kserveTarget, addr), Options{PrepareRetry: 100 * time.Millisecond})
		waitFor(t, logs, 10*time.Second, "10 probes of the TensorRT-LLM target", func() bool {
			fams, _ := scrape(t, d)
			return total(fams, prom.RequestsTotal, trt) >= 10
		})
		fams, body := scrape(t, d)
		if reqs, okReqs := total(fams, prom.RequestsTotal, trt), total(fams, prom.RequestsTotal, ok); okReqs < reqs-1 {
			// A scrape may fall between a request's counters: one apart.
			t.Errorf("%v of %v probes succeeded; the client sent tensors the model does not take\n%s\n%s", okReqs, reqs, body, logs.String())
		}
		if strings.Contains(logs.String(), "preflight") {
			t.Errorf("preflight failed against a target that was up:\n%s", logs.String())
		}
	})

	t.Run("down at start", func(t *testing.T) {
		var open atomic.Bool
		addr := gatedGRPC(t, srv.Server, &open)
		d, _, logs := startCanaryWith(t, fmt.Sprintf(kserveTarget, addr), Options{PrepareRetry: 100 * time.Millisecond})
		waitFor(t, logs, 10*time.Second, "failed probes of the target that is down", func() bool {
			fams, _ := scrape(t, d)
			return total(fams, prom.RequestErrorsTotal, trt) >= 3
		})
		if !strings.Contains(logs.String(), "preflight") || !strings.Contains(logs.String(), "probing anyway") {
			t.Errorf("no preflight failure logged for a target that was down:\n%s", logs.String())
		}
		open.Store(true)
		waitFor(t, logs, 10*time.Second, "probes succeeding once the target is up", func() bool {
			fams, _ := scrape(t, d)
			return total(fams, prom.RequestsTotal, ok) >= 5
		})
		if !strings.Contains(logs.String(), "target trt: prepared") {
			t.Errorf("the late preparation is not logged:\n%s", logs.String())
		}
	})
}
