package transport

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// StatusKind classifies a non-2xx HTTP status; the status itself stays in
// Record.Status.
func StatusKind(code int) loadgen.ErrorKind {
	switch {
	case code == http.StatusTooManyRequests:
		return loadgen.ErrRateLimited
	case code >= 400 && code < 500:
		return loadgen.ErrClient
	case code >= 500 && code < 600:
		return loadgen.ErrServer
	}
	return loadgen.ErrProtocol // 1xx/3xx where an answer was due
}

// overloadWords, in a 503 body, say the server shed the request for load
// (Ollama: "server busy, please try again.  maximum pending requests
// exceeded") rather than failed it.
var overloadWords = []string{"server busy", "maximum pending", "overloaded", "too many requests", "queue is full"}

// ResponseKind is StatusKind, with one refinement: a 503 whose body says
// the server is busy (Ollama's full queue) is rate_limited, as a 429 is.
// It is load shedding, the answer a saturated server gives by design:
// counting it as server_error would call an overloaded server broken, and
// would put it outside the SLOs that treat rate_limited apart. A bare 503
// (or one with only Retry-After, which maintenance sends too) stays
// server_error: a dead engine answers so.
func ResponseKind(code int, body []byte) loadgen.ErrorKind {
	if code == http.StatusServiceUnavailable {
		low := bytes.ToLower(body)
		for _, w := range overloadWords {
			if bytes.Contains(low, []byte(w)) {
				return loadgen.ErrRateLimited
			}
		}
	}
	return StatusKind(code)
}

// contextWords, lower-cased, are how servers say a prompt does not fit the
// model's context: vLLM and OpenAI ("This model's maximum context length
// is N tokens"), vLLM's raw-prompt check ("is longer than the maximum model
// length"), llama.cpp ("exceeds the available context size",
// exceed_context_size_error), TGI ("`inputs` tokens + `max_new_tokens` must
// be <=", "`inputs` must have less than") and Ollama ("exceeds the context
// length").
var contextWords = []string{
	"maximum context length",
	"longer than the maximum model length",
	"exceeds the available context size",
	"exceed_context_size_error",
	"`inputs` tokens + `max_new_tokens` must be <=",
	"`inputs` must have less than",
	"exceeds the context length",
	"context length exceeded",
	"context_length_exceeded",
}

// ContextKind refines a refusal (client_error, or an error the server sent
// inside the stream) whose words say the prompt is too long for the
// model's context into context_length; any other kind or text is returned
// as it is.
func ContextKind(kind loadgen.ErrorKind, msg string) loadgen.ErrorKind {
	if kind != loadgen.ErrClient && kind != loadgen.ErrStreamError {
		return kind
	}
	low := strings.ToLower(msg)
	for _, w := range contextWords {
		if strings.Contains(low, w) {
			return loadgen.ErrContextLength
		}
	}
	return kind
}

// Classify names a failure of the transport or of reading a body: the
// context's end first (timeout, cancelled), then the error's own deadline,
// then a closed or broken connection (connect). where says at what point,
// "before the response" or "after 3 events". The text is not scrubbed:
// pass it through Client.Scrub.
func Classify(ctx context.Context, err error, where string) (loadgen.ErrorKind, string) {
	switch cerr := ctx.Err(); {
	case errors.Is(cerr, context.DeadlineExceeded):
		return loadgen.ErrTimeout, "request deadline exceeded " + where
	case cerr != nil:
		return loadgen.ErrCancelled, "cancelled (run stopped) " + where
	}
	err = Unwrap(err)
	if errors.Is(err, context.DeadlineExceeded) {
		return loadgen.ErrTimeout, "timed out " + where + ": " + err.Error()
	}
	if isFraming(err) {
		return loadgen.ErrProtocol, "bad HTTP framing " + where + ": " + err.Error()
	}
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return loadgen.ErrConnect, "connection closed " + where
	}
	return loadgen.ErrConnect, where + ": " + err.Error()
}

// errHeadersTooLarge is the lean client's head over MaxResponseHeaderBytes,
// in net/http's words for the same.
var errHeadersTooLarge = errors.New("net/http: server response headers exceeded " + strconv.Itoa(MaxResponseHeaderBytes) + " bytes; aborted")

// errHeaderLineTooLong is the lean client's head line over
// MaxResponseHeaderLineBytes.
var errHeaderLineTooLong = errors.New("server response header line exceeded " + strconv.Itoa(MaxResponseHeaderLineBytes) + " bytes; aborted")

// framingErrors are the lean client's errors for an answer whose HTTP
// framing is wrong: a server's fault, not a connection that broke.
var framingErrors = []error{errHeadersTooLarge, errHeaderLineTooLong, errLineTooLong, errLongTrailer, errExcess, errMalformedChunked,
	errChunkBareLF, errChunkCR, errChunkEmptyLength, errChunkLengthByte, errChunkLengthTooBig, http.ErrLineTooLong}

// framingWords are net/http's texts for the same errors, which it does not
// export (the lean client's are the same words).
var framingWords = []string{"server response headers exceeded", "server response header line exceeded", "malformed chunked encoding", "chunked line ends with bare LF",
	"invalid CR in chunked line", "empty hex number for chunk length", "invalid byte in chunk length",
	"http chunk length too large", "chunked encoding contains too much non-data", "suspiciously long trailer",
	"malformed HTTP response", "malformed MIME header"}

// isFraming reports whether err says the answer's HTTP framing (head,
// chunk sizes, trailer) is not HTTP/1.1.
func isFraming(err error) bool {
	for _, e := range framingErrors {
		if errors.Is(err, e) {
			return true
		}
	}
	s := err.Error()
	for _, w := range framingWords {
		if strings.Contains(s, w) {
			return true
		}
	}
	return false
}

// Unwrap drops net/http's "Post <url>:" wrapper, which repeats the URL
// (and any password in it) that the caller knows already.
func Unwrap(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
