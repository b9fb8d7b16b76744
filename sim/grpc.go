package sim

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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

// GRPCStatusHeader is request metadata that makes the simulator end the
// request with that gRPC status (a code name, "RESOURCE_EXHAUSTED" or
// "ResourceExhausted", or its number) before any response: how tests reach
// every status a real server or proxy may send.
const GRPCStatusHeader = "x-sim-grpc-status"

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
//   - Faults (X-Sim-Fault metadata, or Config.Faults): http_429 and
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
	s      *Server
	nvOnce sync.Once
	nv     *tritonMetrics // through tm()
	raw    bool           // the server's codec is wireCodec: send responses pre-encoded
}

// tm is the service's Triton series, registered on first use, so a
// simulator serving neither gRPC nor generate keeps its vLLM-only /metrics.
func (g *grpcService) tm() *tritonMetrics {
	g.nvOnce.Do(func() { g.nv = newTritonMetrics(g.s.metrics.reg, g.s.cfg.Model) })
	return g.nv
}

// GRPCService is the KServe v2 gRPC service over the server's engine,
// truth and faults, for a grpc.Server of the caller's.
// Its Triton-style nv_inference_* series join the server's /metrics.
func (s *Server) GRPCService() pb.GRPCInferenceServiceServer {
	g := &grpcService{s: s}
	g.tm()
	return g
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
	svc := &grpcService{s: s, raw: true}
	svc.tm()
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

// known reports whether name and version are the served model (version
// "1" or the server's choice).
func (g *grpcService) known(name, version string) bool {
	return name == g.s.cfg.Model && (version == "" || version == "1")
}

func (g *grpcService) unknownModel(name string) error {
	// Triton's words.
	return status.Errorf(codes.NotFound, "Request for unknown model: '%s' is not found", name)
}

// The vLLM backend's tensors (model.py's auto-completed config).
var simInputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_input", Datatype: "BYTES", Shape: []int64{1}},
	{Name: "stream", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "sampling_parameters", Datatype: "BYTES", Shape: []int64{1}},
	{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "return_num_input_tokens", Datatype: "BOOL", Shape: []int64{1}},
	{Name: "return_num_output_tokens", Datatype: "BOOL", Shape: []int64{1}},
}

var simOutputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1}},
	{Name: "num_input_tokens", Datatype: "UINT32", Shape: []int64{1}},
	{Name: "num_output_tokens", Datatype: "UINT32", Shape: []int64{-1}},
}

// GRPCTensorsHeader is request metadata that makes the model look like the
// TensorRT-LLM backend's ensemble ("trtllm"): its metadata lists
// text_input, max_tokens (INT32, required), stream, exclude_input_in_output,
// temperature, end_id and pad_id, every shape with a leading batch
// dimension ([-1, 1]), and requests are checked against that.
const GRPCTensorsHeader = "x-sim-tensors"

// The TensorRT-LLM ensemble's tensors (config.pbtxt with max_batch_size
// > 0: a leading batch dimension).
var trtInputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_input", Datatype: "BYTES", Shape: []int64{-1, 1}},
	{Name: "max_tokens", Datatype: "INT32", Shape: []int64{-1, 1}},
	{Name: "stream", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "exclude_input_in_output", Datatype: "BOOL", Shape: []int64{-1, 1}},
	{Name: "temperature", Datatype: "FP32", Shape: []int64{-1, 1}},
	{Name: "end_id", Datatype: "INT32", Shape: []int64{-1, 1}},
	{Name: "pad_id", Datatype: "INT32", Shape: []int64{-1, 1}},
}

var trtOutputs = []*pb.ModelMetadataResponse_TensorMetadata{
	{Name: "text_output", Datatype: "BYTES", Shape: []int64{-1, -1}},
}

// tensorsOf is the model's inputs and outputs for a request's metadata.
func tensorsOf(header func(string) string) (in, out []*pb.ModelMetadataResponse_TensorMetadata, trt bool) {
	if header(GRPCTensorsHeader) == "trtllm" {
		return trtInputs, trtOutputs, true
	}
	return simInputs, simOutputs, false
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
		return nil, g.unknownModel(r.GetName())
	}
	in, out, trt := tensorsOf(metadataHeader(ctx))
	platform := "vllm"
	if trt {
		platform = "ensemble"
	}
	return &pb.ModelMetadataResponse{Name: g.s.cfg.Model, Versions: []string{"1"}, Platform: platform,
		Inputs: in, Outputs: out}, nil
}

// grpcRequest is a validated inference request.
type grpcRequest struct {
	engine             int // the engine that serves it (0 in ModeFixed): whose series it feeds
	id                 string
	stream             bool
	exclude            bool
	wantIn, wantOut    bool
	prompt             string
	promptTokens, max  int
	fault              FaultKind
	faultFor           time.Duration
	status             codes.Code // GRPCStatusHeader; OK: none
	arrived            time.Time
	seqNo              int64
	path               string
	rec                *truthRec
	mid, sent, nchunks int
	admitted, first    time.Time
	pending            prometheus.Gauge // nv_inference_pending_request_count until admitted
}

// admit records the request's admission (left the queue).
func (q *grpcRequest) admit(at time.Time) {
	q.admitted = at
	q.pending.Dec()
	q.rec.update(func(t *Truth) { t.Admitted = at })
}

// job is the request as runOnEngine and runOnTimer take it.
func (q *grpcRequest) job() engineJob {
	return engineJob{prompt: q.promptTokens, max: q.max, arrived: q.arrived, fault: q.fault, faultFor: q.faultFor, mid: q.mid, seqNo: q.seqNo}
}

// rawInput returns input i's bytes: raw contents, else typed contents
// re-encoded raw.
func rawInput(r *pb.ModelInferRequest, i int) []byte {
	if raw := r.GetRawInputContents(); i < len(raw) {
		return raw[i]
	}
	c := r.GetInputs()[i].GetContents()
	var b []byte
	for _, e := range c.GetBytesContents() {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(e)))
		b = append(b, e...)
	}
	for _, v := range c.GetBoolContents() {
		if v {
			b = append(b, 1)
		} else {
			b = append(b, 0)
		}
	}
	for _, v := range c.GetIntContents() {
		b = binary.LittleEndian.AppendUint32(b, uint32(v))
	}
	return b
}

// shapeFits reports whether a request's shape matches a declared one: as
// many dimensions, -1 taking any size.
func shapeFits(got, decl []int64) bool {
	if len(got) != len(decl) {
		return false
	}
	for i := range got {
		if decl[i] != -1 && got[i] != decl[i] {
			return false
		}
	}
	return true
}

// firstBytesElement decodes the first element of a raw BYTES tensor.
func firstBytesElement(raw []byte) (string, error) {
	if len(raw) < 4 {
		return "", errors.New("BYTES tensor shorter than its 4-byte length")
	}
	n := binary.LittleEndian.Uint32(raw)
	if uint64(n) > uint64(len(raw)-4) {
		return "", errors.New("BYTES element length runs past the tensor's end")
	}
	return string(raw[4 : 4+n]), nil
}

// parse checks a request against the model's tensors (names, data types,
// shapes), as Triton and the vLLM backend (or the TensorRT-LLM ensemble)
// do.
func (g *grpcService) parse(r *pb.ModelInferRequest, header func(string) string) (*grpcRequest, error) {
	inputs, _, trt := tensorsOf(header)
	s := g.s
	if !g.known(r.GetModelName(), r.GetModelVersion()) {
		return nil, g.unknownModel(r.GetModelName())
	}
	if raw := r.GetRawInputContents(); len(raw) > 0 && len(raw) != len(r.GetInputs()) {
		return nil, status.Errorf(codes.InvalidArgument, "expected %d raw input contents, got %d", len(r.GetInputs()), len(raw))
	}
	q := &grpcRequest{id: r.GetId(), max: s.cfg.DefaultMaxTokens}
	haveText, haveMax := false, false
	for i, in := range r.GetInputs() {
		raw := rawInput(r, i)
		name := in.GetName()
		var decl *pb.ModelMetadataResponse_TensorMetadata
		for _, t := range inputs {
			if t.Name == name {
				decl = t
			}
		}
		if decl == nil {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] unexpected inference input '%s' for model '%s'", q.id, name, s.cfg.Model)
		}
		if !shapeFits(in.GetShape(), decl.Shape) {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] unexpected shape for input '%s' for model '%s'. Expected %v, got %v",
				q.id, name, s.cfg.Model, decl.Shape, in.GetShape())
		}
		if in.GetDatatype() != decl.Datatype {
			return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] inference input '%s' data-type is '%s', but model '%s' expects '%s'",
				q.id, name, in.GetDatatype(), s.cfg.Model, decl.Datatype)
		}
		if decl.Datatype == "BOOL" {
			if len(raw) < 1 {
				return nil, status.Errorf(codes.InvalidArgument, "input '%s': no data", name)
			}
			v := raw[0] != 0
			switch name {
			case "stream":
				q.stream = v
			case "exclude_input_in_output":
				q.exclude = v
			case "return_num_input_tokens":
				q.wantIn = v
			case "return_num_output_tokens":
				q.wantOut = v
			}
			continue
		}
		if decl.Datatype == "INT32" || decl.Datatype == "FP32" {
			if len(raw) < 4 {
				return nil, status.Errorf(codes.InvalidArgument, "input '%s': fewer than 4 bytes", name)
			}
			if name == "max_tokens" {
				q.max, haveMax = int(int32(binary.LittleEndian.Uint32(raw))), true
			}
			continue
		}
		str, err := firstBytesElement(raw)
		if err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "input '%s': %v", name, err)
		}
		switch name {
		case "text_input":
			q.prompt, haveText = str, true
		case "sampling_parameters":
			var sp map[string]any
			d := json.NewDecoder(strings.NewReader(str))
			d.UseNumber()
			if err := d.Decode(&sp); err != nil {
				return nil, status.Errorf(codes.InvalidArgument, "sampling_parameters: %v", err)
			}
			if v, ok := sp["max_tokens"]; ok {
				n, err := strconv.Atoi(strings.Trim(fmt.Sprint(v), `"`))
				if err != nil {
					return nil, status.Errorf(codes.InvalidArgument, "sampling_parameters max_tokens %v: not a whole number", v)
				}
				q.max = n
			}
		}
	}
	if !haveText {
		return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] expected 1 inputs but got 0 inputs for model '%s': input 'text_input' is missing", q.id, s.cfg.Model)
	}
	if trt && !haveMax {
		return nil, status.Errorf(codes.InvalidArgument, "[request id: %s] expected 2 inputs but got 1 inputs for model '%s': input 'max_tokens' is missing", q.id, s.cfg.Model)
	}
	if q.stream && !q.exclude && !trt {
		return nil, status.Error(codes.InvalidArgument, "When streaming, `exclude_input_in_output` = False is not allowed.")
	}
	if q.max < 1 {
		return nil, status.Errorf(codes.InvalidArgument, "max_tokens must be at least 1, got %d.", q.max)
	}
	q.promptTokens = s.cfg.TokenCounter(q.prompt) + s.cfg.PromptOverheadTokens
	if len(s.engines) > 0 && q.promptTokens+q.max > s.cfg.KVTokens {
		return nil, status.Errorf(codes.InvalidArgument, "This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion).",
			s.cfg.KVTokens, q.promptTokens+q.max, q.promptTokens, q.max)
	}
	return q, nil
}

// begin registers a request's arrival: its truth record and its fault.
func (g *grpcService) begin(ctx context.Context, path string, r *pb.ModelInferRequest, arrived time.Time) (*grpcRequest, error) {
	return g.beginWith(metadataHeader(ctx), path, r, arrived)
}

// beginWith is begin with the request's headers (gRPC metadata or HTTP).
func (g *grpcService) beginWith(header func(string) string, path string, r *pb.ModelInferRequest, arrived time.Time) (*grpcRequest, error) {
	s := g.s
	seqNo := s.seq.Add(1)
	id := r.GetId()
	if id == "" {
		id = "sim-" + strconv.FormatInt(seqNo, 10)
	}
	rec := s.truth.begin(Truth{ID: id, Seq: seqNo, Path: path, Arrived: arrived}, 0)
	fail := func(err error) (*grpcRequest, error) {
		st, _ := status.FromError(err)
		rec.update(func(t *Truth) {
			t.Status = int(st.Code())
			t.Headers = time.Now()
			if t.Outcome == "" {
				t.Outcome = "error"
			}
		})
		s.truth.finish(rec, time.Now())
		return nil, err
	}
	code := codes.OK
	if v := header(GRPCStatusHeader); v != "" {
		c, err := parseCode(v)
		if err != nil {
			return fail(status.Error(codes.InvalidArgument, err.Error()))
		}
		code = c
	}
	fault, faultFor := FaultNone, time.Duration(0)
	if v := header("x-sim-fault"); v != "" {
		k, d, err := parseFaultHeader(v)
		if err != nil {
			return fail(status.Error(codes.InvalidArgument, err.Error()))
		}
		fault, faultFor = k, d
	} else {
		fault = pickFault(*s.faults.Load(), s.cfg.Seed, seqNo)
	}
	if faultFor == 0 {
		faultFor = s.cfg.StallFor
	}
	q, err := g.parse(r, header)
	if err != nil {
		return fail(err)
	}
	q.id, q.seqNo, q.arrived, q.path, q.rec = id, seqNo, arrived, path, rec
	q.fault, q.faultFor, q.status = fault, faultFor, code
	tpc := s.cfg.TokensPerChunk
	q.nchunks = (q.max + tpc - 1) / tpc
	q.mid = q.nchunks / 2
	rec.update(func(t *Truth) {
		t.Stream, t.Fault = q.stream, fault
		t.PromptTokens, t.MaxTokens = q.promptTokens, q.max
		if q.stream {
			t.Chunks = make([]TruthChunk, 0, q.nchunks)
		}
	})
	return q, nil
}

// parseCode reads a gRPC code by name or number.
func parseCode(v string) (codes.Code, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.Atoi(v); err == nil && n > 0 && n <= 16 {
		return codes.Code(n), nil
	}
	want := strings.ToLower(strings.ReplaceAll(v, "_", ""))
	for c := codes.Code(1); c <= 16; c++ {
		if strings.ToLower(c.String()) == want {
			return c, nil
		}
	}
	return 0, fmt.Errorf("%s %q: not a gRPC code", GRPCStatusHeader, v)
}

// grpcSink is where a request's responses go: a stream (gRPC
// ModelStreamInfer, or the HTTP generate_stream), or, when chunk is nil,
// the collected text of a one-response answer.
type grpcSink struct {
	// chunk sends one response: text of tokens tokens, the last if final.
	chunk func(text []byte, tokens int, final bool) error
	// errorMessage sends an error response (fault error_in_stream).
	errorMessage func(msg string) error
	// malformed sends a response the client cannot decode.
	malformed func() error
	// truncate ends the stream before its final response.
	truncate func()
	text     []byte
}

// grpcStreamSink sends gRPC ModelStreamInferResponses through send.
func (g *grpcService) grpcStreamSink(q *grpcRequest, send func(any) error, stop func()) *grpcSink {
	s := g.s
	var head, scratch []byte
	return &grpcSink{
		chunk: func(text []byte, tokens int, final bool) error {
			if !g.raw {
				return send(&pb.ModelStreamInferResponse{InferResponse: q.textResponse(s, text, tokens, final)})
			}
			if head == nil {
				head = q.responseHead(s.cfg.Model)
			}
			// A new buffer each time: grpc-go writes it after Send returns.
			var b []byte
			b, scratch = q.appendStreamResponse(make([]byte, 0, len(head)+len(text)+64), scratch, head, q.promptTokens, text, tokens, final)
			return send(&encodedMessage{b})
		},
		errorMessage: func(msg string) error {
			return send(&pb.ModelStreamInferResponse{ErrorMessage: msg, InferResponse: &pb.ModelInferResponse{Id: q.id, ModelName: s.cfg.Model}})
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
func (q *grpcRequest) textResponse(s *Server, text []byte, tokens int, final bool) *pb.ModelInferResponse {
	r := &pb.ModelInferResponse{ModelName: s.cfg.Model, ModelVersion: "1", Id: q.id}
	r.Outputs = append(r.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: "text_output", Datatype: "BYTES", Shape: []int64{1}})
	raw := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(text)), uint32(len(text)))
	r.RawOutputContents = append(r.RawOutputContents, append(raw, text...))
	if q.wantIn {
		r.Outputs = append(r.Outputs, &pb.ModelInferResponse_InferOutputTensor{Name: "num_input_tokens", Datatype: "UINT32", Shape: []int64{1}})
		r.RawOutputContents = append(r.RawOutputContents, binary.LittleEndian.AppendUint32(nil, uint32(q.promptTokens)))
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

// serve runs one request through the engine (or fixed delays) and its
// fault, sending what it produces to sink. It returns the status the
// request ends with (nil: answered).
func (g *grpcService) serve(ctx context.Context, q *grpcRequest, sink *grpcSink) error {
	s := g.s
	rec := q.rec
	reason := tritonCanceled // until it is answered
	nv := g.tm()
	q.pending = nv.pending.WithLabelValues(nv.model, nv.version)
	q.pending.Inc()
	finish := func() {
		end := time.Now()
		if q.admitted.IsZero() {
			q.pending.Dec()
		}
		nv.done(q.arrived, q.admitted, q.first, end, reason)
		s.truth.finish(rec, end)
	}
	if !s.enter() {
		rec.update(func(t *Truth) { t.Outcome = "cancelled" })
		finish()
		return status.Error(codes.Unavailable, "the simulator is shutting down")
	}
	// The record is finished before the request leaves: WaitIdle then
	// sees its End.
	defer s.leave()
	defer finish()
	if _, ok := s.gate.sleepUntil(q.arrived, ctx.Done(), s.quit, nil); !ok {
		rec.update(func(t *Truth) { t.Outcome = "cancelled" })
		return status.FromContextError(ctx.Err()).Err()
	}
	statusErr := func(c codes.Code, msg string) error {
		reason = tritonRejected
		rec.update(func(t *Truth) { t.Outcome = "fault"; t.Status = int(c); t.Headers = time.Now() })
		return status.Error(c, msg)
	}
	switch {
	case q.status != codes.OK:
		return statusErr(q.status, "simulated status ("+GRPCStatusHeader+")")
	case q.fault == FaultHTTP429:
		return statusErr(codes.ResourceExhausted, "simulated rate limit (fault http_429)")
	case q.fault == FaultHTTP503:
		return statusErr(codes.Unavailable, "simulated overload (fault http_503)")
	case q.fault == FaultHang:
		rec.update(func(t *Truth) { t.Outcome = "fault" })
		select {
		case <-ctx.Done():
		case <-s.quit:
		}
		return status.Error(codes.Unavailable, "the simulator hung (fault hang)")
	}
	rec.update(func(t *Truth) { t.Status = int(codes.OK); t.Headers = time.Now() })

	var ended error // set by a mid-stream fault
	first := true
	var last time.Time
	chunks, midDone := 0, false
	emit := func(n int) bool {
		if !midDone && chunks >= q.mid {
			midDone = true
			switch q.fault {
			case FaultTruncate:
				rec.update(func(t *Truth) { t.Outcome = "fault" })
				if sink.chunk != nil {
					sink.truncate()
					ended = errTruncated
				} else {
					ended = status.Error(codes.Internal, "simulated truncation (fault truncate)")
				}
				return false
			case FaultErrorInStream:
				rec.update(func(t *Truth) { t.Outcome = "fault" })
				if sink.chunk != nil {
					sink.errorMessage("simulated engine failure (fault error_in_stream)")
					ended = errTruncated
				} else {
					ended = status.Error(codes.Internal, "simulated engine failure (fault error_in_stream)")
				}
				return false
			case FaultMalformed:
				if sink.chunk != nil {
					rec.update(func(t *Truth) { t.Outcome = "fault" })
					if sink.malformed() != nil {
						return false
					}
				}
			}
		}
		text := s.text.text(q.sent, n)
		q.sent += n
		chunks++
		final := q.sent >= q.max
		if sink.chunk == nil {
			sink.text = append(sink.text, text...)
			now := time.Now()
			if first {
				s.metrics.engine(q.engine).ttft.Observe(now.Sub(q.arrived).Seconds())
				first = false
			}
			q.first = now // one response, at the end
			return true
		}
		began := time.Now()
		if err := sink.chunk(text, n, final); err != nil {
			return false
		}
		now := time.Now()
		if first {
			s.metrics.engine(q.engine).ttft.Observe(now.Sub(q.arrived).Seconds())
			first = false
			q.first = now
		} else {
			s.metrics.engine(q.engine).itl.Observe(now.Sub(last).Seconds() / float64(n))
		}
		last = now
		rec.chunk(began, now, n)
		return true
	}
	ok := g.produce(ctx, q, emit)
	if ended != nil {
		reason = tritonBackend
		if ended == errTruncated {
			return nil
		}
		return ended
	}
	if !ok {
		rec.update(func(t *Truth) {
			if t.Outcome == "" {
				t.Outcome = "cancelled"
			}
		})
		s.metrics.engine(q.engine).successAbort.Inc()
		if err := ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		return status.Error(codes.Unavailable, "the simulator is shutting down")
	}
	reason = ""
	rec.update(func(t *Truth) { t.CompletionTokens = q.sent; t.FinishReason = "length" })
	s.metrics.engine(q.engine).e2e.Observe(time.Since(q.arrived).Seconds())
	s.metrics.engine(q.engine).successLen.Inc()
	if sink.chunk == nil {
		rec.update(func(t *Truth) { t.OutputTokens = q.sent })
	}
	return nil
}

// errTruncated: the request ended the stream itself (truncation, error
// message); the RPC returns OK.
var errTruncated = errors.New("stream ended by a fault")

// produce times the request's tokens, by the engine (ModeBatch) or fixed
// delays (ModeFixed), with the stall faults, calling emit with each
// chunk's token count. It reports false when the request was cancelled, the
// server closed or emit refused.
func (g *grpcService) produce(ctx context.Context, q *grpcRequest, emit func(n int) bool) bool {
	s := g.s
	tpc := s.cfg.TokensPerChunk
	if len(s.engines) == 0 {
		return g.produceFixed(ctx, q, emit)
	}
	return s.runOnEngine(ctx, q.job(), func(i int) { q.engine = i }, q.admit, func(avail int) bool {
		for q.sent < avail {
			if !emit(min(tpc, avail-q.sent)) {
				return false
			}
		}
		return true
	})
}

func (g *grpcService) produceFixed(ctx context.Context, q *grpcRequest, emit func(n int) bool) bool {
	return g.s.runOnTimer(ctx, q.job(), q.admit, func(n int, _ time.Time) bool { return emit(n) })
}

// GRPCDecoupledHeader is request metadata that makes ModelInfer refuse the
// model as decoupled, as Triton refuses the vLLM backend's.
const GRPCDecoupledHeader = "x-sim-decoupled"

func (g *grpcService) ModelInfer(ctx context.Context, r *pb.ModelInferRequest) (*pb.ModelInferResponse, error) {
	arrived := time.Now()
	if md, _ := metadata.FromIncomingContext(ctx); len(md.Get(GRPCDecoupledHeader)) > 0 {
		return nil, status.Error(codes.Unimplemented, "ModelInfer RPC doesn't support models with decoupled transaction policy")
	}
	q, err := g.begin(ctx, GRPCPathInfer, r, arrived)
	if err != nil {
		return nil, err
	}
	if q.stream {
		q.rec.update(func(t *Truth) { t.Outcome = "error"; t.Status = int(codes.InvalidArgument) })
		g.s.truth.finish(q.rec, time.Now())
		return nil, status.Error(codes.InvalidArgument, "ModelInfer gives one response: send stream=false, or use ModelStreamInfer")
	}
	sink := &grpcSink{}
	if err := g.serve(ctx, q, sink); err != nil {
		return nil, err
	}
	text := sink.text
	if !q.exclude {
		text = append([]byte(q.prompt), text...)
	}
	resp := q.textResponse(g.s, text, q.sent, false)
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
		q, err := g.begin(ctx, GRPCPathStream, in.r, in.arrived)
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
			sink := &grpcSink{}
			if err := g.serve(ctx, q, sink); err != nil {
				stop(err)
				return
			}
			send(&pb.ModelStreamInferResponse{InferResponse: q.textResponse(g.s, sink.text, q.sent, true)})
			return
		}
		if err := g.serve(ctx, q, g.grpcStreamSink(q, send, func() { stop(nil) })); err != nil {
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
