package transport

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// Unanswered is a side request (a health check, a model list) that got no
// answer: the dial, the TLS handshake or the deadline failed, or the
// connection closed before a status came back. Err is the cause, its
// words already scrubbed.
type Unanswered struct {
	Target  string // the target, redacted
	Request string // what was tried: "GET /info"
	Err     error
}

func (e *Unanswered) Error() string {
	return "target " + e.Target + " does not answer " + e.Request + ": " + e.Err.Error()
}

func (e *Unanswered) Unwrap() error { return e.Err }

// StatusError is a side request that the server answered with a status
// other than the one wanted, with the server's own words (ErrorWords).
type StatusError struct {
	Target  string // the target, redacted
	Request string // what was tried: "GET /v1/models"
	Code    int
	Words   string // the server's message, scrubbed; "" for none
}

func (e *StatusError) Error() string {
	s := "target " + e.Target + ": " + e.Request + ": " + StatusText(e.Code, e.Words)
	if e.Refused() {
		// The status alone reads as a broken server; the fix is on our side.
		s = "target " + e.Target + " refuses the credentials (check the API key and headers): " + e.Request + ": " + StatusText(e.Code, e.Words)
	}
	return s
}

// Refused reports whether the server refused the request's credentials
// (401, 403).
func (e *StatusError) Refused() bool {
	return e.Code == http.StatusUnauthorized || e.Code == http.StatusForbidden
}

// Undiscovered is a DiscoverModel that found no model: Err when the
// server did not give its list, Why (what it lacked) when it did.
type Undiscovered struct {
	Target string // the target, redacted
	Why    string
	Err    error
}

func (e *Undiscovered) Error() string {
	if e.Err != nil {
		return "discovering the model: " + e.Err.Error()
	}
	return "discovering the model at " + e.Target + ": " + e.Why
}

func (e *Undiscovered) Unwrap() error { return e.Err }

// Get is Side for a GET.
func (r Root) Get(ctx context.Context, path string, limit int) ([]byte, error) {
	return r.Side(ctx, http.MethodGet, path, limit)
}

// Side is a side request without a body to path under the root: the
// body, at most limit bytes, of a 200 answer; an *Unanswered when no
// answer came; a *StatusError, with the server's words, for any other
// status. Both name the target and the request.
func (r Root) Side(ctx context.Context, method, path string, limit int) ([]byte, error) {
	return r.HTTP.Side(ctx, method, r.SafeBase, r.Base+path, method+" "+path, limit)
}

// Side is Root.Side for a whole URL: target names the target and request
// what was tried, both as they may be printed.
func (cl *Client) Side(ctx context.Context, method, target, url, request string, limit int) ([]byte, error) {
	code, b, err := cl.Fetch(ctx, method, url, limit)
	if err != nil {
		return nil, &Unanswered{Target: target, Request: request, Err: err}
	}
	if code != http.StatusOK {
		return nil, &StatusError{Target: target, Request: request, Code: code, Words: cl.Scrub(ErrorWords(b))}
	}
	return b, nil
}

// ErrorWords finds the server's message in an error body: one of the JSON
// shapes ErrorFields knows, any other JSON quoted, or the first line of
// plain text; "" for an empty body.
func ErrorWords(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return ""
	}
	if msg, code, typ := ErrorFields(b); msg != "" || code != "" || typ != "" {
		return DescribeError(msg, code, typ)
	}
	if json.Valid(b) {
		return QuoteSnippet(b)
	}
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[:i]
	}
	return Truncate(strings.TrimSpace(string(b)), MaxErrorMessage)
}

// ErrorFields pulls a message, a code and a type out of the error shapes
// servers send: {"error": "..."} (Ollama, Triton), {"error": "...",
// "error_type": "..."} (TGI), {"error": {"message", "code" |
// "http_status_code"}} (OpenAI, vLLM, llama.cpp), {"object": "error",
// "message", "code"} (vLLM), {"message": ...}, {"detail": ...} (FastAPI).
func ErrorFields(b []byte) (msg, code, typ string) {
	var v map[string]any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return "", "", ""
	}
	pick := func(m map[string]any) {
		if s, ok := m["message"].(string); ok && msg == "" {
			msg = s
		}
		for _, k := range []string{"code", "http_status_code"} {
			if c := JSONCode(m[k]); c != nil && code == "" {
				code = *c
			}
		}
	}
	switch e := v["error"].(type) {
	case string:
		msg = e
	case map[string]any:
		pick(e)
	}
	pick(v)
	if msg == "" {
		switch d := v["detail"].(type) {
		case string:
			msg = d
		case nil:
		default:
			if j, err := json.Marshal(d); err == nil {
				msg = string(j)
			}
		}
	}
	if t, ok := v["error_type"].(string); ok {
		typ = t
	}
	return msg, code, typ
}

// JSONCode is an error code as JSON gives it, a number or a string; nil
// for anything else.
func JSONCode(v any) *string {
	switch v := v.(type) {
	case json.Number:
		s := string(v)
		return &s
	case string:
		return &v
	}
	return nil
}

// DescribeError words a server's error: "msg", "msg (code 400)", "msg
// (validation)" for a type, "(no message)" when it gave nothing.
func DescribeError(msg, code, typ string) string {
	msg = Truncate(strings.TrimSpace(msg), MaxErrorMessage)
	var tags []string
	if code != "" {
		tags = append(tags, "code "+Truncate(code, 40))
	}
	if typ != "" {
		tags = append(tags, Truncate(typ, 40))
	}
	switch {
	case msg == "" && len(tags) == 0:
		return "(no message)"
	case len(tags) == 0:
		return msg
	case msg == "":
		return strings.Join(tags, ", ")
	}
	return msg + " (" + strings.Join(tags, ", ") + ")"
}

// QuoteSnippet shows the start of a payload, for error messages.
func QuoteSnippet(b []byte) string {
	const n = 80
	if len(b) > n {
		return strconv.QuoteToASCII(string(b[:n])) + "..."
	}
	return strconv.QuoteToASCII(string(b))
}
