package sim

import (
	"sort"
	"sync"
	"time"
)

// Truth is what the server itself saw of one completion request: the
// reference that tests compare a load generator's measurements against.
// Every instant is a time.Time from time.Now, so it carries the monotonic
// clock and subtracts exactly from a client's own time.Now readings.
type Truth struct {
	ID   string // X-Request-Id, or "sim-<Seq>" when the client sent none
	Seq  int64  // arrival number, from 1
	Path string // /v1/chat/completions or /v1/completions
	// Model is the model or adapter the request named ("" for none): the
	// one that served it.
	Model  string
	Stream bool
	Fault  FaultKind
	Status int // HTTP status sent; 0 if the handler never answered (hang)

	PromptTokens int
	// CachedTokens is the prompt tokens the prefix cache held at
	// admission (usage prompt_tokens_details.cached_tokens).
	CachedTokens int
	MaxTokens    int
	OutputTokens int // content tokens actually sent
	// CompletionTokens is the usage completion_tokens of a complete answer:
	// OutputTokens, plus the unsent EOS token with Config.EOSNotStreamed.
	CompletionTokens int
	// FinishReason of a complete answer: "length", "stop" at an EOS, or
	// "tool_calls".
	FinishReason string
	// ToolCall is the function a tool-call answer called ("" for text).
	ToolCall string

	Arrived time.Time // handler entered, before the body was read
	// Headers is when the response headers (and, for chat streams, the
	// role-only chunk) were flushed; zero if never.
	Headers time.Time
	// Admitted is when the request left the queue: admitted to the running
	// batch (ModeBatch) or past any global stall (ModeFixed). Zero if never.
	Admitted time.Time
	// Chunks has one entry per content-bearing chunk, at the instant its
	// flush returned. Role, finish, usage, error and malformed events are
	// not content chunks.
	Chunks []TruthChunk
	// End is when the handler finished ([DONE] flushed, error sent, abort,
	// or cancellation seen); zero while the request is in flight.
	End time.Time
	// ClosedConn is when the server closed the connection after this
	// response (Config.CloseAfter); zero if it kept it open.
	ClosedConn time.Time
	// Outcome is "ok", "cancelled" (client went away or server closed),
	// "fault" (an injected fault ended or spoiled it) or "error" (bad request).
	Outcome string
}

// TruthChunk is one content chunk as sent by the server. At is when its
// Flush returned, i.e. its bytes were handed to the kernel, microseconds
// before a loopback client can read them (over gRPC: when Send handed the
// message to grpc-go's writer).
type TruthChunk struct {
	At     time.Time // its flush (or gRPC Send) returned
	Tokens int
	// Began is just before the server wrote it: no client can have read
	// it earlier, which At does not promise (a server goroutine may wait
	// on a busy run queue after its write, while the client reads).
	Began time.Time
}

// TTFT is arrival → first content chunk; ok is false without one.
func (t Truth) TTFT() (d time.Duration, ok bool) {
	if len(t.Chunks) == 0 {
		return 0, false
	}
	return t.Chunks[0].At.Sub(t.Arrived), true
}

// QueueTime is arrival → admission (0 if never admitted).
func (t Truth) QueueTime() time.Duration {
	if t.Admitted.IsZero() {
		return 0
	}
	return t.Admitted.Sub(t.Arrived)
}

// E2E is arrival → end (0 while in flight).
func (t Truth) E2E() time.Duration {
	if t.End.IsZero() {
		return 0
	}
	return t.End.Sub(t.Arrived)
}

// truthRec is an in-flight record; its handler owns it, Truth() copies it
// under mu.
type truthRec struct {
	mu    sync.Mutex
	t     Truth
	watch *stateWatch
}

func (r *truthRec) chunk(began, at time.Time, tokens int) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.t.Chunks = append(r.t.Chunks, TruthChunk{At: at, Tokens: tokens, Began: began})
	r.t.OutputTokens += tokens
	r.mu.Unlock()
	r.watch.changed()
}

func (r *truthRec) update(f func(t *Truth)) {
	if r == nil {
		return
	}
	r.mu.Lock()
	f(&r.t)
	r.mu.Unlock()
	r.watch.changed()
}

func (r *truthRec) snapshot() Truth {
	r.mu.Lock()
	t := r.t
	t.Chunks = append([]TruthChunk(nil), r.t.Chunks...)
	r.mu.Unlock()
	return t
}

// truthStore keeps in-flight records and a ring of the last limit finished.
type truthStore struct {
	limit    int // ≤ 0: off
	watch    *stateWatch
	mu       sync.Mutex
	inflight map[*truthRec]struct{}
	done     []Truth
	next     int
}

func newTruthStore(limit int, watch *stateWatch) *truthStore {
	return &truthStore{limit: limit, watch: watch, inflight: make(map[*truthRec]struct{})}
}

// begin registers a new in-flight record; nil when recording is off.
func (s *truthStore) begin(t Truth, chunksHint int) *truthRec {
	if s.limit <= 0 {
		return nil
	}
	if chunksHint > 0 {
		t.Chunks = make([]TruthChunk, 0, chunksHint)
	}
	r := &truthRec{t: t, watch: s.watch}
	s.mu.Lock()
	s.inflight[r] = struct{}{}
	s.mu.Unlock()
	s.watch.changed()
	return r
}

// finish stamps End and moves the record to the ring.
func (s *truthStore) finish(r *truthRec, end time.Time) {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.t.End = end
	if r.t.Outcome == "" {
		r.t.Outcome = "ok"
	}
	t := r.t
	r.mu.Unlock()
	s.mu.Lock()
	delete(s.inflight, r)
	if len(s.done) < s.limit {
		s.done = append(s.done, t)
	} else {
		s.done[s.next] = t
		s.next = (s.next + 1) % s.limit
	}
	s.mu.Unlock()
	s.watch.changed()
}

func (s *truthStore) all() []Truth {
	s.mu.Lock()
	out := make([]Truth, 0, len(s.done)+len(s.inflight))
	for _, t := range s.done {
		t.Chunks = append([]TruthChunk(nil), t.Chunks...)
		out = append(out, t)
	}
	recs := make([]*truthRec, 0, len(s.inflight))
	for r := range s.inflight {
		recs = append(recs, r)
	}
	s.mu.Unlock()
	for _, r := range recs {
		out = append(out, r.snapshot())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func (s *truthStore) reset() {
	s.mu.Lock()
	s.done = s.done[:0]
	s.next = 0
	s.mu.Unlock()
}
