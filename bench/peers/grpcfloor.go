package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// streamInferPath is KServe v2's streaming RPC, Triton's decoupled mode.
const streamInferPath = "/inference.GRPCInferenceService/ModelStreamInfer"

// rawCodec sends bytes as they are and counts what it receives without
// decoding it: the floor under any KServe client's cost.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error { return nil }
func (rawCodec) Name() string                                { return "proto" }

// grpcFloor is the cheapest KServe gRPC streaming client: c workers over
// conns HTTP/2 connections, each opening a ModelStreamInfer per request
// (as tailgate does), sending one request marshalled once, and counting
// the responses until the server ends the RPC, none of them decoded. It
// prints "<responses> <requests> <elapsed_s>".
func grpcFloor(args []string) {
	fs := flag.NewFlagSet("grpcfloor", flag.ExitOnError)
	addr := fs.String("addr", "", "host:port of the KServe gRPC endpoint")
	model := fs.String("model", "m", "model name")
	c := fs.Int("c", 64, "streams at once")
	conns := fs.Int("conns", 1, "HTTP/2 connections")
	d := fs.Duration("d", 5*time.Second, "how long")
	tokens := fs.Int("tokens", 128, "max_tokens")
	fs.Parse(args)
	sp := kserve.AppendBytesElement(nil, []byte(`{"max_tokens":`+strconv.Itoa(*tokens)+`}`))
	req, err := proto.Marshal(&pb.ModelInferRequest{ModelName: *model, Id: "f", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}}, {Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
		{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}}, {Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}}},
		RawInputContents: [][]byte{kserve.AppendBytesElement(nil, []byte("hi")), {1}, {1}, sp}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpcfloor:", err)
		os.Exit(1)
	}
	// The same flow-control windows as tailgate's client: what is left is
	// the client's own work.
	var ccs []*grpc.ClientConn
	for range max(*conns, 1) {
		cc, err := grpc.NewClient("passthrough:///"+*addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(16<<20))
		if err != nil {
			fmt.Fprintln(os.Stderr, "grpcfloor:", err)
			os.Exit(1)
		}
		ccs = append(ccs, cc)
	}
	desc := &grpc.StreamDesc{StreamName: "ModelStreamInfer", ServerStreams: true, ClientStreams: true}
	var responses, reqs, failed atomic.Int64
	deadline := time.Now().Add(*d)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range *c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cc := ccs[i%len(ccs)]
			var none struct{}
			for time.Now().Before(deadline) {
				st, err := cc.NewStream(context.Background(), desc, streamInferPath, grpc.ForceCodecV2(rawCodec{}))
				if err == nil {
					err = st.SendMsg(req)
				}
				if err == nil {
					err = st.CloseSend()
				}
				n := int64(0)
				for err == nil {
					if err = st.RecvMsg(&none); err == nil {
						n++
					}
				}
				if !errors.Is(err, io.EOF) {
					failed.Add(1)
					continue
				}
				responses.Add(n)
				reqs.Add(1)
			}
		}()
	}
	wg.Wait()
	if f := failed.Load(); f > 0 {
		fmt.Fprintf(os.Stderr, "grpcfloor: %d requests failed\n", f)
	}
	fmt.Printf("%d %d %f\n", responses.Load(), reqs.Load(), time.Since(start).Seconds())
}

// grpcSim is a `tailgate sim --grpc` in its own process, in fixed mode.
type grpcSim struct {
	addr string
	cmd  *exec.Cmd
}

// startGRPCSim starts tailgate's simulator serving KServe gRPC with the
// given fixed delays (0: as fast as it goes), its model named "m".
func (b *bench) startGRPCSim(ttft, itl time.Duration) (*grpcSim, error) {
	ports := make([]string, 2)
	for i := range ports {
		ln, err := listen()
		if err != nil {
			return nil, err
		}
		ports[i] = ln.Addr().String()
		ln.Close()
	}
	ready := filepath.Join(b.tmp, "sim-ready-"+filepath.Base(ports[1]))
	cmd := exec.Command(b.tailgate, "sim", "--addr", ports[0], "--grpc", ports[1], "--model", "m", "--mode", "fixed",
		"--fixed-ttft", ttft.String(), "--fixed-itl", itl.String(), "--ready-file", ready)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for range 100 {
		if _, err := os.Stat(ready); err == nil {
			return &grpcSim{addr: ports[1], cmd: cmd}, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("tailgate sim --grpc %s did not start", ports[1])
}

func (s *grpcSim) stop() { s.cmd.Process.Kill(); s.cmd.Wait() }

// grpcStreams: KServe gRPC streamed tokens/s at 64, 256 and 1024 streams
// against a zero-delay simulator, tailgate (--api kserve-grpc) beside the
// gRPC floor client, with tokens per client CPU-second; then client memory
// per in-flight stream, peak RSS at 2048 streams less at 256.
func (b *bench) grpcStreams(ctx context.Context) error {
	srv, err := b.startGRPCSim(0, 0)
	if err != nil {
		return err
	}
	defer srv.stop()
	b.row("")
	b.row("KServe gRPC streamed tokens/s, zero delay, 128 tokens", "tailgate", "gRPC floor", "", "tailgate/floor", "goal")
	var perCPU []string
	for _, c := range []int{64, 256, 1024} {
		fc, err := runChild(ctx, b.self, "grpcfloor", "-addr", srv.addr, "-c", strconv.Itoa(c), "-d", b.d.String(), "-tokens", "128")
		if err != nil {
			return err
		}
		var resp, reqs int64
		var el float64
		fmt.Sscan(fc.stdout, &resp, &reqs, &el)
		rate := float64(resp) / el
		s, tc, err := b.tg(ctx, "--api", "kserve-grpc", "--target", "grpc://"+srv.addr, "--concurrency", strconv.Itoa(c),
			"--max-tokens", "128", "--duration", b.d.String())
		if err != nil {
			return err
		}
		b.row(fmt.Sprintf("  c%d", c), fmt.Sprintf("%.0f", s.Throughput.OutputTokensPerS), fmt.Sprintf("%.0f", rate), "",
			ratio(s.Throughput.OutputTokensPerS, rate), "≥ 0.90×")
		if tc.cpu > 0 && fc.cpu > 0 {
			perCPU = append(perCPU, fmt.Sprintf("c%d %.2f M (the floor %.2f M responses)", c,
				float64(s.Tokens.Output)/tc.cpu.Seconds()/1e6, float64(resp)/fc.cpu.Seconds()/1e6))
		}
	}
	if len(perCPU) > 0 {
		b.notes = append(b.notes, "KServe gRPC streamed tokens per client CPU-second: "+strings.Join(perCPU, "; ")+".")
	}
	slow, err := b.startGRPCSim(50*time.Millisecond, 40*time.Millisecond)
	if err != nil {
		return err
	}
	defer slow.stop()
	rss := map[int]int64{}
	frss := map[int]int64{}
	for _, c := range []int{256, 2048} {
		fc, err := runChild(ctx, b.self, "grpcfloor", "-addr", slow.addr, "-c", strconv.Itoa(c), "-d", b.d.String(), "-tokens", "100")
		if err != nil {
			return err
		}
		frss[c] = fc.maxRSSKiB
		_, tc, err := b.tg(ctx, "--api", "kserve-grpc", "--target", "grpc://"+slow.addr, "--concurrency", strconv.Itoa(c),
			"--max-tokens", "100", "--duration", b.d.String())
		if err != nil {
			return err
		}
		rss[c] = tc.maxRSSKiB
	}
	b.row("  memory per stream, KiB: (peak RSS at 2048 − at 256) / 1792, 100 tokens 40 ms apart",
		fmt.Sprintf("%.1f", float64(rss[2048]-rss[256])/1792), fmt.Sprintf("%.1f", float64(frss[2048]-frss[256])/1792), "",
		ratio(float64(rss[2048]-rss[256]), float64(frss[2048]-frss[256])), "")
	return nil
}
