package kserve_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// rawCodec sends []byte as it is and discards what it receives: the
// cheapest peer of either side.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(mem.BufferSlice, any) error { return nil }
func (rawCodec) Name() string                         { return "proto" }

// replayServer answers every ModelStreamInfer with the same encoded
// responses, tokens of text and then a flag-only final one, all for
// request id "r": its own cost is the same whatever client reads them.
func replayServer(tb testing.TB, tokens int) string {
	tb.Helper()
	param := func(v bool) map[string]*pb.InferParameter {
		return map[string]*pb.InferParameter{kserve.ParamFinal: {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: v}}}
	}
	tok, err := proto.Marshal(&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{ModelName: "m", Id: "r",
		Parameters: param(false), Outputs: []*pb.ModelInferResponse_InferOutputTensor{{Name: "text_output", Datatype: "BYTES", Shape: []int64{1}}},
		RawOutputContents: [][]byte{kserve.AppendBytesElement(nil, []byte(" tok"))}}})
	if err != nil {
		tb.Fatal(err)
	}
	final, err := proto.Marshal(&pb.ModelStreamInferResponse{InferResponse: &pb.ModelInferResponse{ModelName: "m", Id: "r", Parameters: param(true)}})
	if err != nil {
		tb.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(rawCodec{}), grpc.UnknownServiceHandler(func(_ any, st grpc.ServerStream) error {
		var none struct{}
		if err := st.RecvMsg(&none); err != nil {
			return err
		}
		for range tokens {
			if err := st.SendMsg(tok); err != nil {
				return err
			}
		}
		return st.SendMsg(final)
	}))
	go srv.Serve(ln)
	tb.Cleanup(srv.Stop)
	return ln.Addr().String()
}

// floorRequest is the floor client's request, marshalled once.
func floorRequest(tb testing.TB, tokens int) []byte {
	tb.Helper()
	sp := kserve.AppendBytesElement(nil, []byte(`{"max_tokens":`+strconv.Itoa(tokens)+`}`))
	req, err := proto.Marshal(&pb.ModelInferRequest{ModelName: "m", Id: "r", Inputs: []*pb.ModelInferRequest_InferInputTensor{
		{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}}, {Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
		{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}}, {Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}}},
		RawInputContents: [][]byte{kserve.AppendBytesElement(nil, []byte("hi")), {1}, {1}, sp}})
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

// floorDo is what bench/peers' floor client does per request: open the
// stream, send the request, count the responses until the RPC ends.
func floorDo(cc *grpc.ClientConn, req []byte) (int, error) {
	desc := &grpc.StreamDesc{StreamName: "ModelStreamInfer", ServerStreams: true, ClientStreams: true}
	st, err := cc.NewStream(context.Background(), desc, "/inference.GRPCInferenceService/ModelStreamInfer", grpc.ForceCodecV2(rawCodec{}))
	if err == nil {
		err = st.SendMsg(req)
	}
	if err == nil {
		err = st.CloseSend()
	}
	n := 0
	var none struct{}
	for err == nil {
		if err = st.RecvMsg(&none); err == nil {
			n++
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return n, err
}

func newReplayClient(tb testing.TB, addr string, tokens int) *kserve.Client {
	tb.Helper()
	c, err := kserve.New(kserve.Config{Endpoint: transport.Endpoint{URL: "grpc://" + addr}, Model: "m", MaxTokens: tokens})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func newFloorConn(tb testing.TB, addr string) *grpc.ClientConn {
	tb.Helper()
	cc, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(16<<20))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cc.Close() })
	return cc
}

// doReplay is one streamed request of the client against replayServer.
func doReplay(tb testing.TB, c *kserve.Client, p *prompts.Prompt, tokens int, epoch time.Time) {
	rec := loadgen.NewRecord(epoch)
	c.Do(context.Background(), p, rec)
	if !rec.OK() || len(rec.Chunks) != tokens {
		tb.Fatalf("%s %s, %d chunks, want %d", rec.ErrorKind, rec.Error, len(rec.Chunks), tokens)
	}
}

// BenchmarkStreamDo: one streamed request of 128 responses over loopback,
// tailgate's client beside the floor (grpc-go, no decoding), one stream
// at a time ("serial") and many ("parallel"). The server's allocations
// are the same in both: the difference is the client's own work.
func BenchmarkStreamDo(b *testing.B) {
	const tokens = 128
	addr := replayServer(b, tokens)
	p := &prompts.Prompt{ID: "r", Text: "hi"}
	for _, par := range []bool{false, true} {
		mode := "serial"
		if par {
			mode = "parallel"
		}
		b.Run("tailgate/"+mode, func(b *testing.B) {
			c := newReplayClient(b, addr, tokens)
			epoch := time.Now()
			doReplay(b, c, p, tokens, epoch)
			b.ReportAllocs()
			if par {
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						doReplay(b, c, p, tokens, epoch)
					}
				})
				return
			}
			for b.Loop() {
				doReplay(b, c, p, tokens, epoch)
			}
		})
		b.Run("floor/"+mode, func(b *testing.B) {
			cc := newFloorConn(b, addr)
			req := floorRequest(b, tokens)
			one := func() {
				if n, err := floorDo(cc, req); err != nil || n != tokens+1 {
					b.Fatalf("%d responses, %v", n, err)
				}
			}
			one()
			b.ReportAllocs()
			if par {
				b.SetParallelism(16)
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						one()
					}
				})
				return
			}
			for b.Loop() {
				one()
			}
		})
	}
}

// A streamed request allocates no more than the floor client's (grpc-go's
// own work, the same server) but for a fixed few per request: its bytes,
// its metadata and cancellation, the record's chunks, the drain timer;
// and nothing per response, so each response's timestamp and decoding
// cost no allocation.
func TestStreamAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops at random under the race detector")
	}
	p := &prompts.Prompt{ID: "r", Text: "hi"}
	extra := map[int]float64{}
	for _, tokens := range []int{16, 128} {
		addr := replayServer(t, tokens)
		c := newReplayClient(t, addr, tokens)
		cc := newFloorConn(t, addr)
		req := floorRequest(t, tokens)
		epoch := time.Now()
		tg := testing.AllocsPerRun(50, func() { doReplay(t, c, p, tokens, epoch) })
		fl := testing.AllocsPerRun(50, func() {
			if n, err := floorDo(cc, req); err != nil || n != tokens+1 {
				t.Fatalf("floor: %d responses, %v", n, err)
			}
		})
		extra[tokens] = tg - fl
		t.Logf("%d tokens: tailgate %.0f, floor %.0f allocations per request", tokens, tg, fl)
	}
	const perRequest = 12 // what the comment above lists, the record included
	if extra[128] > perRequest {
		t.Errorf("%.0f allocations per request more than the floor's, want at most %d", extra[128], perRequest)
	}
	if d := extra[128] - extra[16]; d > 2 {
		t.Errorf("%.0f allocations more over 112 more responses, want none per response", d)
	}
}
