package sim

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// KServe v2 gRPC paths, as Truth.Path records them.
const (
	GRPCPathStream = "/inference.GRPCInferenceService/ModelStreamInfer"
	GRPCPathInfer  = "/inference.GRPCInferenceService/ModelInfer"
)

// grpcService serves the simulator's model over KServe v2 gRPC, shaped like
// Triton with the vLLM backend:
//
//   - ServerLive, ServerReady (false once closing), ServerMetadata
//     ("tailgate-sim"), ModelReady and ModelMetadata for Config.Model,
//     version "1" (another name: not ready, and NotFound with Triton's
//     words). The metadata lists the vLLM backend's tensors: text_input,
//     stream, sampling_parameters, exclude_input_in_output,
//     return_num_input_tokens, return_num_output_tokens; text_output,
//     num_input_tokens, num_output_tokens.
//   - A request is checked as Triton checks it (unknown inputs, wrong data
//     types, a missing text_input, streaming without
//     exclude_input_in_output: InvalidArgument); max_tokens comes from the
//     sampling_parameters JSON. Inputs may be raw or typed contents.
//   - ModelStreamInfer serves every request of a stream concurrently, each
//     through the same engine (or fixed delays), truth and faults as an
//     HTTP request: one response per chunk, its text_output the chunk's
//     words (raw contents, a 4-byte length and the bytes), with
//     num_output_tokens and num_input_tokens when asked, the last one
//     flagged triton_final_response. A request that fails validation is
//     answered in error_message and the stream stays open, as Triton does.
//     ModelInfer answers a stream=false request with one response once
//     the whole answer is generated.
//   - Faults run as for every protocol (exchange), in KServe's form
//     (kserveAnswer), from X-Sim-Fault metadata or Config.Faults: http_429 and
//     http_503 end the RPC with ResourceExhausted and Unavailable, as a
//     gateway or an overloaded server would; truncate ends the stream with
//     OK after half the chunks, before the final response (ModelInfer:
//     Internal); error_in_stream sends an error_message there (ModelInfer:
//     Internal); malformed sends one response whose BYTES length runs past
//     its end; hang, stall and stall_mid as over HTTP; ignore_stream and
//     html_200 are HTTP's and do nothing here. GRPCStatusHeader metadata
//     ends the request with any status.
//   - Truth records the request under its id, with Path GRPCPathStream or
//     GRPCPathInfer; a chunk's instant is when its Send returned, i.e. the
//     message was handed to grpc-go's writer (a few µs to ms before the
//     kernel has it, more under CPU contention).
//   - /metrics gains Triton's nv_inference_* series (tritonMetrics).
//   - The HTTP-only behaviours (CloseAfter, Dialect, EOSNotStreamed,
//     HTTPThreads, MetricsFromLoop) do not apply; GRPCDecoupledHeader
//     makes ModelInfer refuse the model as Triton refuses a decoupled one,
//     and GRPCTensorsHeader makes it the TensorRT-LLM ensemble (its
//     tensors, shapes with the batch dimension, max_tokens required).
type grpcService struct {
	pb.UnimplementedGRPCInferenceServiceServer
	*kserve
	raw bool // the server's codec is wireCodec: send responses pre-encoded
}

// GRPCService is the KServe v2 gRPC service over the server's engine,
// truth and faults, for a grpc.Server of the caller's.
// Its Triton-style nv_inference_* series join the server's /metrics.
func (s *Server) GRPCService() pb.GRPCInferenceServiceServer {
	s.kserve.tm()
	return &grpcService{kserve: s.kserve}
}

// GRPCRunning is the gRPC service serving on a listener.
type GRPCRunning struct {
	// Addr is the address listened on (host:port).
	Addr string
	gs   *grpc.Server
	done chan error
	once sync.Once
}

// ServeGRPC serves s's KServe v2 gRPC service on addr ("" means
// 127.0.0.1:0). Close it before or after the Server; closing the Server
// first ends every request in flight.
func (s *Server) ServeGRPC(addr string) (*GRPCRunning, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	gs := grpc.NewServer(grpc.MaxConcurrentStreams(1<<16), grpc.MaxRecvMsgSize(maxBodyBytes),
		grpc.ForceServerCodecV2(newWireCodec()))
	s.kserve.tm()
	svc := &grpcService{kserve: s.kserve, raw: true}
	pb.RegisterGRPCInferenceServiceServer(gs, svc)
	r := &GRPCRunning{Addr: ln.Addr().String(), gs: gs, done: make(chan error, 1)}
	go func() { r.done <- gs.Serve(ln) }()
	return r, nil
}

// Close stops serving and closes every connection.
func (r *GRPCRunning) Close() error {
	var err error
	r.once.Do(func() {
		r.gs.Stop()
		err = <-r.done
		if errors.Is(err, grpc.ErrServerStopped) {
			err = nil
		}
	})
	return err
}

func (g *grpcService) ServerLive(context.Context, *pb.ServerLiveRequest) (*pb.ServerLiveResponse, error) {
	return &pb.ServerLiveResponse{Live: true}, nil
}

func (g *grpcService) ServerReady(context.Context, *pb.ServerReadyRequest) (*pb.ServerReadyResponse, error) {
	g.s.mu.Lock()
	closed := g.s.closed
	g.s.mu.Unlock()
	return &pb.ServerReadyResponse{Ready: !closed}, nil
}

func (g *grpcService) ServerMetadata(context.Context, *pb.ServerMetadataRequest) (*pb.ServerMetadataResponse, error) {
	return &pb.ServerMetadataResponse{Name: "tailgate-sim", Version: Version}, nil
}

func (g *grpcService) ModelReady(_ context.Context, r *pb.ModelReadyRequest) (*pb.ModelReadyResponse, error) {
	return &pb.ModelReadyResponse{Ready: g.known(r.GetName(), r.GetVersion())}, nil
}

func metadataHeader(ctx context.Context) func(string) string {
	md, _ := metadata.FromIncomingContext(ctx)
	return func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
}

func (g *grpcService) ModelMetadata(ctx context.Context, r *pb.ModelMetadataRequest) (*pb.ModelMetadataResponse, error) {
	if !g.known(r.GetName(), r.GetVersion()) {
		return nil, unknownModel(r.GetName())
	}
	in, out, trt := tensorsOf(metadataHeader(ctx))
	platform := "vllm"
	if trt {
		platform = "ensemble"
	}
	return &pb.ModelMetadataResponse{Name: g.s.cfg.Model, Versions: []string{"1"}, Platform: platform,
		Inputs: in, Outputs: out}, nil
}

// streamAnswer sends q's answer as ModelStreamInferResponses through
// send; stop ends the RPC (OK).
func (g *grpcService) streamAnswer(q *kserveRequest, send func(any) error, stop func()) *kserveAnswer {
	s := g.s
	var head, scratch []byte
	return &kserveAnswer{
		respond: func(text []byte, tokens int, final bool) error {
			if !g.raw {
				return send(&pb.ModelStreamInferResponse{InferResponse: q.textResponse(s, text, tokens, final)})
			}
			if head == nil {
				head = q.responseHead(cmp.Or(s.cfg.AnswerModel, s.cfg.Model))
			}
			// A new buffer each time: grpc-go writes it after Send returns.
			var b []byte
			b, scratch = q.appendStreamResponse(make([]byte, 0, len(head)+len(text)+64), scratch, head, q.prompt, text, tokens, final)
			return send(&encodedMessage{b})
		},
		errorMessage: func(msg string) error {
			return send(&pb.ModelStreamInferResponse{ErrorMessage: msg, InferResponse: &pb.ModelInferResponse{Id: q.id, ModelName: cmp.Or(s.cfg.AnswerModel, s.cfg.Model)}})
		},
		malformed: func() error {
			r := q.textResponse(s, nil, 0, false)
			r.RawOutputContents[0] = []byte{0xff, 0xff, 0, 0, 'x'}
			return send(&pb.ModelStreamInferResponse{InferResponse: r})
		},
		truncate: stop,
	}
}

// textResponse is one response carrying text and, when asked, counts.
func (q *kserveRequest) textResponse(s *Server, text []byte, tokens int, final bool) *pb.ModelInferResponse {
	r := &pb.ModelInferResponse{ModelName: cmp.Or(s.cfg.AnswerModel, s.cfg.Model), ModelVersion: "1", Id: q.id}
	r.Outputs = append(r.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: "text_output", Datatype: "BYTES", Shape: []int64{1}})
	raw := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(text)), uint32(len(text)))
	r.RawOutputContents = append(r.RawOutputContents, append(raw, text...))
	if q.wantIn {
		r.Outputs = append(r.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: "num_input_tokens", Datatype: "UINT32", Shape: []int64{1}})
		r.RawOutputContents = append(r.RawOutputContents, binary.LittleEndian.AppendUint32(nil, uint32(q.prompt)))
	}
	if q.wantOut {
		r.Outputs = append(r.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: "num_output_tokens", Datatype: "UINT32", Shape: []int64{1}})
		r.RawOutputContents = append(r.RawOutputContents, binary.LittleEndian.AppendUint32(nil, uint32(tokens)))
	}
	if final {
		r.Parameters = map[string]*pb.InferParameter{"triton_final_response": {ParameterChoice: &pb.InferParameter_BoolParam{BoolParam: true}}}
	}
	return r
}

// GRPCDecoupledHeader is request metadata that makes ModelInfer refuse the
// model as decoupled, as Triton refuses the vLLM backend's.
const GRPCDecoupledHeader = "x-sim-decoupled"

func (g *grpcService) ModelInfer(ctx context.Context, r *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	arrived := time.Now()
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(GRPCDecoupledHeader)) > 0 {
		return nil, status.Error(codes.Unimplemented, "ModelInfer RPC doesn't support models with decoupled transaction policy")
	}
	q, err := g.begin(ctx, metadataHeader(ctx), GRPCPathInfer, r, arrived)
	if err != nil {
		return nil, err
	}
	if q.stream {
		return nil, q.reject(status.Error(codes.InvalidArgument, "ModelInfer gives one response: send stream=false, or use ModelStreamInfer"))
	}
	if err := g.serve(q, &kserveAnswer{}); err != nil {
		return nil, err
	}
	resp := q.textResponse(g.s, q.prompted(answerText(q.sent)), q.sent, false)
	resp.Parameters = nil
	return resp, nil
}

func (g *grpcService) ModelStreamInfer(st pb.GRPCInferenceService_ModelStreamInferServer) error {
	ctx, cancel := context.WithCancel(st.Context())
	defer cancel()
	var sendMu sync.Mutex
	send := func(m any) error {
		sendMu.Lock()
		defer sendMu.Unlock()
		if err := ctx.Err(); err != nil {
			return err
		}
		return st.SendMsg(m)
	}
	// end, once closed, ends the RPC: with endErr's status if set, else OK
	// (a truncation: the stream closes before the request's final response).
	end := make(chan struct{})
	var endOnce sync.Once
	var endErr atomic.Pointer[error]
	stop := func(err error) {
		if err != nil {
			endErr.CompareAndSwap(nil, &err)
		}
		endOnce.Do(func() { close(end) })
	}
	type recvd struct {
		r       *pb.ModelInferRequest
		arrived time.Time
	}
	reqs := make(chan recvd)
	recvErr := make(chan error, 1)
	go func() {
		for {
			r, err := st.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- recvd{r, time.Now()}:
			case <-ctx.Done():
				return
			}
		}
	}()
	handle := func(in recvd) {
		q, err := g.begin(ctx, metadataHeader(ctx), GRPCPathStream, in.r, in.arrived)
		if err != nil {
			// As Triton: a request that fails validation is answered in
			// error_message and the stream stays open.
			send(&pb.ModelStreamInferResponse{ErrorMessage: status.Convert(err).Message(),
				InferResponse: &pb.ModelInferResponse{Id: in.r.GetId(), ModelName: in.r.GetModelName()}})
			return
		}
		if !q.stream {
			// stream=false: one response, the whole answer, flagged final,
			// as the vLLM backend answers.
			if err := g.serve(q, &kserveAnswer{}); err != nil {
				stop(err)
				return
			}
			send(&pb.ModelStreamInferResponse{InferResponse: q.textResponse(g.s, answerText(q.sent), q.sent, true)})
			return
		}
		if err := g.serve(q, g.streamAnswer(q, send, func() { stop(nil) })); err != nil {
			// An injected status ends the RPC, as a gateway or an
			// overloaded server would.
			stop(err)
		}
	}
	var wg sync.WaitGroup
	result := func() error {
		cancel()
		wg.Wait()
		if p := endErr.Load(); p != nil {
			return *p
		}
		return nil
	}
	for {
		select {
		case in := <-reqs:
			wg.Add(1)
			go func() { defer wg.Done(); handle(in) }()
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				cancel()
				wg.Wait()
				return err
			}
			// Half-closed: the requests sent finish, unless one ends the
			// stream first.
			done := make(chan struct{})
			go func() { wg.Wait(); close(done) }()
			select {
			case <-done:
			case <-end:
			}
			return result()
		case <-end:
			return result()
		}
	}
}
