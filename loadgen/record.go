package loadgen

import (
	"encoding/json"
	"time"
)

// ErrorKind classifies why a request did not complete. The empty kind means
// success. The names are part of the summary.json contract and are
// protocol-neutral: the HTTP status or gRPC code stays in Record.Status.
type ErrorKind string

// The kinds of error a record can carry; ErrNone is success.
const (
	ErrNone            ErrorKind = ""
	ErrClient          ErrorKind = "client_error" // the server refused the request (HTTP 4xx other than 429; gRPC InvalidArgument, NotFound, …)
	ErrRateLimited     ErrorKind = "rate_limited" // HTTP 429, gRPC ResourceExhausted
	ErrServer          ErrorKind = "server_error" // HTTP 5xx, gRPC Internal, Unavailable, …
	ErrTimeout         ErrorKind = "timeout"
	ErrConnect         ErrorKind = "connect"
	ErrStreamError     ErrorKind = "stream_error"     // the server sent an error object inside the stream
	ErrStreamTruncated ErrorKind = "stream_truncated" // the body ended before the final marker
	ErrProtocol        ErrorKind = "protocol"         // a chunk we could not parse, or an answer of the wrong shape
	ErrCancelled       ErrorKind = "cancelled"        // the run was stopped while the request was in flight
	ErrDropped         ErrorKind = "dropped"          // never sent: no free slot before the run ended
	ErrCutAtEnd        ErrorKind = "cut_at_end"       // still in flight when the schedule's grace period ran out
	// ErrCancelledByDependency is a session call never sent because a call
	// it waited for failed (graph.go).
	ErrCancelledByDependency ErrorKind = "cancelled_by_dependency"
	// ErrNotDue is a session call never sent because it fell due after the
	// schedule ended (or waited for one that did, or for one cut at the
	// end). Like an arrival past the schedule it is not part of the run:
	// not sent, not dropped, not cut, bound by no validity rule; it is
	// recorded so that a session's records number its calls.
	ErrNotDue ErrorKind = "not_due"
	// ErrContextLength is a refusal for length: the prompt (plus the
	// output asked for) exceeds the model's context. A failure, but
	// reported apart from client_error: it says the mix is wrong for the
	// model, not that the server misbehaved.
	ErrContextLength ErrorKind = "context_length"
	// ErrEmptyAnswer is an answer that carried no output token where the
	// request asked for tokens: a success in the server's eyes, a user
	// who got nothing in ours. A server that says it stopped at once at
	// its end-of-sequence token (finish_reason stop with a usage count of
	// at least one) is told apart and stays a success (see settleAnswer).
	ErrEmptyAnswer ErrorKind = "empty_answer"
	// ErrOverGeneration is an answer of more tokens than max_tokens asked
	// for: a server that ignores the bound would otherwise pass a
	// throughput floor with tokens nobody asked for.
	ErrOverGeneration ErrorKind = "over_generation"
)

// ErrorKinds lists every kind a record can carry, in report order.
var ErrorKinds = []ErrorKind{ErrClient, ErrRateLimited, ErrServer, ErrTimeout, ErrConnect, ErrStreamError,
	ErrStreamTruncated, ErrProtocol, ErrCancelled, ErrDropped, ErrCutAtEnd, ErrCancelledByDependency, ErrNotDue, ErrContextLength,
	ErrEmptyAnswer, ErrOverGeneration}

// legacyErrorKinds maps names that requests.jsonl files and SLO files
// written before the protocol-neutral names still carry.
var legacyErrorKinds = map[string]ErrorKind{
	"http_4xx": ErrClient,
	"http_429": ErrRateLimited,
	"http_5xx": ErrServer,
}

// ParseErrorKind reads a kind by its name or a legacy name ("http_429").
func ParseErrorKind(s string) (ErrorKind, bool) {
	if k, ok := legacyErrorKinds[s]; ok {
		return k, true
	}
	for _, k := range ErrorKinds {
		if string(k) == s {
			return k, true
		}
	}
	return ErrNone, false
}

// Counted reports whether a record of this kind counts as a sent request
// that failed. Dropped requests were never sent, cut_at_end ones were cut
// by the generator, cancelled ones stopped by the run itself (Ctrl-C, a
// failed sink) and cancelled_by_dependency ones never sent because a call
// they waited for failed: none was failed by the server, so all are
// counted apart.
func (k ErrorKind) Counted() bool {
	return k != ErrNone && k != ErrDropped && k != ErrCutAtEnd && k != ErrCancelled && k != ErrCancelledByDependency && k != ErrNotDue
}

// Chunk is one content-bearing chunk of a stream: its arrival and how many
// output tokens it carries (0 = the server did not say; Finalize fills it).
type Chunk struct {
	At     time.Duration // since run start
	Tokens int
}

// Token-count provenance, reported in the summary so readers know how ITL
// and output tokens were derived.
const (
	TokensFromUsage  = "usage"  // the server's usage object
	TokensFromChunks = "chunks" // one per content chunk: the server gave no count
	// Per-chunk token provenance, which Finalize alone decides.
	chunkTokensServer = "server" // cumulative counts on every chunk
	chunkTokensSpread = "spread" // usage total spread evenly over the chunks
	chunkTokensOne    = "one"    // one token per chunk assumed
)

// Record is everything measured for one request. All instants are offsets
// from the run's start on the monotonic clock. The runner owns Seq, Class,
// Stage, Warmup and Intended; the protocol client owns the rest.
type Record struct {
	Seq   int64
	ID    string
	Class string
	// Model is the model or adapter the prompt named (Prompt.ModelName),
	// sent in place of the run's --model; "" when it named none and the
	// run's was sent, so a plain run's records stay as they were.
	Model string
	// ResponseModel is the model the server said answered ("model" of the
	// first chunk or the body; OTel's gen_ai.response.model); "" when it
	// named none. A router may answer with another model than was asked.
	ResponseModel string
	Stage         string
	Session       string
	Turn          int // the call's turn index in its session lane
	Warmup        bool
	// Call and After place a session call in its graph: its id, and the
	// ids of the calls it waited for.
	Call  string
	After []string
	// ToolWait is the sum of the tool-call delays on the edges this call
	// waited for (prompts.Edge.Tool), for the session's tool wait.
	ToolWait time.Duration
	// SessionDone is set on the last record of a session the runner
	// delivers: the session's figures, complete (sessions.go). Sinks
	// learn from it that the session is over; not in requests.jsonl.
	SessionDone *SessionFigures
	// SessionLast marks a session's last record (SessionDone's, and in
	// requests.jsonl "session_last"); NotSent a session call recorded
	// without being sent (a dependency failed, the run ended first).
	SessionLast bool
	NotSent     bool

	Intended    time.Duration // when the schedule wanted it sent
	Sent        time.Duration // when the client began writing it
	FirstAnswer time.Duration // first answer (non-reasoning) chunk; 0 = none
	End         time.Duration // end of response, error or cancellation
	Chunks      []Chunk

	RequestedInputTokens int // what the prompt source asked for
	InputTokens          int // the server's prompt_tokens (0 = not reported)
	OutputTokens         int
	TokenSource          string // TokensFromUsage or TokensFromChunks
	ChunkTokenSource     string // ChunkTokens*

	// MaxTokens is the output bound the client sent (the prompt's, else
	// the client's default; 0: none sent). Kept in requests.jsonl so
	// check judges a throughput floor against the demand the run judged
	// it against (slo's applyDemand reads the most asked).
	MaxTokens int

	Status       int // HTTP status or gRPC code; 0 if none
	ErrorKind    ErrorKind
	Error        string // human-readable; never contains credentials
	FinishReason string
	// Unstreamed marks an answer that came as one body: a non-streaming
	// request, or a server that ignored "stream". It has a first token (at
	// the end) but no inter-chunk gaps, so no ICL, ITL or TPOT.
	Unstreamed bool
	// Retries counts sends of this request after the first (a reused idle
	// connection that the server had closed); latency still counts from
	// the intended start.
	Retries int
	// Text is the answer, kept only when the runner asks for it (multi-turn
	// sessions need it for the next turn).
	Text string
	// Compact marks a record read back from a compact requests.jsonl
	// (results.RecordsCompact): it kept the per-request figures and the
	// first chunk, not every chunk instant, so it gives no ICL or ITL
	// samples. ChunkCount is how many content chunks the stream had (a
	// full record's are all in Chunks).
	Compact    bool
	ChunkCount int
	// LastChunkAt is a compact record's last chunk instant (0 otherwise:
	// a full record has it in Chunks).
	LastChunkAt time.Duration
	// Server is what the server said of this request's timings (Ollama's
	// final object, llama.cpp's timings), beside the client's; nil when it
	// said nothing.
	Server *ServerTimings

	epoch time.Time
	// streamed counts the tokens of the chunks added so far, a chunk of
	// unknown count as one (Overran).
	streamed int
	// firstToken, when set, is called as the first content chunk is added
	// (AddChunk): the event a session's first-token edges wait for.
	firstToken func(at time.Duration)
}

// ServerTimings are one request's timings as the server measured them.
// A zero field was not reported (a server that reports one reports it in
// nanoseconds or fractional milliseconds, never exactly 0).
type ServerTimings struct {
	// Total is arrival to the last byte (Ollama total_duration).
	Total time.Duration
	// Load is the model load or lookup before the request ran (Ollama
	// load_duration).
	Load time.Duration
	// Prompt is prompt evaluation, prefill (Ollama prompt_eval_duration,
	// llama.cpp prompt_ms).
	Prompt time.Duration
	// Eval is generation of the output tokens (Ollama eval_duration,
	// llama.cpp predicted_ms).
	Eval time.Duration
}

// Queue is the time the request waited in the server, Total less Load,
// Prompt and Eval, and whether the server reported enough to say.
func (s *ServerTimings) Queue() (time.Duration, bool) {
	if s == nil || s.Total == 0 || s.Prompt == 0 || s.Eval == 0 {
		return 0, false
	}
	q := s.Total - s.Load - s.Prompt - s.Eval
	return max(q, 0), true
}

// NewRecord returns a record whose Now is measured from epoch.
func NewRecord(epoch time.Time) *Record { return &Record{epoch: epoch} }

// Now is the current offset from the run's start.
func (r *Record) Now() time.Duration { return time.Since(r.epoch) }

// Epoch is the run start this record's offsets are measured from.
func (r *Record) Epoch() time.Time { return r.epoch }

// maxChunkReserve caps the chunk slice ReserveChunks makes.
const maxChunkReserve = 8192

// ReserveChunks makes room in Chunks, unless it has some already, for a
// streamed answer of up to maxTokens tokens (one chunk each, and a final
// one), so that appending does not grow the slice mid-stream; 256 when
// maxTokens is unknown (0) or over maxChunkReserve.
func (r *Record) ReserveChunks(maxTokens int) {
	if r.Chunks != nil {
		return
	}
	n := maxTokens + 1
	if maxTokens <= 0 || n > maxChunkReserve {
		n = 256
	}
	r.Chunks = make([]Chunk, 0, n)
}

// AddChunk appends a content chunk as it arrives. Clients that add their
// chunks through it let a session call waiting on this one's first token
// start at that token; otherwise it starts at this answer's end.
func (r *Record) AddChunk(c Chunk) {
	if len(r.Chunks) == 0 && r.firstToken != nil {
		r.firstToken(c.At)
	}
	r.Chunks = append(r.Chunks, c)
	r.streamed += max(c.Tokens, 1)
}

// OK reports whether the request completed without error.
func (r *Record) OK() bool { return r.ErrorKind == ErrNone }

// HasToken reports whether any output token arrived.
func (r *Record) HasToken() bool { return len(r.Chunks) > 0 }

// FirstToken is the arrival of the first content-bearing chunk (0 if none).
func (r *Record) FirstToken() time.Duration {
	if len(r.Chunks) == 0 {
		return 0
	}
	return r.Chunks[0].At
}

// The figures of one record, by the metric table's rule (package
// loadgen/measure): every instant truncated to the microsecond first, as
// requests.jsonl stores it, so a live record and its saved copy measure
// the same. Quotients (TPOT, ITL) of those differences keep their
// nanoseconds. They do not ask whether the record succeeded.

// TruncMicros truncates an instant to the microsecond, as requests.jsonl
// stores it.
func TruncMicros(d time.Duration) time.Duration { return d / time.Microsecond * time.Microsecond }

// ScheduleLagOf is r's send lateness by the table's rule, for failed
// records too (a validity check judges every sent request's lag).
func ScheduleLagOf(r *Record) time.Duration { return TruncMicros(r.Sent) - TruncMicros(r.Intended) }

// TTFT is intended start → first token; ok is false without a token.
func (r *Record) TTFT() (d time.Duration, ok bool) {
	if len(r.Chunks) == 0 {
		return 0, false
	}
	return TruncMicros(r.Chunks[0].At) - TruncMicros(r.Intended), true
}

// TTFAT is intended start → first answer token (reasoning models).
func (r *Record) TTFAT() (d time.Duration, ok bool) {
	if r.FirstAnswer <= 0 {
		return 0, false
	}
	return TruncMicros(r.FirstAnswer) - TruncMicros(r.Intended), true
}

// E2E is intended start → end of response.
func (r *Record) E2E() time.Duration { return TruncMicros(r.End) - TruncMicros(r.Intended) }

// ScheduleLag is actual send − intended start.
func (r *Record) ScheduleLag() time.Duration { return ScheduleLagOf(r) }

// TPOT is (E2E − TTFT) / (output tokens − 1), defined for ≥ 2 tokens.
func (r *Record) TPOT() (d time.Duration, ok bool) {
	t, ok := r.TTFT()
	if !ok || r.OutputTokens < 2 {
		return 0, false
	}
	return (r.E2E() - t) / time.Duration(r.OutputTokens-1), true
}

// ChunkGap is the gap between content chunk i and the one before it
// (0 < i < len(Chunks)): the one rule ICL and ITL samples are taken by.
func (r *Record) ChunkGap(i int) time.Duration {
	return TruncMicros(r.Chunks[i].At) - TruncMicros(r.Chunks[i-1].At)
}

// EachICL calls f with every gap between consecutive content chunks.
func (r *Record) EachICL(f func(gap time.Duration)) {
	for i := 1; i < len(r.Chunks); i++ {
		f(r.ChunkGap(i))
	}
}

// EachITL calls f(perToken, tokens) for every chunk after the first: the
// gap divided by the tokens the chunk carries, to be counted tokens times.
// Chunks without a token count give none: call Finalize first so every
// chunk has one.
func (r *Record) EachITL(f func(perToken time.Duration, tokens int)) {
	for i := 1; i < len(r.Chunks); i++ {
		if n := r.Chunks[i].Tokens; n > 0 {
			f(r.ChunkGap(i)/time.Duration(n), n)
		}
	}
}

// Finalize settles token counts after the client is done: output tokens
// from chunks when the server gave no usage, and per-chunk counts spread
// from the usage total when the server did not give them per chunk.
func (r *Record) Finalize() {
	if r.TokenSource == "" {
		if r.OutputTokens > 0 {
			r.TokenSource = TokensFromUsage
		} else {
			r.TokenSource = TokensFromChunks
		}
	}
	known := 0
	for _, c := range r.Chunks {
		if c.Tokens > 0 {
			known++
		}
	}
	switch {
	case len(r.Chunks) == 0:
	case known == len(r.Chunks):
		if r.ChunkTokenSource == "" {
			r.ChunkTokenSource = chunkTokensServer
		}
	case r.TokenSource == TokensFromUsage && r.OutputTokens >= len(r.Chunks):
		// Spread the total: every chunk gets the floor, the remainder goes to
		// the earliest chunks (the first usually carries a held-back piece).
		streamed := r.OutputTokens
		if r.FinishReason == "stop" && streamed == len(r.Chunks)+1 {
			// The end-of-sequence token: counted in usage (llama.cpp, vLLM)
			// but never streamed, so it belongs to no chunk. OutputTokens
			// keeps it: its decode step is inside E2E, so TPOT counts it.
			streamed = len(r.Chunks)
		}
		per, rem := streamed/len(r.Chunks), streamed%len(r.Chunks)
		for i := range r.Chunks {
			r.Chunks[i].Tokens = per
			if i < rem {
				r.Chunks[i].Tokens++
			}
		}
		r.ChunkTokenSource = chunkTokensSpread
	default:
		for i := range r.Chunks {
			if r.Chunks[i].Tokens <= 0 {
				r.Chunks[i].Tokens = 1
			}
		}
		r.ChunkTokenSource = chunkTokensOne
	}
	if r.OutputTokens == 0 {
		for _, c := range r.Chunks {
			r.OutputTokens += c.Tokens
		}
	}
}

// recordJSON is the requests.jsonl line: instants in microseconds since run
// start, chunk arrivals as a parallel array.
type recordJSON struct {
	Seq                  int64    `json:"seq"`
	ID                   string   `json:"id,omitempty"`
	Class                string   `json:"class,omitempty"`
	Model                string   `json:"model,omitempty"`
	ResponseModel        string   `json:"response_model,omitempty"`
	Stage                string   `json:"stage,omitempty"`
	Session              string   `json:"session,omitempty"`
	Turn                 int      `json:"turn,omitempty"`
	Call                 string   `json:"call,omitempty"`
	After                []string `json:"after,omitempty"`
	ToolWaitUs           int64    `json:"tool_wait_us,omitempty"`
	NotSent              bool     `json:"not_sent,omitempty"`
	SessionLast          bool     `json:"session_last,omitempty"`
	Warmup               bool     `json:"warmup,omitempty"`
	IntendedUs           int64    `json:"intended_us"`
	SentUs               int64    `json:"sent_us"`
	FirstTokenUs         *int64   `json:"first_token_us,omitempty"`
	FirstAnswerUs        *int64   `json:"first_answer_us,omitempty"`
	EndUs                int64    `json:"end_us"`
	ChunkUs              []int64  `json:"chunk_us,omitempty"`
	ChunkTokens          []int    `json:"chunk_tokens,omitempty"`
	RequestedInputTokens int      `json:"requested_input_tokens,omitempty"`
	InputTokens          int      `json:"input_tokens"`
	OutputTokens         int      `json:"output_tokens"`
	MaxTokens            int      `json:"max_tokens,omitempty"`
	TokenSource          string   `json:"token_source,omitempty"`
	ChunkTokenSource     string   `json:"chunk_token_source,omitempty"`
	Status               int      `json:"status,omitempty"`
	ErrorKind            string   `json:"error_kind,omitempty"`
	Error                string   `json:"error,omitempty"`
	FinishReason         string   `json:"finish_reason,omitempty"`
	Unstreamed           bool     `json:"unstreamed,omitempty"`
	Retries              int      `json:"retries,omitempty"`
	// The compact form's: no chunk_us/chunk_tokens, their count and the
	// last chunk's instant instead.
	Compact     bool   `json:"compact,omitempty"`
	Chunks      int    `json:"chunks,omitempty"`
	LastChunkUs *int64 `json:"last_chunk_us,omitempty"`
	// The server's own timings of the request, when it gave them.
	Server *serverTimingsJSON `json:"server,omitempty"`
}

// serverTimingsJSON is ServerTimings in requests.jsonl: microseconds,
// absent when not reported; queue_us derived (total − load − prompt − eval).
type serverTimingsJSON struct {
	TotalUs  int64  `json:"total_us,omitempty"`
	LoadUs   int64  `json:"load_us,omitempty"`
	PromptUs int64  `json:"prompt_us,omitempty"`
	EvalUs   int64  `json:"eval_us,omitempty"`
	QueueUs  *int64 `json:"queue_us,omitempty"`
}

func (s *ServerTimings) jsonForm() *serverTimingsJSON {
	if s == nil {
		return nil
	}
	j := &serverTimingsJSON{TotalUs: us(s.Total), LoadUs: us(s.Load), PromptUs: us(s.Prompt), EvalUs: us(s.Eval)}
	if q, ok := s.Queue(); ok {
		qu := us(q)
		j.QueueUs = &qu
	}
	return j
}

func us(d time.Duration) int64 { return int64(d / time.Microsecond) }

// MarshalJSON writes the requests.jsonl form (AppendJSON; jsonForm is
// the encoding/json reference it is tested against).
func (r *Record) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil, false), nil }

// Compacted is r in the compact requests.jsonl form: every per-request
// figure (TTFT, TTFAT, TPOT, E2E, schedule lag, tokens, status, error),
// the first and last chunk instants and the chunk count, without the
// instant of every chunk, which is most of a long stream's line. It
// marshals with json.Marshal as any value does.
func (r *Record) Compacted() any { return r.jsonForm(true) }

// ReferenceForm is r as a plain struct that encoding/json marshals to the
// same line AppendJSON writes: the reference it is tested and benchmarked
// against.
func (r *Record) ReferenceForm(compact bool) any { return r.jsonForm(compact) }

func (r *Record) jsonForm(compact bool) *recordJSON {
	j := recordJSON{
		Seq: r.Seq, ID: r.ID, Class: r.Class, Model: r.Model, ResponseModel: r.ResponseModel, Stage: r.Stage, Session: r.Session, Turn: r.Turn,
		Call: r.Call, After: r.After, ToolWaitUs: us(r.ToolWait), NotSent: r.NotSent, SessionLast: r.SessionLast,
		Warmup: r.Warmup, IntendedUs: us(r.Intended), SentUs: us(r.Sent), EndUs: us(r.End),
		RequestedInputTokens: r.RequestedInputTokens, InputTokens: r.InputTokens,
		OutputTokens: r.OutputTokens, MaxTokens: r.MaxTokens, TokenSource: r.TokenSource, ChunkTokenSource: r.ChunkTokenSource,
		Status: r.Status, ErrorKind: string(r.ErrorKind), Error: r.Error, FinishReason: r.FinishReason,
		Unstreamed: r.Unstreamed, Retries: r.Retries, Server: r.Server.jsonForm(),
	}
	switch {
	case compact || r.Compact:
		j.Compact, j.Chunks = true, len(r.Chunks)
		if r.Compact {
			j.Chunks = r.ChunkCount
		}
		if len(r.Chunks) > 0 {
			ft := us(r.Chunks[0].At)
			j.FirstTokenUs = &ft
		}
		if len(r.Chunks) > 1 {
			lt := us(r.Chunks[len(r.Chunks)-1].At)
			j.LastChunkUs = &lt
		} else if r.LastChunkAt > 0 {
			lt := us(r.LastChunkAt)
			j.LastChunkUs = &lt
		}
	case len(r.Chunks) > 0:
		ft := us(r.Chunks[0].At)
		j.FirstTokenUs = &ft
		j.ChunkUs = make([]int64, len(r.Chunks))
		j.ChunkTokens = make([]int, len(r.Chunks))
		for i, c := range r.Chunks {
			j.ChunkUs[i] = us(c.At)
			j.ChunkTokens[i] = c.Tokens
		}
	}
	if r.FirstAnswer > 0 {
		fa := us(r.FirstAnswer)
		j.FirstAnswerUs = &fa
	}
	return &j
}

// UnmarshalJSON reads the requests.jsonl form back, so saved runs can be
// re-evaluated offline.
func (r *Record) UnmarshalJSON(b []byte) error {
	var j recordJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	d := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	*r = Record{
		Seq: j.Seq, ID: j.ID, Class: j.Class, Model: j.Model, ResponseModel: j.ResponseModel, Stage: j.Stage, Session: j.Session, Turn: j.Turn,
		Call: j.Call, After: j.After, ToolWait: d(j.ToolWaitUs), NotSent: j.NotSent, SessionLast: j.SessionLast,
		Warmup: j.Warmup, Intended: d(j.IntendedUs), Sent: d(j.SentUs), End: d(j.EndUs),
		RequestedInputTokens: j.RequestedInputTokens, InputTokens: j.InputTokens,
		OutputTokens: j.OutputTokens, MaxTokens: j.MaxTokens, TokenSource: j.TokenSource, ChunkTokenSource: j.ChunkTokenSource,
		Status: j.Status, ErrorKind: ErrorKind(j.ErrorKind), Error: j.Error, FinishReason: j.FinishReason,
		Unstreamed: j.Unstreamed, Retries: j.Retries,
	}
	if s := j.Server; s != nil {
		r.Server = &ServerTimings{Total: d(s.TotalUs), Load: d(s.LoadUs), Prompt: d(s.PromptUs), Eval: d(s.EvalUs)}
	}
	if k, ok := legacyErrorKinds[j.ErrorKind]; ok {
		r.ErrorKind = k
	}
	if j.FirstAnswerUs != nil {
		r.FirstAnswer = d(*j.FirstAnswerUs)
	}
	if j.Compact {
		// The first chunk (TTFT) and, for gaps that need none, the last;
		// no ICL or ITL samples come from a compact record.
		r.Compact, r.ChunkCount = true, j.Chunks
		if j.FirstTokenUs != nil {
			r.Chunks = []Chunk{{At: d(*j.FirstTokenUs)}}
		}
		if j.LastChunkUs != nil {
			r.LastChunkAt = d(*j.LastChunkUs)
		}
	} else if len(j.ChunkUs) > 0 {
		r.Chunks = make([]Chunk, len(j.ChunkUs))
		for i, v := range j.ChunkUs {
			r.Chunks[i].At = d(v)
			if i < len(j.ChunkTokens) {
				r.Chunks[i].Tokens = j.ChunkTokens[i]
			}
		}
	}
	return nil
}
