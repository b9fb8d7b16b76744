package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen"
)

// Bounds of what the protocols read and print of an answer.
const (
	// MaxErrorBody is how much of an error body is read for its message.
	MaxErrorBody = 64 << 10
	// MaxErrorMessage bounds the server's words in Record.Error.
	MaxErrorMessage = 200
)

// ParseRoot parses a server root URL (http://host:port[/prefix]) for a
// protocol that appends its own paths: http or https, a host, no trailing
// slash, no query or fragment. what names the URL in the error ("base
// URL"), which shows it redacted.
func ParseRoot(raw, what string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%s %q: want http://host:port", what, redact.URL(raw))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawQuery, u.Fragment = "", ""
	return u, nil
}

// JSONHeaders are the default headers of a JSON-over-HTTP protocol:
// Content-Type application/json, User-Agent tailgate/VERSION, and Accept when
// accept is not empty.
func JSONHeaders(accept string) http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", version.UserAgent())
	if accept != "" {
		h.Set("Accept", accept)
	}
	return h
}

// NewClientFor is NewClient for a target at u: u's password is scrubbed
// from errors, and warn's notices are prefixed with u, redacted.
func (c Config) NewClientFor(u *url.URL, defaults http.Header, warn func(string)) (*Client, error) {
	var w func(string)
	if warn != nil {
		safe := redact.URL(u.String())
		w = func(msg string) { warn(safe + ": " + msg) }
	}
	return c.NewClient(defaults, w, URLSecrets(u)...)
}

// EncodeJSON is a request body: v as JSON, prompts byte for byte (no HTML
// escaping), without the trailing newline.
func EncodeJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Post is one protocol request of a record.
type Post struct {
	URL  string
	Body []byte
	// ID is sent as X-Request-Id; "" sends the record's sequence number.
	ID string
	// Accept, when set, replaces the client's Accept header.
	Accept string
	// Header holds the prompt's extra headers (prompts.Prompt.Headers),
	// set over the client's own; their values are never logged.
	Header map[string]string
	// ErrorWords finds the server's message in a non-2xx body ("" for
	// none); the record's error is "HTTP <code>: <words>".
	ErrorWords func(body []byte) string
}

// Send sends p as rec's request and returns the response, 2xx, for the
// protocol to read and close. It sets rec.Sent just before the first send
// (a retry on a fresh connection counts in rec.Retries, not in Sent),
// rec.Status, and, when it returns nil, rec.End and the error: protocol
// for a request that cannot be built, Classify's kind for a failed send,
// ResponseKind's for a non-2xx status.
func (cl *Client) Send(ctx context.Context, rec *loadgen.Record, p Post) *http.Response {
	resp, _ := cl.SendOwn(ctx, rec, p)
	return resp
}

// SendOwn is Send, and says whether p.Body is the caller's own again when
// it returns: nothing of the request refers to it, so a pooled buffer may
// be reused. Only for a request the lean client sent on its own
// connection and answered without a redirect or a re-send: net/http's
// transport may still be reading a body when its answer comes, and keeps
// it until the answer's body is closed.
func (cl *Client) SendOwn(ctx context.Context, rec *loadgen.Record, p Post) (*http.Response, bool) {
	if req, o := cl.newOutgoing(ctx, p, rec.Seq); o != nil {
		return cl.sendOutgoing(ctx, rec, p, req, o)
	}
	req, err := cl.NewRequest(ctx, http.MethodPost, p.URL, bytes.NewReader(p.Body))
	if err != nil {
		cl.FailBuilding(rec, err)
		return nil, false
	}
	id := p.ID
	if id == "" {
		id = strconv.FormatInt(rec.Seq, 10)
	}
	req.Header.Set("X-Request-Id", id)
	if p.Accept != "" {
		req.Header.Set("Accept", p.Accept)
	}
	for k, v := range p.Header {
		req.Header.Set(k, v)
	}
	return cl.sendBuilt(ctx, rec, p, req), false
}

// sendOutgoing is SendOwn for a pooled request (Client.outgoing), given
// back once Do is done with it. Not inlined: see failStatus.
//
//go:noinline
func (cl *Client) sendOutgoing(ctx context.Context, rec *loadgen.Record, p Post, req *http.Request, o *outgoing) (*http.Response, bool) {
	resp := cl.sendBuilt(ctx, rec, p, req)
	// The lean client's answer keeps the request's URL (answerRequest); a
	// redirect's (followed by http.Client, maybe through net/http) or a
	// re-send's (a clone) is another. An answer to the request itself was
	// read after its body was written whole, on the lean client's own
	// connection.
	own := resp != nil && resp.Request != nil && resp.Request.URL == req.URL
	o.put()
	return resp, own
}

// sendBuilt sends req, built for p, as rec's request.
func (cl *Client) sendBuilt(ctx context.Context, rec *loadgen.Record, p Post, req *http.Request) *http.Response {
	rec.Sent = rec.Now()
	resp, retries, err := cl.Do(req)
	rec.Retries += retries
	if err != nil {
		rec.End = rec.Now()
		kind, msg := Classify(ctx, err, "before the response")
		cl.Fail(rec, kind, msg)
		return nil
	}
	rec.Status = resp.StatusCode
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		cl.failStatus(rec, resp, p.ErrorWords)
		return nil
	}
	return resp
}

// failStatus fails rec for a non-2xx answer, with the server's words. A
// function of its own, so that Send's frame, on the stack of every request
// while it is sent, stays small.
//
//go:noinline
func (cl *Client) failStatus(rec *loadgen.Record, resp *http.Response, errorWords func([]byte) string) {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, MaxErrorBody))
	resp.Body.Close()
	rec.End = rec.Now()
	words := ""
	if errorWords != nil {
		words = errorWords(b)
	}
	cl.Fail(rec, ResponseKind(resp.StatusCode, b), StatusText(resp.StatusCode, words))
}

// StatusText is how an error names a non-2xx answer: "HTTP 503", or
// "HTTP 503: words" with the server's words.
func StatusText(code int, words string) string {
	if words == "" {
		return "HTTP " + strconv.Itoa(code)
	}
	return "HTTP " + strconv.Itoa(code) + ": " + words
}

// FailBuilding fails rec, not sent, for a request that could not be
// built: Sent and End now, kind protocol.
func (cl *Client) FailBuilding(rec *loadgen.Record, err error) {
	rec.Sent = rec.Now()
	rec.End = rec.Sent
	cl.Fail(rec, loadgen.ErrProtocol, "building the request: "+Unwrap(err).Error())
}

// Fail records an error on rec, scrubbed of every credential the client
// holds. A refusal whose words say the prompt exceeds the model's context
// is recorded as context_length (ContextKind), for every protocol alike.
func (cl *Client) Fail(rec *loadgen.Record, kind loadgen.ErrorKind, msg string) {
	rec.ErrorKind, rec.Error = ContextKind(kind, msg), cl.Scrub(msg)
}

// ReadWhole reads a whole (non-streamed) answer body of at most limit
// bytes. On failure it returns the kind and text of the error: as
// ClassifyBody says, "reading the response body", or protocol for a body
// over limit.
func ReadWhole(ctx context.Context, body io.Reader, limit int) ([]byte, loadgen.ErrorKind, string) {
	b, err := io.ReadAll(io.LimitReader(body, int64(limit)+1))
	if err != nil {
		kind, msg := ClassifyBody(ctx, err, "reading the response body")
		return nil, kind, msg
	}
	if len(b) > limit {
		return nil, loadgen.ErrProtocol, fmt.Sprintf("response body over %d bytes", limit)
	}
	return b, loadgen.ErrNone, ""
}

// ClassifyBody is Classify for a failure while reading an answer that had
// begun: a closed or broken connection is then stream_truncated.
func ClassifyBody(ctx context.Context, err error, where string) (loadgen.ErrorKind, string) {
	kind, msg := Classify(ctx, err, where)
	if kind == loadgen.ErrConnect {
		kind = loadgen.ErrStreamTruncated
	}
	return kind, msg
}

// SideRequest sends a side request (health, metadata, a model list)
// without a body, with Accept accept when not empty; the caller reads and
// closes the answer. Errors are Classify's words, scrubbed.
func (cl *Client) SideRequest(ctx context.Context, method, url, accept string) (*http.Response, error) {
	req, err := cl.NewRequest(ctx, method, url, nil)
	if err != nil {
		return nil, redact.Wrap(cl.Scrub(Unwrap(err).Error()), err)
	}
	req.Header.Del("Content-Type")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, _, err := cl.Do(req)
	if err != nil {
		_, msg := Classify(ctx, err, "before the response")
		return nil, redact.Wrap(cl.Scrub(msg), err, ctx.Err())
	}
	return resp, nil
}

// Fetch is SideRequest, reading at most limit bytes of the answer; status
// is 0 when no answer came.
func (cl *Client) Fetch(ctx context.Context, method, url string, limit int) (status int, body []byte, err error) {
	resp, err := cl.SideRequest(ctx, method, url, "")
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ = io.ReadAll(io.LimitReader(resp.Body, int64(limit)))
	return resp.StatusCode, body, nil
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut
// with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// RootConfig describes one target of a protocol that appends its own
// paths to the server's root URL (TGI's and Ollama's native APIs,
// Triton's generate extension).
type RootConfig struct {
	// Endpoint's URL is the server root (http://host:port[/prefix]).
	Endpoint
	// Model is the model requests name, or the one Preflight checks for
	// on a server that serves one.
	Model string
	// Stream asks for a streamed answer; nil means true.
	Stream *bool
	// MaxTokens is the protocol's output cap when a prompt sets none; 0
	// sends none.
	MaxTokens int
}

// Root is a checked RootConfig: what its protocol client sends with.
type Root struct {
	Base      string // the root, credentials included: send only
	SafeBase  string // the root as it may be printed
	Stream    bool
	MaxTokens int
	HTTP      *Client
}

// Open checks c and builds its client, with JSON headers and Warn's
// notices prefixed with the redacted root. what names the URL in errors
// ("base URL").
func (c RootConfig) Open(what string) (Root, error) {
	u, err := ParseRoot(c.URL, what)
	if err != nil {
		return Root{}, err
	}
	r := Root{Base: u.String(), SafeBase: redact.URL(u.String()), Stream: c.Stream == nil || *c.Stream, MaxTokens: c.MaxTokens}
	// The lean client is held to net/http's records for the OpenAI
	// protocols only; the native ones keep the reference.
	c.Transport.HTTPClient = HTTPClientNetHTTP
	if r.HTTP, err = c.Transport.NewClientFor(u, JSONHeaders(""), c.Warn); err != nil {
		return Root{}, err
	}
	return r, nil
}
