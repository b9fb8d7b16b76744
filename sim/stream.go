package sim

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// vocab is the answer text: common English words that are one token each in
// the usual BPE vocabularies (leading space included), cycled.
var vocab = [...]string{" the", " of", " and", " to", " in", " a", " is", " that",
	" for", " it", " as", " was", " with", " be", " on", " not"}

// textTable holds the pre-rendered text of every possible chunk: the chunk
// starting at token i is full[i%len(vocab)] cut to its first n words.
type textTable struct {
	full [len(vocab)][]byte
	cut  [len(vocab)][]int // cut[i][n] = byte length of the first n words
}

func newTextTable(tokensPerChunk int) *textTable {
	t := &textTable{}
	for i := range vocab {
		cut := make([]int, tokensPerChunk+1)
		var b []byte
		for n := 0; n < tokensPerChunk; n++ {
			b = append(b, vocab[(i+n)%len(vocab)]...)
			cut[n+1] = len(b)
		}
		t.full[i], t.cut[i] = b, cut
	}
	return t
}

// text returns the words for tokens [start, start+n).
func (t *textTable) text(start, n int) []byte {
	i := start % len(vocab)
	return t.full[i][:t.cut[i][n]]
}

// answer returns the whole answer of n tokens.
func answer(n int) []byte {
	b := make([]byte, 0, n*4)
	for i := 0; i < n; i++ {
		b = append(b, vocab[i%len(vocab)]...)
	}
	return b
}

// Event pieces. Content chunks are base + open + text + close [+ usage] + end.
const (
	chatRole       = `,"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]`
	chatOpen       = `,"choices":[{"index":0,"delta":{"content":"`
	chatClose      = `"},"logprobs":null,"finish_reason":null}]`
	chatCloseLast  = `"},"logprobs":null,"finish_reason":"length","stop_reason":null}]`
	chatFinish     = `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length","stop_reason":null}]`
	complOpen      = `,"choices":[{"index":0,"text":"`
	complClose     = `","logprobs":null,"finish_reason":null,"stop_reason":null}]`
	complCloseLast = `","logprobs":null,"finish_reason":"length","stop_reason":null}]`
	complFinish    = `,"choices":[{"index":0,"text":"","logprobs":null,"finish_reason":"length","stop_reason":null}]`
	eventEnd       = "}\n\n"
	doneEvent      = "data: [DONE]\n\n"
	errorEvent     = `data: {"error": {"message": "simulated engine failure (fault error_in_stream)", "type": "InternalServerError", "param": null, "code": 500}}` + "\n\n"
)

// llama-server's chunk pieces (DialectLlamaCpp): "choices" first, then the
// tail (created, id, model, system_fingerprint, object).
const (
	llamaChatOpen   = `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"`
	llamaChatClose  = `"}}]`
	llamaComplOpen  = `data: {"choices":[{"text":"`
	llamaComplClose = `","index":0,"logprobs":null,"finish_reason":null}]`
	llamaUsageOpen  = `data: {"choices":[]`
	llamaFinger     = "b0-unknown" // a llama.cpp build without version info, as in the capture
)

// The finish chunks of an answer that ended at an end-of-sequence token.
var (
	chatFinishStop  = strings.Replace(chatFinish, `"length"`, `"stop"`, 1)
	complFinishStop = strings.Replace(complFinish, `"length"`, `"stop"`, 1)
)

// responder writes one request's response and records its truth. It is
// used by one goroutine, the request's handler.
type responder struct {
	s   *Server
	w   http.ResponseWriter
	rc  *http.ResponseController
	ctx context.Context
	rec *truthRec

	chat, stream, includeUsage, contUsage bool
	chunkedOK                             bool // HTTP/1.1: a body without Content-Length is chunked
	fault                                 FaultKind
	faultFor                              time.Duration

	prompt, max int
	content     int  // tokens to send: max, or max−1 when the last is an unsent EOS
	eos         bool // the answer ends at an EOS token (Config.EOSNotStreamed)
	mid         int  // content chunks before mid-stream faults fire

	llama  bool   // DialectLlamaCpp stream
	tail   []byte // llama: `,"created":…,"id":"…","model":"…","system_fingerprint":"…","object":"…"`
	base   []byte // `data: {"id":"…","object":"…","created":…,"model":"…"`
	open   []byte // base + chatOpen/complOpen
	buf    []byte
	sent   int // content tokens sent
	chunks int // content chunks sent

	arrived, admitted, last time.Time
	firstAt                 time.Time // first content chunk flushed
	midDone                 bool
	ended                   bool // finish sent or the stream was ended by a fault
	faulted                 bool // a mid-stream fault ended the response (sendChunk)
	engine                  int  // the engine serving it (ModeBatch)
}

func (s *Server) newResponder(w http.ResponseWriter, r *http.Request, rec *truthRec, req *parsedRequest, seqNo int64, id string) *responder {
	rs := &responder{s: s, w: w, rc: http.NewResponseController(w), ctx: r.Context(), rec: rec,
		chunkedOK: r.ProtoAtLeast(1, 1),
		chat:      req.chat, stream: req.stream, includeUsage: req.includeUsage, contUsage: req.contUsage,
		fault: req.fault, faultFor: req.faultFor, prompt: req.promptTokens, max: req.maxTokens,
		arrived: req.arrived, eos: s.cfg.EOSNotStreamed}
	rs.content = rs.max
	if rs.eos {
		rs.content--
	}
	nchunks := (rs.content + s.cfg.TokensPerChunk - 1) / s.cfg.TokensPerChunk
	rs.mid = nchunks / 2
	object, prefix := "chat.completion.chunk", "chatcmpl-"
	if !rs.chat {
		object, prefix = "text_completion", "cmpl-"
	}
	if !rs.stream {
		object = "chat.completion"
		if !rs.chat {
			object = "text_completion"
		}
	}
	b := make([]byte, 0, 128+len(id)+len(s.modelJSON))
	if rs.stream {
		b = append(b, "data: "...)
	}
	b = append(b, `{"id":`...)
	b = appendJSONString(b, prefix+id)
	b = append(b, `,"object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, time.Now().Unix(), 10)
	b = append(b, `,"model":`...)
	b = append(b, s.modelJSON...)
	rs.base = b
	open := chatOpen
	if !rs.chat {
		open = complOpen
	}
	if rs.stream && s.cfg.Dialect == DialectLlamaCpp {
		rs.llama = true
		t := make([]byte, 0, 128+len(id)+len(s.modelJSON))
		t = append(t, `,"created":`...)
		t = strconv.AppendInt(t, time.Now().Unix(), 10)
		t = append(t, `,"id":`...)
		t = appendJSONString(t, prefix+id)
		t = append(t, `,"model":`...)
		t = append(t, s.modelJSON...)
		t = append(t, `,"system_fingerprint":"`+llamaFinger+`","object":"`...)
		t = append(t, object...)
		rs.tail = append(t, '"')
		open = llamaChatOpen
		if !rs.chat {
			open = llamaComplOpen
		}
		rs.open = append(make([]byte, 0, len(open)), open...)
		rs.buf = make([]byte, 0, len(rs.open)+len(rs.tail)+512)
		return rs
	}
	rs.open = append(append(make([]byte, 0, len(b)+len(open)), b...), open...)
	rs.buf = make([]byte, 0, len(rs.open)+256)
	return rs
}

// appendJSONString appends s as a JSON string.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c == 0x7f || c == '<' || c == '>' || c == '&':
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

func (rs *responder) appendUsage(b []byte, completion int) []byte {
	b = append(b, `"usage":{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	return append(b, '}')
}

// flush pushes buffered bytes to the client; false if the client is gone.
func (rs *responder) flush() bool {
	return rs.rc.Flush() == nil
}

// start sends the headers and, for chat streams, the role-only chunk, at
// once on admission to the server (before any queueing), so a client that
// takes the first chunk for the first token measures almost no TTFT.
func (rs *responder) start() bool {
	if !rs.stream {
		return true
	}
	h := rs.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	rs.w.WriteHeader(http.StatusOK)
	if rs.chat && !rs.llama { // llama-server sends no role chunk
		b := append(rs.buf[:0], rs.base...)
		b = append(b, chatRole...)
		b = append(b, eventEnd...)
		rs.buf = b
		if _, err := rs.w.Write(b); err != nil {
			return false
		}
	}
	if !rs.flush() {
		return false
	}
	now := time.Now()
	rs.rec.update(func(t *Truth) { t.Status = http.StatusOK; t.Headers = now })
	return true
}

// beforeChunk fires the mid-stream faults. It returns false when the
// response has been ended (the handler must stop); truncate does not return.
func (rs *responder) beforeChunk() bool {
	if rs.midDone || rs.chunks < rs.mid {
		return true
	}
	rs.midDone = true
	switch rs.fault {
	case FaultTruncate:
		rs.markFault()
		if rs.stream {
			rs.flush()
		} else {
			rs.w.Header().Set("Content-Type", "application/json")
			rs.w.WriteHeader(http.StatusOK)
			b := append(rs.buf[:0], rs.base...)
			b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
			b = append(b, answer(rs.sent)...)
			rs.w.Write(b)
			rs.flush()
			rs.rec.update(func(t *Truth) { t.Status = http.StatusOK })
		}
		// Abort the connection: no terminating chunk, no [DONE].
		panic(http.ErrAbortHandler)
	case FaultMalformed:
		rs.markFault()
		if !rs.stream {
			rs.w.Header().Set("Content-Type", "application/json")
			rs.w.WriteHeader(http.StatusOK)
			b := append(rs.buf[:0], rs.base...)
			b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
			rs.w.Write(b)
			rs.rec.update(func(t *Truth) { t.Status = http.StatusOK })
			rs.ended = true
			return false
		}
		b := append(rs.buf[:0], rs.base...)
		b = append(b, `,"choices":[{"index":0,"delta":{"content":"`...)
		b = append(b, "\n\n"...)
		rs.buf = b
		if _, err := rs.w.Write(b); err != nil || !rs.flush() {
			return false
		}
		return true
	case FaultErrorInStream:
		rs.markFault()
		rs.ended = true
		if !rs.stream {
			rs.s.writeError(rs.w, rs.rec, http.StatusInternalServerError, "InternalServerError",
				"simulated engine failure (fault error_in_stream)")
			return false
		}
		rs.w.Write([]byte(errorEvent))
		rs.w.Write([]byte(doneEvent))
		rs.flush()
		return false
	}
	return true
}

// sendChunk fires the mid-stream faults and sends n tokens. It returns
// false when the handler must stop: a fault ended the response (faulted)
// or the client is gone.
func (rs *responder) sendChunk(n int) bool {
	if !rs.beforeChunk() {
		rs.faulted = true
		return false
	}
	return rs.chunk(n)
}

// job is the request as runOnEngine and runOnTimer take it.
func (rs *responder) job(seqNo int64) engineJob {
	return engineJob{prompt: rs.prompt, max: rs.max, arrived: rs.arrived, fault: rs.fault, faultFor: rs.faultFor, mid: rs.mid, seqNo: seqNo}
}

// admit records the request's admission (left the queue).
func (rs *responder) admit(at time.Time) {
	rs.admitted = at
	rs.rec.update(func(t *Truth) { t.Admitted = at })
}

// settle ends the response when runOnEngine or runOnTimer returns: the
// finish when every token was made (done), else cancelled, unless a
// fault ended it.
func (rs *responder) settle(done bool) {
	switch {
	case done:
		rs.finish()
	case !rs.faulted:
		rs.cancelled()
	}
}

func (rs *responder) markFault() {
	rs.rec.update(func(t *Truth) { t.Outcome = "fault" })
}

// chunk sends one content chunk of n tokens (streaming) or just counts them
// (non-streaming). It returns false if the client is gone.
func (rs *responder) chunk(n int) bool {
	if !rs.stream {
		now := time.Now()
		if rs.sent == 0 {
			rs.s.metrics.engine(rs.engine).ttft.Observe(now.Sub(rs.arrived).Seconds())
		}
		rs.sent += n
		rs.chunks++
		rs.last = now
		return true
	}
	// With an unsent EOS the finish comes in its own chunk, a step later.
	last := rs.sent+n >= rs.max && rs.s.cfg.FinishWithLastChunk && !rs.llama
	b := append(rs.buf[:0], rs.open...)
	b = append(b, rs.s.text.text(rs.sent, n)...)
	switch {
	case rs.llama && rs.chat:
		b = append(b, llamaChatClose...)
		b = append(b, rs.tail...)
	case rs.llama:
		b = append(b, llamaComplClose...)
		b = append(b, rs.tail...)
	case last && rs.chat:
		b = append(b, chatCloseLast...)
	case last:
		b = append(b, complCloseLast...)
	case rs.chat:
		b = append(b, chatClose...)
	default:
		b = append(b, complClose...)
	}
	if rs.contUsage && !rs.llama {
		b = append(b, ',')
		b = rs.appendUsage(b, rs.sent+n)
	}
	b = append(b, eventEnd...)
	rs.buf = b
	began := time.Now()
	if _, err := rs.w.Write(b); err != nil {
		return false
	}
	if !rs.flush() {
		return false
	}
	now := time.Now()
	m := rs.s.metrics.engine(rs.engine)
	if rs.sent == 0 {
		m.ttft.Observe(now.Sub(rs.arrived).Seconds())
	} else {
		m.itl.Observe(now.Sub(rs.last).Seconds() / float64(n))
	}
	rs.rec.chunk(began, now, n)
	if rs.sent == 0 {
		rs.firstAt = now
	}
	rs.sent += n
	rs.chunks++
	rs.last = now
	if last {
		rs.ended = true
	}
	return true
}

// completionTokens is usage completion_tokens once the answer is complete:
// what was sent, and the EOS token that was not.
func (rs *responder) completionTokens() int {
	if rs.eos {
		return rs.sent + 1
	}
	return rs.sent
}

// finishReason is "stop" for an answer that ended at its EOS token, else
// "length" (max_tokens reached).
func (rs *responder) finishReason() string {
	if rs.eos {
		return "stop"
	}
	return "length"
}

// finish ends a complete response: finish chunk, usage, [DONE] for streams;
// the whole JSON body otherwise.
func (rs *responder) finish() {
	m := rs.s.metrics.engine(rs.engine)
	defer func() {
		m.e2e.Observe(time.Since(rs.arrived).Seconds())
		m.successLen.Inc()
	}()
	completion := rs.completionTokens()
	rs.rec.update(func(t *Truth) {
		t.CompletionTokens = completion
		t.FinishReason = rs.finishReason()
	})
	if !rs.stream {
		rs.finishJSON()
		return
	}
	if rs.llama {
		rs.finishLlama(completion)
		return
	}
	b := rs.buf[:0]
	if !rs.s.cfg.FinishWithLastChunk || rs.eos {
		b = append(b, rs.base...)
		switch {
		case rs.chat && rs.eos:
			b = append(b, chatFinishStop...)
		case rs.chat:
			b = append(b, chatFinish...)
		case rs.eos:
			b = append(b, complFinishStop...)
		default:
			b = append(b, complFinish...)
		}
		if rs.contUsage {
			b = append(b, ',')
			b = rs.appendUsage(b, completion)
		}
		b = append(b, eventEnd...)
	}
	if rs.includeUsage {
		b = append(b, rs.base...)
		b = append(b, `,"choices":[],`...)
		b = rs.appendUsage(b, completion)
		b = append(b, eventEnd...)
	}
	b = append(b, doneEvent...)
	rs.buf = b
	rs.w.Write(b)
	rs.flush()
	rs.ended = true
}

// finishLlama ends a llama-server stream: a finish chunk with an empty
// delta, then usage and timings, on that chunk or (include_usage) on a
// "choices":[] chunk of their own, then [DONE].
func (rs *responder) finishLlama(completion int) {
	b := append(rs.buf[:0], `data: {"choices":[{"finish_reason":"`...)
	b = append(b, rs.finishReason()...)
	if rs.chat {
		b = append(b, `","index":0,"delta":{}}]`...)
	} else {
		b = append(b, `","index":0,"text":"","logprobs":null}]`...)
	}
	b = append(b, rs.tail...)
	if rs.includeUsage {
		b = append(b, eventEnd...)
		b = append(b, llamaUsageOpen...)
		b = append(b, rs.tail...)
	}
	b = append(b, `,"usage":{"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = append(b, `,"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(rs.prompt+completion), 10)
	b = append(b, `},"timings":`...)
	b = rs.appendTimings(b, completion, time.Now())
	b = append(b, eventEnd...)
	b = append(b, doneEvent...)
	rs.buf = b
	rs.w.Write(b)
	rs.flush()
	rs.ended = true
}

// appendTimings appends llama-server's timings object: prompt time from
// admission to the first token, predicted time from there to now.
func (rs *responder) appendTimings(b []byte, completion int, now time.Time) []byte {
	first := rs.firstAt
	if first.IsZero() {
		first = now
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	promptMs, predMs := ms(first.Sub(rs.admitted)), ms(now.Sub(first))
	per := func(n int, ms float64) (perTokenMs, perSecond float64) {
		if n > 0 {
			perTokenMs = ms / float64(n)
		}
		if ms > 0 {
			perSecond = 1000 * float64(n) / ms
		}
		return
	}
	ppt, pps := per(rs.prompt, promptMs)
	dpt, dps := per(completion, predMs)
	f := func(b []byte, key string, v float64) []byte {
		b = append(b, key...)
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
	b = append(b, `{"prompt_n":`...)
	b = strconv.AppendInt(b, int64(rs.prompt), 10)
	b = f(b, `,"prompt_ms":`, promptMs)
	b = f(b, `,"prompt_per_token_ms":`, ppt)
	b = f(b, `,"prompt_per_second":`, pps)
	b = append(b, `,"predicted_n":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	b = f(b, `,"predicted_ms":`, predMs)
	b = f(b, `,"predicted_per_token_ms":`, dpt)
	b = f(b, `,"predicted_per_second":`, dps)
	return append(b, '}')
}

func (rs *responder) finishJSON() {
	b := append(rs.buf[:0], rs.base...)
	text := answer(rs.sent)
	if rs.chat {
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
	} else {
		b = append(b, `,"choices":[{"index":0,"text":"`...)
	}
	b = append(b, text...)
	if rs.chat {
		b = append(b, '"', '}')
	} else {
		b = append(b, '"')
	}
	b = append(b, `,"logprobs":null,"finish_reason":"`...)
	b = append(b, rs.finishReason()...)
	b = append(b, `","stop_reason":null}],`...)
	b = rs.appendUsage(b, rs.completionTokens())
	b = append(b, '}', '\n')
	rs.buf = b
	h := rs.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	rs.w.WriteHeader(http.StatusOK)
	rs.w.Write(b)
	now := time.Now()
	rs.rec.update(func(t *Truth) {
		t.Status = http.StatusOK
		t.Headers = now
		t.OutputTokens = rs.sent
	})
	rs.ended = true
}

// closeConn closes the connection once the response's last byte is out,
// without having said Connection: close, as llama-server does after every
// streamed response. The server's own chunked terminator is written first
// (a hijacked response gets none), so the response is complete and only the
// next request on the connection fails. Without a hijackable connection
// (HTTP/2, a recorder) it does nothing.
func (rs *responder) closeConn() {
	if !rs.flush() {
		return
	}
	chunked := rs.chunkedOK && rs.w.Header().Get("Content-Length") == ""
	conn, brw, err := rs.rc.Hijack()
	if err != nil {
		return
	}
	if chunked {
		brw.WriteString("0\r\n\r\n")
		brw.Flush()
	}
	if d := rs.s.cfg.CloseDelay; d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-rs.s.quit:
			t.Stop()
		}
	}
	conn.Close()
	now := time.Now()
	rs.rec.update(func(t *Truth) { t.ClosedConn = now })
}

// cancelled notes a request that ended because the client went away or the
// server closed.
func (rs *responder) cancelled() {
	if rs.ended {
		return
	}
	rs.rec.update(func(t *Truth) {
		if t.Outcome == "" {
			t.Outcome = "cancelled"
		}
	})
	rs.s.metrics.engine(rs.engine).successAbort.Inc()
}
