package loadgen

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/prompts"
)

// What an answer must carry. A server that answers 200 with no output
// token, or with more than max_tokens asked for, completed nothing the
// user asked for: the record is a failure of its own kind, decided here
// once for every protocol after its client is done (Runner.settle).

// OutputBound is how many output tokens a client reads of an answer that
// asked for maxTokens before it stops reading (0: no bound, none was
// asked for). It leaves room for a server that counts tokens its own way
// (a multiple of the ask, and a fixed margin for short asks) while keeping
// what one answer holds flat against a server that ignores max_tokens.
func OutputBound(maxTokens int) int {
	if maxTokens <= 0 {
		return 0
	}
	return max(4*maxTokens, maxTokens+64)
}

// Overran reports whether the tokens streamed so far are past
// OutputBound(r.MaxTokens): the client should stop reading and fail the
// record with OverGeneration. A chunk whose count is not known yet counts
// as one token.
func (r *Record) Overran() bool {
	b := OutputBound(r.MaxTokens)
	// Clients that append to Chunks directly are counted a token a chunk.
	return b > 0 && max(r.streamed, len(r.Chunks)) > b
}

// OverGeneration fails r as over_generation after the client stopped
// reading at the bound.
func (r *Record) OverGeneration() {
	r.ErrorKind = ErrOverGeneration
	r.Error = fmt.Sprintf("over-generation: more than %d tokens streamed for max_tokens %d; stopped reading", OutputBound(r.MaxTokens), r.MaxTokens)
}

// stoppedAtEOS reports whether the server said the answer ended at once at
// its end-of-sequence token: finish reason stop (TGI's eos_token) and a
// usage count of at least one token, the unstreamed EOS (llama.cpp,
// Ollama).
func (r *Record) stoppedAtEOS() bool {
	switch r.FinishReason {
	case "stop", "eos_token":
	default:
		return false
	}
	return r.TokenSource == TokensFromUsage && r.OutputTokens >= 1
}

// asksNoToken reports whether p asked for no output token at all: a
// max_tokens (or max_completion_tokens) of 0 among its parameters.
func asksNoToken(p *prompts.Prompt) bool {
	if p == nil {
		return false
	}
	for _, k := range [...]string{"max_tokens", "max_completion_tokens"} {
		switch v := p.Params[k].(type) {
		case int:
			return v == 0
		case int64:
			return v == 0
		case float64:
			return v == 0
		}
	}
	return false
}

// settleAnswer fails a successful record whose answer does not carry what
// was asked for; call it after Finalize. askedNone: the request asked for
// no token at all (max_tokens 0 sent); acceptEmpty: the run or the class
// accepts answers with no token.
func (r *Record) settleAnswer(askedNone, acceptEmpty bool) {
	if !r.OK() {
		return
	}
	if r.MaxTokens > 0 && r.OutputTokens > r.MaxTokens+1 {
		// One over is the EOS a server counts in usage but never streams.
		r.ErrorKind = ErrOverGeneration
		r.Error = fmt.Sprintf("over-generation: %d output tokens for max_tokens %d", r.OutputTokens, r.MaxTokens)
		return
	}
	if r.HasToken() || askedNone || acceptEmpty || r.stoppedAtEOS() {
		return
	}
	r.ErrorKind = ErrEmptyAnswer
	switch {
	case r.FinishReason != "":
		r.Error = fmt.Sprintf("empty answer: no output token (finish_reason %q, %d completion tokens reported); --accept-empty or a class's accept_empty: true accepts it", r.FinishReason, r.OutputTokens)
	default:
		r.Error = "empty answer: no output token and no finish_reason; --accept-empty or a class's accept_empty: true accepts it"
	}
}
