package openai

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/sse"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

const (
	// maxResponseBytes bounds a non-streamed response body.
	maxResponseBytes = 64 << 20
	// drainAfterDone bounds the wait for the end of the body after [DONE]:
	// reading to EOF lets the connection be reused; a server that keeps
	// the stream open after [DONE] costs only this much.
	drainAfterDone      = 100 * time.Millisecond
	maxDrainBytes       = 256 << 10
	maxPooledEventBytes = 1 << 20
)

// scannerPool's scanners borrow their read buffers (4 KiB: token events
// are ~200 bytes and come a few at a time; longer lines are assembled
// apart) only while they hold unread input: over the lean client's bodies
// (an sse.Waiter) a stream that waits for its next token holds none.
var scannerPool = sync.Pool{New: func() any { return sse.NewPooledScanner() }}

func getScanner(r io.Reader) *sse.Scanner {
	s := scannerPool.Get().(*sse.Scanner)
	s.Reset(r)
	return s
}

func putScanner(s *sse.Scanner) {
	if s.RetainedBytes() > maxPooledEventBytes {
		return // let one huge event's buffers go
	}
	s.Reset(nil)
	scannerPool.Put(s)
}

// Do sends p and fills rec; see the package documentation for what each
// instant means. It leaves rec.Finalize to the runner. The answer's text is
// kept in rec.Text only when p has a FollowUp (the next turn is built from
// it).
//
// Do's frame is on the stack of every stream while it waits for its next
// token; the work before and after the reading is in functions of their
// own, so that the goroutine's stack shrinks to 4 KiB while it waits.
func (c *Client) Do(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	maxTokens := p.MaxTokens
	if maxTokens == 0 {
		maxTokens = c.maxToks
	}
	rec.MaxTokens = maxTokens
	// The drain after [DONE] is bounded by a read deadline on the lean
	// client's bodies; on net/http's, by a child context, cancelled without
	// touching the caller's. (A context per stream, its done channel and
	// its parent's map of children, is half a kilobyte a stream.)
	reqCtx, cancel := ctx, context.CancelFunc(nil)
	if !c.lean {
		reqCtx, cancel = context.WithCancel(ctx)
		defer cancel()
	}
	resp := c.send(reqCtx, p, rec, maxTokens)
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	switch c.answer(resp, rec) {
	case answerStream:
		c.readStream(ctx, cancel, resp.Body, rec, maxTokens, p.FollowUp != nil, c.modelOf(p))
	case answerWhole:
		c.readWhole(ctx, resp.Body, rec, p.FollowUp != nil, c.modelOf(p))
	}
}

// KeepsDeadline says whether requests go on the lean HTTP client, which
// ends a request at its context's deadline by a connection deadline
// (loadgen.DeadlineKeeper): the runner then gives requests no timer of
// their own.
func (c *Client) KeepsDeadline() bool { return c.lean }

// send builds and sends p's request; nil when it failed (rec says why).
// Sent is the first send, even when the transport re-sends on a fresh
// connection (rec.Retries): schedule lag is the generator's lateness. A
// prompt without Params is built in a pooled buffer that the transport
// gives back when nothing of the request refers to it (SendOwn). Not
// inlined: see Do.
//
//go:noinline
func (c *Client) send(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record, maxTokens int) *http.Response {
	if len(p.Params) != 0 {
		return c.sendMap(ctx, p, rec, maxTokens)
	}
	bp := bodyPool.Get().(*[]byte)
	body := c.appendPlainBody((*bp)[:0], p, maxTokens)
	resp, own := c.http.SendOwn(ctx, rec, transport.Post{URL: c.url, Body: body, ID: p.ID, Header: p.Headers, ErrorWords: transport.ErrorWords})
	*bp = nil
	if own && cap(body) <= maxPooledBody {
		*bp = body[:0]
	}
	bodyPool.Put(bp)
	return resp
}

// maxPooledBody bounds the request bodies bodyPool keeps.
const maxPooledBody = 64 << 10

// bodyPool holds request bodies' buffers that the transport gave back
// (SendOwn). A box whose body was not given back returns empty: its
// buffer stays the request's.
var bodyPool = sync.Pool{New: func() any { return new([]byte) }}

// sendMap is send for a prompt with Params (mapBody). Not inlined: its
// frame would be send's, on the stack while the request is sent.
//
//go:noinline
func (c *Client) sendMap(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record, maxTokens int) *http.Response {
	body, err := c.mapBody(p, maxTokens)
	if err != nil {
		c.http.FailBuilding(rec, err)
		return nil
	}
	return c.http.Send(ctx, rec, transport.Post{URL: c.url, Body: body, ID: p.ID, Header: p.Headers, ErrorWords: transport.ErrorWords})
}

// What an answer's body is.
const (
	answerStream = iota
	answerWhole
	answerWrong // failed on rec
)

// answer says how to read resp's body. The Content-Type wins over what was
// asked for: some servers ignore "stream" one way or the other. Without
// one, trust the request. Not inlined: see Do.
//
//go:noinline
func (c *Client) answer(resp *http.Response, rec *loadgen.Record) int {
	ct := resp.Header.Get("Content-Type")
	switch mediaType(ct) {
	case "text/event-stream":
		return answerStream
	case "application/json":
		return answerWhole
	case "":
		if c.stream {
			return answerStream
		}
		return answerWhole
	}
	// An HTML error page from a proxy or a login wall: say what came,
	// rather than call it a truncated stream.
	rec.End = rec.Now()
	want := "an event stream"
	if !c.stream {
		want = "JSON"
	}
	c.http.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("HTTP %d with Content-Type %q, not %s", resp.StatusCode, ct, want))
	return answerWrong
}

// mediaType is the lower-case media type of a Content-Type value, without
// parameters; "+json" suffixes count as JSON.
func mediaType(ct string) string {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if strings.HasSuffix(mt, "+json") {
		return "application/json"
	}
	return mt
}

// mapBody is the general body: a map, so Params override any key, through
// encoding/json (keys sorted). Prompt.Params may override anything but the
// input and "stream", which the reader's mode depends on.
func (c *Client) mapBody(p *prompts.Prompt, maxTokens int) ([]byte, error) {
	m := make(map[string]any, 6+len(p.Params))
	if model := c.modelOf(p); model != "" {
		m["model"] = model
	}
	if maxTokens > 0 {
		m["max_tokens"] = maxTokens
	}
	if c.stream && c.usage {
		m["stream_options"] = map[string]bool{"include_usage": true}
	}
	for k, v := range p.Params {
		if k != "model" { // modelOf has it, Prompt.Model first
			m[k] = v
		}
	}
	m["stream"] = c.stream
	if c.api == APIChat {
		msgs := p.Chat()
		if msgs == nil {
			msgs = []prompts.Message{}
		}
		m["messages"] = msgs
		delete(m, "prompt")
	} else {
		m["prompt"] = p.Completion()
		delete(m, "messages")
	}
	return transport.EncodeJSON(m)
}

// stream is the state of one streamed response.
type stream struct {
	rec      *loadgen.Record
	keepText bool
	sent     string // the model asked for (responseModel)
	text     []byte
	ev       event
	shape    shape // the stream's last event shape: most events are decoded through it

	events    int  // JSON events decoded
	doneSeen  bool // data: [DONE]
	overran   bool // past the output bound: reading stopped
	finished  bool // some chunk carried a finish_reason
	cumTokens int  // cumulative completion tokens attributed to chunks so far

	kind loadgen.ErrorKind
	msg  string
}

// run feeds every event of sc to the record until [DONE], an error event,
// or the end of input. It waits for each event here, where the stack is
// shallow: most streams are waiting at any instant, and a goroutine's
// stack shrinks only to a size that holds what it uses while it waits.
func (s *stream) run(sc *sse.Scanner) {
	for {
		sc.Wait()
		if !sc.Next() || !s.feed(sc) {
			return
		}
	}
}

// feed handles one event and reports whether to read on.
func (s *stream) feed(sc *sse.Scanner) bool {
	if e := sc.ErrorData(); len(e) > 0 {
		s.streamError(e) // old llama.cpp "error:" field line
		return false
	}
	data := sc.Data()
	if n := len(data); n > 0 && (notPlain(data[0]) || notPlain(data[n-1])) {
		data = bytes.TrimSpace(data) // TRT-LLM pads with a space
	}
	if t := sc.Type(); len(t) > 0 && string(t) == "error" {
		s.streamError(data)
		return false
	}
	if len(data) == 0 {
		return true
	}
	if data[0] == '[' && string(data) == "[DONE]" {
		s.doneSeen = true
		return false
	}
	s.events++
	text, err := s.shape.decode(data, &s.ev, s.text, s.keepText)
	if err != nil {
		s.kind = loadgen.ErrProtocol
		s.msg = fmt.Sprintf("event %d: bad chunk JSON: %v: %s", s.events, err, transport.QuoteSnippet(data))
		return false
	}
	s.text = text
	if s.events == 1 {
		s.rec.ResponseModel = responseModel(data, s.sent)
	}
	ev := &s.ev
	if ev.isError {
		s.kind, s.msg = loadgen.ErrStreamError, "error event in stream: "+transport.DescribeError(ev.errMessage, ev.errCode, "")
		return false
	}
	rec := s.rec
	if ev.answer || ev.reasoning {
		now := rec.Now()
		tokens := 0
		// A cumulative count (vLLM continuous_usage_stats, llama.cpp
		// timings) makes this chunk's share exact. Tokens counted on chunks
		// without text are held back by the detokenizer and come out with
		// the next text, so they are attributed to it.
		if cum := cumulative(ev); cum > s.cumTokens {
			tokens = cum - s.cumTokens
			s.cumTokens = cum
		}
		rec.AddChunk(loadgen.Chunk{At: now, Tokens: tokens})
		if rec.Overran() {
			s.overran = true
			return false
		}
		if ev.answer && rec.FirstAnswer == 0 {
			rec.FirstAnswer = now
		}
	}
	if ev.finish != "" {
		rec.FinishReason = ev.finish
		s.finished = true
	}
	applyUsage(rec, ev)
	applyTimings(rec, ev)
	return true
}

// notPlain: c may begin or end white space that bytes.TrimSpace would
// trim (ASCII, or a non-ASCII rune); chunks begin with '{' and end with '}'.
func notPlain(c byte) bool { return c <= ' ' || c >= 0x80 }

// applyTimings takes llama.cpp's timings object (prefill and generation,
// the latest chunk's) as the record's server timings.
func applyTimings(rec *loadgen.Record, ev *event) {
	if ev.promptMs <= 0 && ev.predictedMs <= 0 {
		return
	}
	if rec.Server == nil {
		rec.Server = &loadgen.ServerTimings{}
	}
	ms := func(v float64) time.Duration { return time.Duration(max(v, 0) * float64(time.Millisecond)) }
	rec.Server.Prompt, rec.Server.Eval = ms(ev.promptMs), ms(ev.predictedMs)
}

func cumulative(ev *event) int {
	if ev.completionTokens > 0 {
		return ev.completionTokens
	}
	return ev.predictedTokens
}

// applyUsage takes a usage object's counts. The latest non-zero one wins:
// with continuous usage every chunk has one and the last is the total;
// Ollama's zero-valued usage on every chunk is ignored.
func applyUsage(rec *loadgen.Record, ev *event) {
	if !ev.usage || (ev.promptTokens <= 0 && ev.completionTokens <= 0) {
		return
	}
	if ev.promptTokens >= 0 {
		rec.InputTokens = ev.promptTokens
	}
	if ev.completionTokens >= 0 {
		rec.OutputTokens = ev.completionTokens
		rec.TokenSource = loadgen.TokensFromUsage
	}
}

func (s *stream) streamError(data []byte) {
	s.kind = loadgen.ErrStreamError
	var ev event
	if _, err := decodeEvent(data, &ev, nil, false); err == nil {
		if ev.isError {
			s.msg = "error event in stream: " + transport.DescribeError(ev.errMessage, ev.errCode, "")
			return
		}
		// The old llama.cpp field holds the error object itself.
		if msg, code, typ := transport.ErrorFields(data); msg != "" || code != "" || typ != "" {
			s.msg = "error event in stream: " + transport.DescribeError(msg, code, typ)
			return
		}
	}
	s.msg = "error event in stream: " + transport.QuoteSnippet(data)
}

func (c *Client) readStream(ctx context.Context, cancel context.CancelFunc, body io.Reader, rec *loadgen.Record, maxTokens int, keepText bool, sent string) {
	sc := getScanner(body)
	defer putScanner(sc)
	rec.ReserveChunks(maxTokens)
	s := getStream(rec, keepText, sent)
	defer putStream(s)
	s.run(sc)
	c.endStream(ctx, cancel, body, sc, s)
}

// streamPool's streams keep their shape's buffer (at most maxShapeBytes)
// from one stream to the next: the first event's copy into it is then no
// allocation. Nothing of a stream outlives it in the record: the text,
// the model and the finish reason are copied out (rec.Text, strings).
var streamPool = sync.Pool{New: func() any { return new(stream) }}

func getStream(rec *loadgen.Record, keepText bool, sent string) *stream {
	s := streamPool.Get().(*stream)
	*s = stream{rec: rec, keepText: keepText, sent: sent, shape: shape{b: s.shape.b[:0]}}
	return s
}

// putStream gives s back holding no record, text or message.
func putStream(s *stream) {
	*s = stream{shape: shape{b: s.shape.b[:0]}}
	streamPool.Put(s)
}

// endStream settles a stream's record once its events are read. Not
// inlined: see Do.
//
//go:noinline
func (c *Client) endStream(ctx context.Context, cancel context.CancelFunc, body io.Reader, sc *sse.Scanner, s *stream) {
	rec, keepText := s.rec, s.keepText
	rec.End = rec.Now()
	if keepText {
		rec.Text = string(s.text)
	}
	switch {
	case s.overran:
		// Not drained: a server that ignores max_tokens may never end.
		rec.OverGeneration()
		return
	case s.kind != loadgen.ErrNone:
		c.http.Fail(rec, s.kind, s.msg)
	case s.doneSeen:
	case sc.Err() != nil:
		err := sc.Err()
		if errors.Is(err, sse.ErrEventTooLarge) {
			c.http.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("after %d events: %v", s.events, err))
			return
		}
		kind, msg := transport.ClassifyBody(ctx, err, fmt.Sprintf("after %d events and %d chunks", s.events, len(rec.Chunks)))
		c.http.Fail(rec, kind, msg)
		return
	case s.finished && !sc.PartialLine():
		// No [DONE], but the body ended cleanly after a finish_reason:
		// the answer is complete (servers that omit the terminator).
	default:
		c.http.Fail(rec, loadgen.ErrStreamTruncated,
			fmt.Sprintf("stream ended without [DONE] after %d events and %d chunks", s.events, len(rec.Chunks)))
		return
	}
	if sc.Err() == nil {
		drain(sc, body, cancel)
	}
}

// drain reads the rest of the body, briefly, so the connection is reused.
// A read deadline on the body bounds it (the lean client's), else
// cancelling the request's context (net/http's); with neither (a request
// that went through net/http unforeseen), the body is left unread and its
// connection is not reused.
func drain(sc *sse.Scanner, body io.Reader, cancel context.CancelFunc) {
	if d, ok := body.(interface{ SetReadDeadline(time.Time) error }); ok {
		_ = d.SetReadDeadline(time.Now().Add(drainAfterDone))
	} else if cancel != nil {
		t := time.AfterFunc(drainAfterDone, cancel)
		defer t.Stop()
	} else {
		return
	}
	discard(sc.Rest(), maxDrainBytes)
}

var drainPool = sync.Pool{New: func() any { return new([8 << 10]byte) }}

// discard reads and drops at most n bytes of r, to its end or first
// error: io.CopyN to io.Discard without the io.LimitReader it allocates
// for every request.
func discard(r io.Reader, n int64) {
	buf := drainPool.Get().(*[8 << 10]byte)
	for n > 0 {
		m, err := r.Read(buf[:min(n, int64(len(buf)))])
		n -= int64(m)
		if err != nil {
			break
		}
	}
	drainPool.Put(buf)
}

// readWhole reads a non-streamed answer: asked for (--stream=false) or a
// server that ignored "stream". Either way the record is Unstreamed: its
// one chunk at the end gives TTFT = E2E and no inter-token gaps.
func (c *Client) readWhole(ctx context.Context, body io.Reader, rec *loadgen.Record, keepText bool, sent string) {
	rec.Unstreamed = true
	b, kind, msg := transport.ReadWhole(ctx, body, maxResponseBytes)
	rec.End = rec.Now()
	if kind != loadgen.ErrNone {
		c.http.Fail(rec, kind, msg)
		return
	}
	var ev event
	text, err := decodeEvent(b, &ev, nil, keepText)
	if err != nil {
		c.http.Fail(rec, loadgen.ErrProtocol, fmt.Sprintf("bad response JSON: %v: %s", err, transport.QuoteSnippet(b)))
		return
	}
	rec.ResponseModel = responseModel(b, sent)
	if ev.isError {
		c.http.Fail(rec, loadgen.ErrStreamError, "error in response: "+transport.DescribeError(ev.errMessage, ev.errCode, ""))
		return
	}
	// One chunk at the end of the body: the whole answer arrives at once.
	if ev.answer || ev.reasoning || ev.completionTokens > 0 {
		rec.Chunks = append(rec.Chunks, loadgen.Chunk{At: rec.End, Tokens: max(ev.completionTokens, 0)})
		if ev.answer {
			rec.FirstAnswer = rec.End
		}
	}
	rec.FinishReason = ev.finish
	applyUsage(rec, &ev)
	applyTimings(rec, &ev)
	if keepText {
		rec.Text = string(text)
	}
}
