package kserve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tailgate-llm/tailgate/loadgen"
	pb "github.com/tailgate-llm/tailgate/loadgen/kserve/inferencepb"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

const (
	// drainAfterFinal bounds the wait for the stream's end after the final
	// response; it is not in End.
	drainAfterFinal = 100 * time.Millisecond
)

// Do sends p and fills rec; see the package documentation for what each
// instant means. It leaves rec.Finalize to the runner.
func (c *Client) Do(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		maxTokens = c.maxToks
	}
	rec.MaxTokens = maxTokens
	id := p.ID
	if id == "" {
		id = strconv.FormatInt(rec.Seq, 10)
	}
	spec := c.spec.Load()
	keepText := p.FollowUp != nil
	var (
		wire wireRequest
		req  *pb.ModelInferRequest
		err  error
	)
	overStream := !c.stream && c.unaryOverStream.Load()
	if c.stream || overStream {
		wire, err = c.streamRequest(spec, p, id, maxTokens, c.stream)
	} else {
		req, err = c.buildRequest(spec, p, id, maxTokens, false)
	}
	if err != nil {
		rec.Sent = rec.Now()
		rec.End = rec.Sent
		c.fail(rec, loadgen.ErrProtocol, 0, "building the request: "+err.Error())
		return
	}
	// A child context ends the stream whatever way Do returns.
	callCtx, cancel := context.WithCancel(c.outgoing(ctx, id))
	defer cancel()
	switch {
	case c.stream:
		c.doStream(ctx, callCtx, cancel, wire, id, rec, maxTokens, keepText)
	case overStream:
		// The unstreamed answer of a decoupled model, which refuses
		// ModelInfer: one response (stream false) over ModelStreamInfer.
		rec.Unstreamed = true
		c.doStream(ctx, callCtx, cancel, wire, id, rec, 0, keepText)
	default:
		c.doUnary(ctx, callCtx, cancel, req, rec, keepText, func() (wireRequest, error) {
			return c.streamRequest(spec, p, id, maxTokens, false)
		})
	}
}

// decoupledRefusal reports whether err is Triton refusing ModelInfer for a
// decoupled model ("ModelInfer RPC doesn't support models with decoupled
// transaction policy", UNIMPLEMENTED).
func decoupledRefusal(err error) bool {
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unimplemented && strings.Contains(st.Message(), "decoupled")
}

// response is the state of one request's answer.
type response struct {
	rec      *loadgen.Record
	sent     string // the model asked for
	keepText bool
	text     []byte
	ev       event
	pending  int // tokens counted on responses without text, owed to the next chunk
	final    bool
	n        int // responses read
}

// feedWhole takes a whole (non-streamed) answer: its chunks all arrive
// at once, at rec.End.
func (s *response) feedWhole(ev *event) {
	s.feed(ev)
	rec := s.rec
	for i := range rec.Chunks {
		rec.Chunks[i].At = rec.End
	}
	if len(rec.Chunks) > 0 {
		rec.FirstAnswer = rec.End
	}
}

// feed takes one decoded response: its text (a chunk when not empty),
// token counts, finish reason and final flag.
func (s *response) feed(ev *event) {
	s.n++
	rec := s.rec
	if rec.ResponseModel == "" && len(ev.model) > 0 {
		if string(ev.model) == s.sent {
			rec.ResponseModel = s.sent // no allocation in the common case
		} else {
			rec.ResponseModel = string(ev.model)
		}
	}
	if ev.tokens >= 0 {
		s.pending += int(ev.tokens)
		rec.OutputTokens += int(ev.tokens)
		rec.TokenSource = loadgen.TokensFromUsage
	}
	if ev.inTokens > 0 {
		rec.InputTokens = int(ev.inTokens)
	}
	if len(ev.finish) > 0 {
		rec.FinishReason = string(ev.finish)
	}
	if len(ev.text) > 0 {
		at := rec.Now()
		rec.AddChunk(loadgen.Chunk{At: at, Tokens: s.pending})
		s.pending = 0
		if rec.FirstAnswer == 0 {
			rec.FirstAnswer = at
		}
		if s.keepText {
			s.text = append(s.text, ev.text...)
		}
	}
	if ev.final {
		s.final = true
	}
}

// settle gives tokens still owed (counted on the last responses, which
// had no text) to the last chunk, and keeps the text when asked.
func (s *response) settle() {
	rec := s.rec
	if n := len(rec.Chunks); n > 0 && s.pending > 0 {
		rec.Chunks[n-1].Tokens += s.pending
		s.pending = 0
	}
	if s.keepText {
		rec.Text = string(s.text)
	}
}

// streamDesc is ModelStreamInfer's, for opening its streams directly.
var streamDesc = &pb.GRPCInferenceService_ServiceDesc.Streams[0]

// scratch is a stream's read buffers: a response's bytes and what is
// decoded of it, which grow to the server's response shape once and are
// then reused by later streams.
type scratch struct {
	req wireRequest
	fr  frame
	ev  event
}

// maxScratch bounds the buffer a scratch keeps: a large whole answer is
// not held for later streams.
const maxScratch = 64 << 10

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

// put returns sc, with ev's grown buffers, to the pool. Nothing read
// from either outlives the request: what the record keeps is copied.
func (sc *scratch) put(ev *event) {
	if cap(sc.fr.b) > maxScratch || cap(ev.text) > maxScratch {
		return
	}
	ev.reset()
	sc.ev = *ev
	sc.fr.b = sc.fr.b[:0]
	scratchPool.Put(sc)
}

// doStream sends wire, the encoded request of wantID, over
// ModelStreamInfer and reads its responses.
func (c *Client) doStream(ctx, callCtx context.Context, cancel context.CancelFunc, wire wireRequest, wantID string, rec *loadgen.Record, maxTokens int, keepText bool) {
	rec.ReserveChunks(maxTokens)
	sc := scratchPool.Get().(*scratch)
	s := response{rec: rec, sent: c.model, keepText: keepText, ev: sc.ev}
	defer func() {
		s.settle()
		sc.put(&s.ev)
	}()
	fr := &sc.fr
	// Sent is taken before the stream is opened: connection setup, when
	// the connection is not up yet, counts in TTFT as a user would feel it.
	rec.Sent = rec.Now()
	st, err := c.conns[c.pickIndex()].NewStream(callCtx, streamDesc, pb.GRPCInferenceService_ModelStreamInfer_FullMethodName, c.streamOpts...)
	if err == nil {
		// By pointer, from the scratch: a slice in an interface is a
		// heap copy of its header.
		sc.req = wire
		err = st.SendMsg(&sc.req)
		sc.req = nil
	}
	if err == nil {
		err = st.CloseSend()
	}
	if err != nil {
		// A failed Send hides the status: Recv has it.
		if st != nil && !errors.Is(err, io.EOF) {
			err = recvStatus(st, fr, err)
		} else if st != nil {
			err = st.RecvMsg(fr)
		}
		rec.End = rec.Now()
		kind, code, msg := classify(ctx, err, "before the response", false)
		c.fail(rec, kind, code, msg)
		return
	}
	ev := &s.ev
	for {
		err := st.RecvMsg(fr)
		if err != nil {
			rec.End = rec.Now()
			if errors.Is(err, io.EOF) {
				// The server ended the RPC with OK but no final response.
				c.fail(rec, loadgen.ErrStreamTruncated, 0,
					fmt.Sprintf("stream ended without %s after %d responses and %d chunks", ParamFinal, s.n, len(rec.Chunks)))
				return
			}
			kind, code, msg := classify(ctx, err, s.where(), s.n > 0)
			c.fail(rec, kind, code, msg)
			return
		}
		if err := decodeStream(fr.b, ev); err != nil {
			rec.End = rec.Now()
			c.fail(rec, loadgen.ErrProtocol, 0, fmt.Sprintf("response %d: %v", s.n+1, err))
			return
		}
		if len(ev.errMsg) > 0 {
			rec.End = rec.Now()
			c.fail(rec, loadgen.ErrStreamError, 0, "error in stream: "+transport.Truncate(string(ev.errMsg), transport.MaxErrorMessage))
			return
		}
		if !ev.hasResp {
			continue
		}
		if len(ev.id) > 0 && string(ev.id) != wantID {
			rec.End = rec.Now()
			c.fail(rec, loadgen.ErrProtocol, 0, fmt.Sprintf("response for request %q on the stream of %q", ev.id, wantID))
			return
		}
		s.feed(ev)
		if rec.Overran() {
			// Not read on: a server that ignores max_tokens may never end.
			rec.End = rec.Now()
			rec.OverGeneration()
			return
		}
		if s.final {
			rec.End = rec.Now()
			// Read the RPC's end (the server closes a half-closed stream
			// once its requests are answered), briefly, so the stream ends
			// cleanly rather than by our cancellation.
			t := time.AfterFunc(drainAfterFinal, cancel)
			for st.RecvMsg(fr) == nil {
			}
			t.Stop()
			return
		}
	}
}

// where describes how far a stream got, for error messages.
func (s *response) where() string {
	return fmt.Sprintf("after %d responses and %d chunks", s.n, len(s.rec.Chunks))
}

// recvStatus reads the status a failed Send stands for.
func recvStatus(st grpc.ClientStream, fr *frame, sendErr error) error {
	for {
		if err := st.RecvMsg(fr); err != nil {
			if errors.Is(err, io.EOF) {
				return sendErr
			}
			return err
		}
	}
}

// doUnary sends req by ModelInfer; overStream encodes it for
// ModelStreamInfer, should the model refuse ModelInfer as decoupled.
func (c *Client) doUnary(ctx, callCtx context.Context, cancel context.CancelFunc, req *pb.ModelInferRequest, rec *loadgen.Record, keepText bool, overStream func() (wireRequest, error)) {
	rec.Unstreamed = true
	s := response{rec: rec, sent: req.GetModelName(), keepText: keepText}
	defer s.settle()
	rec.Sent = rec.Now()
	r, err := c.pick().ModelInfer(callCtx, req)
	rec.End = rec.Now()
	if err != nil && decoupledRefusal(err) {
		// The model is decoupled: from now on every unstreamed request goes
		// over ModelStreamInfer. This one is sent again at once; its
		// latency still counts from the intended start, and Sent stays the
		// first send.
		if c.unaryOverStream.CompareAndSwap(false, true) && c.warn != nil {
			c.warn("the model is decoupled and refuses ModelInfer: --stream=false requests go over ModelStreamInfer, one response each")
		}
		sent := rec.Sent
		rec.Retries++
		rec.Unstreamed = true
		wire, err := overStream()
		if err != nil {
			c.fail(rec, loadgen.ErrProtocol, 0, "building the request: "+err.Error())
			return
		}
		c.doStream(ctx, callCtx, cancel, wire, req.GetId(), rec, 0, keepText)
		rec.Sent = sent
		return
	}
	if err != nil {
		kind, code, msg := classify(ctx, err, "before the response", false)
		c.fail(rec, kind, code, msg)
		return
	}
	s.ev.reset()
	if err := decodeResponse(r, &s.ev); err != nil {
		c.fail(rec, loadgen.ErrProtocol, 0, "response: "+err.Error())
		return
	}
	s.feedWhole(&s.ev)
}

// fail records an error, scrubbed of every credential the client holds; a
// refusal for length is context_length, as over HTTP.
func (c *Client) fail(rec *loadgen.Record, kind loadgen.ErrorKind, code int, msg string) {
	rec.ErrorKind, rec.Error = transport.ContextKind(kind, msg), c.scrub(msg)
	if code != 0 {
		rec.Status = code
	}
}
