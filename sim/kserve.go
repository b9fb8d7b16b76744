package sim

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
)

// GRPCStatusHeader is request metadata (an HTTP header on the KServe-shaped
// HTTP APIs) that makes the simulator end the request with that gRPC
// status (a code name, "RESOURCE_EXHAUSTED" or "ResourceExhausted", or its
// number) before any response: how tests reach every status a real server
// or proxy may send.
const GRPCStatusHeader = "x-sim-grpc-status"

// kserve is what the KServe-shaped protocols share: KServe v2 gRPC
// (grpc.go), Triton's HTTP generate (generate.go), TGI and Ollama
// (native.go). Each turns its request into a KServe inference request
// (pb.ModelInferRequest), read as Triton reads it (kserve_parse.go);
// failures are gRPC statuses, which the HTTP ones answer as their error
// bodies; every request feeds Triton's nv_inference_* series.
type kserve struct {
	s      *Server
	nvOnce sync.Once
	nv     *tritonMetrics // through tm()
}

// tm is Triton's series, registered on first use, so a simulator serving
// none of these protocols keeps its vLLM-only /metrics.
func (k *kserve) tm() *tritonMetrics {
	k.nvOnce.Do(func() { k.nv = newTritonMetrics(k.s.metrics.reg, k.s.cfg.Model) })
	return k.nv
}

// kserveRequest is one KServe-shaped exchange.
type kserveRequest struct {
	*exchange
	exclude         bool // exclude_input_in_output
	wantIn, wantOut bool // return_num_input_tokens, return_num_output_tokens
	text            string
	status          codes.Code // GRPCStatusHeader; OK: none
}

// begin registers a request's arrival (its truth record and its fault) and
// reads it. header is the request's metadata or HTTP headers.
func (k *kserve) begin(ctx context.Context, header func(string) string, path string, r *pb.ModelInferRequest, arrived time.Time) (*kserveRequest, error) {
	s := k.s
	x := s.newExchange(ctx, r.GetId(), path, arrived)
	fail := func(err error) (*kserveRequest, error) {
		st, _ := status.FromError(err)
		x.rec.update(func(t *Truth) {
			t.Status = int(st.Code())
			t.Headers = time.Now()
			if t.Outcome == "" {
				t.Outcome = "error"
			}
		})
		s.truth.finish(x.rec, time.Now())
		return nil, err
	}
	q := &kserveRequest{exchange: x}
	if v := header(GRPCStatusHeader); v != "" {
		c, err := parseCode(v)
		if err != nil {
			return fail(status.Error(codes.InvalidArgument, err.Error()))
		}
		q.status = c
	}
	if err := x.pickFault(header("x-sim-fault")); err != nil {
		return fail(status.Error(codes.InvalidArgument, err.Error()))
	}
	in, err := k.parse(r, header)
	if err != nil {
		return fail(err)
	}
	q.exclude, q.wantIn, q.wantOut, q.text = in.exclude, in.wantIn, in.wantOut, in.text
	x.shape(in.promptTokens, in.max, in.max, in.stream)
	return q, nil
}

// reject ends a request that is not served, with err (an InvalidArgument).
func (q *kserveRequest) reject(err error) error {
	q.rec.update(func(t *Truth) { t.Outcome = "error"; t.Status = int(status.Code(err)) })
	q.s.truth.finish(q.rec, time.Now())
	return err
}

// kserveAnswer is the KServe-shaped protocols' answer (see answer): a
// stream of responses made by its functions, or, when respond is nil, one
// response once the answer is complete, which the caller sends.
type kserveAnswer struct {
	q   *kserveRequest
	err error // the status the request ends with (refused, or a fault ended it); nil: OK

	// respond sends one response: text of tokens tokens, the last if final.
	respond func(text []byte, tokens int, final bool) error
	// errorMessage sends an error response (fault error_in_stream).
	errorMessage func(msg string) error
	// malformed sends a response the client cannot decode.
	malformed func() error
	// truncate ends the stream before its final response.
	truncate func()
}

// refuse answers an injected status (GRPCStatusHeader), and http_429 and
// http_503 as a gateway or an overloaded server would: ResourceExhausted,
// Unavailable. html_200 is HTTP's and does nothing here.
func (a *kserveAnswer) refuse(f FaultKind) bool {
	c, msg := a.q.status, "simulated status ("+GRPCStatusHeader+")"
	switch {
	case c != codes.OK:
	case f == FaultHTTP429:
		c, msg = codes.ResourceExhausted, "simulated rate limit (fault http_429)"
	case f == FaultHTTP503:
		c, msg = codes.Unavailable, "simulated overload (fault http_503)"
	default:
		return false
	}
	a.q.rec.update(func(t *Truth) { t.Status = int(c); t.Headers = time.Now() })
	a.err = status.Error(c, msg)
	return true
}

func (a *kserveAnswer) start() bool {
	a.q.rec.update(func(t *Truth) { t.Status = int(codes.OK); t.Headers = time.Now() })
	return true
}

func (a *kserveAnswer) chunk(text []byte, n int, final bool) bool {
	return a.respond(text, n, final) == nil
}

// midFault: a stream is truncated before its final response (the RPC ends
// OK), gets an error response, or gets a response that cannot be decoded;
// one response at the end is replaced by Internal (truncate,
// error_in_stream) or is unaffected (malformed).
func (a *kserveAnswer) midFault(f FaultKind) (fired, goOn bool) {
	streaming := a.respond != nil
	switch f {
	case FaultTruncate:
		if streaming {
			a.truncate()
		} else {
			a.err = status.Error(codes.Internal, "simulated truncation (fault truncate)")
		}
		return true, false
	case FaultErrorInStream:
		const msg = "simulated engine failure (fault error_in_stream)"
		if streaming {
			a.errorMessage(msg)
		} else {
			a.err = status.Error(codes.Internal, msg)
		}
		return true, false
	case FaultMalformed:
		if !streaming {
			return false, true
		}
		return true, a.malformed() == nil
	}
	return false, true
}

func (a *kserveAnswer) finish() {}

// serve runs q through the exchange, answering through a, with Triton's
// series. It returns the status the request ends with (nil: OK).
func (k *kserve) serve(q *kserveRequest, a *kserveAnswer) error {
	s, x := k.s, q.exchange
	a.q = q
	nv := k.tm()
	pending := nv.pending.WithLabelValues(nv.model, nv.version)
	pending.Inc() // until admitted
	x.onAdmit = pending.Dec
	reason := tritonCanceled // until it is answered
	finish := func() {
		end := time.Now()
		if x.admitted.IsZero() {
			pending.Dec()
		}
		nv.done(x.arrived, x.admitted, x.first, end, reason)
		s.truth.finish(x.rec, end)
	}
	if !s.enter() {
		x.outcome("cancelled")
		finish()
		return status.Error(codes.Unavailable, "the simulator is shutting down")
	}
	// The record is finished before the request leaves: WaitIdle then
	// sees its End.
	defer s.leave()
	defer finish()
	switch x.run(a) {
	case endAnswered:
		reason = ""
		return nil
	case endRefused:
		reason = tritonRejected
		return a.err
	case endFaulted:
		reason = tritonBackend
		return a.err
	case endHung:
		// A hung server answers nothing: when the client's deadline (which
		// gRPC carries to the server) ended the hang, the status is the
		// deadline's, as the client would see it from a server that never
		// answered; only the simulator's own shutdown says so.
		if err := x.ctx.Err(); err != nil {
			return status.FromContextError(err).Err()
		}
		return status.Error(codes.Unavailable, "the simulator hung (fault hang) and is shutting down")
	}
	if err := x.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Unavailable, "the simulator is shutting down")
}

// prompted is the answer's text with the prompt before it unless the
// request excluded it.
func (q *kserveRequest) prompted(text []byte) []byte {
	if q.exclude {
		return text
	}
	return append([]byte(q.text), text...)
}
