package sim

import (
	"io"
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

// answerText returns the whole answer of n tokens: the chunks' text joined.
func answerText(n int) []byte {
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

// responder is the OpenAI API's answer (see answer): it writes one
// request's response, SSE or JSON, in vLLM's shape or llama-server's
// (DialectLlamaCpp). It is used by one goroutine, the request's handler.
//
// A stream is shaped like vLLM's: for chat, a role-only first chunk
// (delta {"role":"assistant","content":""}), sent as soon as the request is
// accepted and before any queueing, so a client that counts it as the first
// token measures almost no TTFT; then one content chunk per engine step,
// each carrying Config.TokensPerChunk tokens (the last may carry fewer);
// then a finish chunk with an empty delta and finish_reason "length" (or
// finish_reason on the last content chunk with Config.FinishWithLastChunk,
// as current vLLM does); then, when stream_options.include_usage is true, a
// chunk with "choices":[] and the usage; then data: [DONE]. With
// stream_options.continuous_usage_stats as well, every content chunk
// carries the cumulative usage. Legacy completions have the same shape
// without the role chunk. Non-streaming requests get one JSON body with the
// usage once the whole answer is generated. Chunk bytes are pre-rendered
// and buffers reused: no JSON is marshalled per token, and each chunk is
// one Write and one Flush.
type responder struct {
	*exchange
	w  http.ResponseWriter
	rc *http.ResponseController

	chat, includeUsage, contUsage bool
	chunkedOK                     bool // HTTP/1.1: a body without Content-Length is chunked
	eos                           bool // the answer ends at an EOS token (Config.EOSNotStreamed)

	// tool is the function a tool-call answer calls ("": a text answer);
	// argsClosed says its arguments' closing piece was sent.
	tool       string
	argsClosed bool

	llama bool   // DialectLlamaCpp stream
	tail  []byte // llama: `,"created":…,"id":"…","model":"…","system_fingerprint":"…","object":"…"`
	base  []byte // `data: {"id":"…","object":"…","created":…,"model":"…"`
	open  []byte // base + chatOpen/complOpen
	buf   []byte
	ended bool // finish sent or the stream was ended by a fault
}

func (s *Server) newResponder(w http.ResponseWriter, r *http.Request, x *exchange, req *parsedRequest) *responder {
	rs := &responder{exchange: x, w: w, rc: http.NewResponseController(w),
		chunkedOK: r.ProtoAtLeast(1, 1),
		chat:      req.chat, includeUsage: req.includeUsage, contUsage: req.contUsage,
		eos: s.cfg.EOSNotStreamed && x.fault != FaultEmpty}
	id := x.id
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
	if rs.s.cfg.PrefixCacheBlocks > 0 {
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(rs.cached), 10)
		b = append(b, '}')
	}
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

// refuse answers the faults http_429, http_503 and html_200 (a login
// page, as from a proxy).
func (rs *responder) refuse(f FaultKind) bool {
	switch f {
	case FaultHTTP429:
		rs.s.writeError(rs.w, rs.rec, http.StatusTooManyRequests, "RateLimitError", "simulated rate limit (fault http_429)")
	case FaultHTTP503:
		rs.s.writeError(rs.w, rs.rec, http.StatusServiceUnavailable, "ServiceUnavailableError", "simulated overload (fault http_503)")
	case FaultHTML200:
		rs.rec.update(func(t *Truth) { t.Status = http.StatusOK; t.Headers = time.Now() })
		h := rs.w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(htmlPage)))
		rs.w.WriteHeader(http.StatusOK)
		io.WriteString(rs.w, htmlPage)
	default:
		return false
	}
	return true
}

// midFault: truncate aborts the connection (a stream without its
// terminating chunk and [DONE]; a JSON body cut in the content);
// error_in_stream sends vLLM's error event and [DONE] (not streaming: a
// 500); malformed sends a chunk that is not JSON and goes on (not
// streaming: a body cut short).
func (rs *responder) midFault(f FaultKind) (fired, goOn bool) {
	switch f {
	case FaultTruncate:
		if rs.stream {
			rs.flush()
		} else {
			rs.w.Header().Set("Content-Type", "application/json")
			rs.w.WriteHeader(http.StatusOK)
			b := append(rs.buf[:0], rs.base...)
			b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
			b = append(b, answerText(rs.sent)...)
			rs.w.Write(b)
			rs.flush()
			rs.rec.update(func(t *Truth) { t.Status = http.StatusOK })
		}
		panic(http.ErrAbortHandler)
	case FaultMalformed:
		if !rs.stream {
			rs.w.Header().Set("Content-Type", "application/json")
			rs.w.WriteHeader(http.StatusOK)
			b := append(rs.buf[:0], rs.base...)
			b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":`...)
			rs.w.Write(b)
			rs.rec.update(func(t *Truth) { t.Status = http.StatusOK })
			rs.ended = true
			return true, false
		}
		b := append(rs.buf[:0], rs.base...)
		b = append(b, `,"choices":[{"index":0,"delta":{"content":"`...)
		b = append(b, "\n\n"...)
		rs.buf = b
		if _, err := rs.w.Write(b); err != nil || !rs.flush() {
			return true, false
		}
		return true, true
	case FaultErrorInStream:
		rs.ended = true
		if !rs.stream {
			rs.s.writeError(rs.w, rs.rec, http.StatusInternalServerError, "InternalServerError",
				"simulated engine failure (fault error_in_stream)")
			return true, false
		}
		rs.w.Write([]byte(errorEvent))
		rs.w.Write([]byte(doneEvent))
		rs.flush()
		return true, false
	}
	return false, true
}

// chunk sends one content chunk (streams only).
func (rs *responder) chunk(text []byte, n int, final bool) bool {
	// With an unsent EOS the finish comes in its own chunk, a step later.
	last := final && rs.s.cfg.FinishWithLastChunk && !rs.llama
	var b []byte
	if rs.tool != "" {
		b = append(rs.buf[:0], rs.base...)
		b = rs.appendToolChunk(b, text, rs.sent == n, final, last)
		rs.argsClosed = final
	} else {
		b = append(rs.buf[:0], rs.open...)
		b = append(b, text...)
	}
	switch {
	case rs.tool != "":
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
		b = rs.appendUsage(b, rs.sent)
	}
	b = append(b, eventEnd...)
	rs.buf = b
	if _, err := rs.w.Write(b); err != nil {
		return false
	}
	if !rs.flush() {
		return false
	}
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
	if rs.tool != "" {
		return "tool_calls"
	}
	if rs.eos {
		return "stop"
	}
	return "length"
}

// finish ends a complete response: finish chunk, usage, [DONE] for streams;
// the whole JSON body otherwise.
func (rs *responder) finish() {
	completion := rs.completionTokens()
	if !rs.stream {
		rs.finishJSON()
		return
	}
	if rs.llama {
		rs.finishLlama(completion)
		return
	}
	b := rs.buf[:0]
	if rs.tool != "" && !rs.argsClosed {
		b = rs.appendToolClose(b)
	}
	if !rs.s.cfg.FinishWithLastChunk || rs.eos {
		b = append(b, rs.base...)
		switch {
		case rs.tool != "":
			b = append(b, chatFinishTool...)
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
	first := rs.first
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
	text := answerText(rs.sent)
	switch {
	case rs.tool != "":
		b = rs.appendToolMessage(b, text)
	case rs.chat:
		b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
		b = append(b, text...)
		b = append(b, '"', '}')
	default:
		b = append(b, `,"choices":[{"index":0,"text":"`...)
		b = append(b, text...)
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
