package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
)

// ClosingAfter is how many requests in a row must fail on reused
// connections before a Client stops reusing connections to its target.
// One such failure can be a server's idle timeout racing a send; three in
// a row, with no reused connection working in between, is a server that
// closes every connection after its response (llama.cpp does, without
// saying "Connection: close").
const ClosingAfter = 3

// Client sends HTTP requests to one target with Config's transport and
// headers. It is safe for concurrent use.
type Client struct {
	headers HeaderSet
	// shared is headers.Header with every value slice's capacity its
	// length, so that the requests that share the slices (newOutgoing)
	// cannot write into them: an Add appends to a copy.
	shared  http.Header
	leanAll bool // pooled and fresh are both lean: newOutgoing may build
	lastURL atomic.Pointer[parsedURL]
	secrets []string
	pooled  *http.Client // keep-alive
	fresh   *http.Client // a new connection for every request
	warn    func(string)

	closing        atomic.Bool  // stopped reusing connections
	reusedFailures atomic.Int32 // consecutive failures on reused connections
	warnOnce       sync.Once
}

// NewClient builds a Client for c. defaults are the protocol's own headers
// (see HeaderSet); extraSecrets are more values to scrub (a URL password);
// warn, if not nil, is called once with a notice a user should see (the
// server closes every connection).
func (c Config) NewClient(defaults http.Header, warn func(string), extraSecrets ...string) (*Client, error) {
	hs, err := c.HeaderSet(defaults)
	if err != nil {
		return nil, err
	}
	cl := &Client{headers: hs, warn: warn}
	cl.secrets = append(append(cl.secrets, hs.Secrets...), extraSecrets...)
	if rt := c.RoundTripper; rt != nil {
		cl.pooled = &http.Client{Transport: rt}
		cl.fresh = cl.pooled
		return cl, nil
	}
	t, err := c.Transport()
	if err != nil {
		return nil, err
	}
	ft := t.Clone()
	ft.DisableKeepAlives = true
	cl.pooled, cl.fresh = &http.Client{Transport: t}, &http.Client{Transport: ft}
	if lean, err := c.useLean(); err != nil {
		return nil, err
	} else if lean {
		cl.pooled.Transport = newLean(t, t.TLSClientConfig, t.TLSHandshakeTimeout, false)
		cl.fresh.Transport = newLean(ft, ft.TLSClientConfig, ft.TLSHandshakeTimeout, true)
		cl.shared, cl.leanAll = hs.Header.Clone(), true
	}
	return cl, nil
}

// NewRequest makes a request carrying the Config's headers (cloned, so the
// caller may add its own) and Host. A body given as *bytes.Reader,
// *bytes.Buffer or *strings.Reader can be re-sent by Do.
func (cl *Client) NewRequest(ctx context.Context, method, url string, body interface {
	Read([]byte) (int, error)
}) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, body)
	if err != nil {
		return nil, err
	}
	req.Header = cl.headers.Header.Clone()
	if cl.headers.Host != "" {
		req.Host = cl.headers.Host
	}
	return req, nil
}

// Do sends req. When it fails on a reused keep-alive connection before any
// response byte came back, and neither req's context is done nor its body
// unreplayable, Do sends it once more on a fresh connection and reports
// retries = 1: the server had closed that idle connection, most likely
// without reading the request. The caller keeps its first send instant as
// the request's Sent (schedule lag is the generator's lateness, not the
// retry's); the retry's cost shows in TTFT and E2E, which count from the
// intended start. After ClosingAfter such failures in a row, every later
// request goes on a fresh connection and warn is called once.
func (cl *Client) Do(req *http.Request) (resp *http.Response, retries int, err error) {
	if cl.closing.Load() {
		resp, err = send(cl.fresh, req)
		return resp, 0, err
	}
	var reused, answered bool
	if l, ok := cl.pooled.Transport.(*lean); ok && l.handles(req) {
		// The lean client says itself, without a trace: on the answer's
		// body, or in its error.
		resp, err = send(cl.pooled, req)
		if err == nil {
			if b, ok := resp.Body.(*leanBody); ok {
				reused = b.c.reused
			}
		} else if le := leanErrorOf(err); le != nil {
			reused, answered = le.reused, le.answered
		}
	} else {
		resp, reused, answered, err = sendTraced(cl.pooled, req)
	}
	if err == nil {
		if reused {
			cl.reusedFailures.Store(0)
		}
		return resp, 0, nil
	}
	if !reused || answered || req.Context().Err() != nil || (req.Body != nil && req.GetBody == nil) {
		return nil, 0, err
	}
	if cl.reusedFailures.Add(1) >= ClosingAfter && cl.closing.CompareAndSwap(false, true) {
		cl.pooled.CloseIdleConnections()
		cl.warnOnce.Do(func() {
			if cl.warn != nil {
				cl.warn("the server closed " + strconv.Itoa(ClosingAfter) + " reused connections in a row before answering " +
					"(it closes every connection after its response, without \"Connection: close\"); " +
					"no longer reusing connections: connection setup now counts in every TTFT")
			}
		})
	}
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, 0, err
		}
	}
	resp, err = send(cl.fresh, again)
	return resp, 1, err
}

// leanErrorOf is the lean client's error in err, or nil. A function of
// its own: the target errors.As needs lives on the heap, paid only here,
// on the error path.
func leanErrorOf(err error) *leanError {
	var le *leanError
	if errors.As(err, &le) {
		return le
	}
	return nil
}

// sendTraced sends req through hc (net/http's transport) with a trace
// that says whether the connection was reused and whether any of the
// answer came.
func sendTraced(hc *http.Client, req *http.Request) (resp *http.Response, reused, answered bool, err error) {
	var r, a atomic.Bool
	trace := &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { r.Store(i.Reused) },
		GotFirstResponseByte: func() { a.Store(true) }, // runs on the transport's reader goroutine
	}
	resp, err = send(hc, req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	return resp, r.Load(), a.Load(), err
}

// send sends req through hc. A request on the lean client goes to it
// directly, not through http.Client: http.Client clones the headers again
// and its frames (over a kilobyte) would grow the stack of every request
// past 4 KiB, where it would stay until a GC shrinks it. What http.Client
// adds that matters here is following redirects: an answer that redirects
// is closed and the request sent again through http.Client, which follows
// it (an endpoint behind a redirect pays one request more per request).
// Errors are wrapped as http.Client wraps them.
func send(hc *http.Client, req *http.Request) (*http.Response, error) {
	l, ok := hc.Transport.(*lean)
	if !ok || hc.CheckRedirect != nil || hc.Jar != nil || hc.Timeout != 0 {
		return sendHard(hc.Do, req)
	}
	resp, err := l.RoundTrip(req)
	if err != nil || isRedirect(resp.StatusCode) {
		return leanFailOrRedirect(hc, req, resp, err)
	}
	return resp, nil
}

func isRedirect(code int) bool {
	switch code {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect:
		return true
	}
	return false
}

// leanFailOrRedirect is the rest of send for a failed request (the error
// wrapped) or a redirect (followed through http.Client); a function of
// its own to keep send's frame small.
//
//go:noinline
func leanFailOrRedirect(hc *http.Client, req *http.Request, resp *http.Response, err error) (*http.Response, error) {
	if err != nil {
		method := req.Method
		if method == "" {
			method = http.MethodGet
		}
		return nil, &url.Error{Op: method[:1] + strings.ToLower(method[1:]), URL: redact.URL(req.URL.String()), Err: err}
	}
	if resp.Header.Get("Location") == "" {
		return resp, nil // net/http hands such an answer back too
	}
	_ = resp.Body.Close()
	again := req.Clone(req.Context())
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return nil, err
		}
	}
	return sendHard(hc.Do, again)
}

// sendHard sends req with do (net/http's client or transport), which
// ends a request only when its context's Done closes: a soft deadline (the
// runner's for a lean client, loadgen.WithSoftDeadline) is made a real one
// for it, ended when the answer's body is closed.
func sendHard(do func(*http.Request) (*http.Response, error), req *http.Request) (*http.Response, error) {
	ctx, cancel := loadgen.HardDeadline(req.Context())
	if ctx == req.Context() {
		return do(req)
	}
	resp, err := do(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelBody ends a request's context when its body is closed.
type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

// LeanFor reports whether requests to rawURL go on the lean HTTP client
// (Config.HTTPClient), as far as can be told before sending: the lean
// client is in use and no proxy is set for the URL.
func (cl *Client) LeanFor(rawURL string) bool {
	l, ok := cl.pooled.Transport.(*lean)
	if !ok {
		return false
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	return l.handles(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}, Host: u.Host})
}

// Closing reports whether the client has stopped reusing connections.
func (cl *Client) Closing() bool { return cl.closing.Load() }

// Scrub removes every credential the client holds from s, and the user
// info and query string of every URL in it.
func (cl *Client) Scrub(s string) string { return redact.Text(s, cl.secrets...) }

// Secrets are the literal values Scrub removes.
func (cl *Client) Secrets() []string { return cl.secrets }

// CloseIdleConnections closes kept-alive connections, e.g. between runs.
func (cl *Client) CloseIdleConnections() {
	cl.pooled.CloseIdleConnections()
	cl.fresh.CloseIdleConnections()
}
