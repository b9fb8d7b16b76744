package transport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// HTTP client choices (Config.HTTPClient, --http-client).
const (
	// HTTPClientAuto uses the lean client for plain http and https
	// targets reached without a proxy and without a client certificate,
	// net/http for everything else.
	HTTPClientAuto = "auto"
	// HTTPClientLean uses the lean client for every request that does not
	// go through a proxy (those still go through net/http).
	HTTPClientLean = "lean"
	// HTTPClientNetHTTP uses net/http's transport alone: the reference.
	HTTPClientNetHTTP = "nethttp"
)

// lean is an HTTP/1.1 client transport without per-connection goroutines:
// the goroutine that sends a request writes it, reads the answer's headers
// (fastHead for a plain head, else http.ReadResponse: net/http's own
// parser, through a pooled buffer) and
// then the body (bodyReader: chunked, Content-Length and close-delimited,
// decoded as net/http decodes them), on a kept-alive connection from a
// small pool. A connection holds a read buffer only while it has unread
// bytes (connReader): a stream that waits for its next token holds none. net/http's transport
// keeps two goroutines and two buffers per connection (its read and write
// loops), which at thousands of in-flight streams is most of a client's
// memory and a good share of its CPU. What lean does not do (proxies,
// HTTP/2, 1xx other than 100, Expect, trailers read by the caller) stays
// with net/http: a request through a proxy goes to fallback.
type lean struct {
	// dial is fallback's: one way to open a connection for both paths.
	dial        func(ctx context.Context, network, addr string) (net.Conn, error)
	dialTimeout time.Duration // bounds the TLS handshake
	tls         *tls.Config   // nil: no TLS settings given (https still works)
	proxy       func(*http.Request) (*url.URL, error)
	fallback    *http.Transport
	noReuse     bool // a new connection for every request

	mu   sync.Mutex
	idle map[connKey][]*leanConn

	wmu     sync.Mutex
	watches map[<-chan struct{}]*watch // by the context's Done (watchOn)

	lastAnswer atomic.Pointer[http.Request] // answerRequest's
}

// connKey is what a pooled connection serves: a struct, not a
// "scheme://host:port" string, so that finding one builds no string.
type connKey struct{ scheme, addr string }

type leanConn struct {
	key    connKey
	conn   net.Conn
	in     connReader
	reused bool
	// deadline: a request set one on conn; put clears it, so a pooled
	// connection never carries one.
	deadline bool
	watch    *watch // the request's context's, while in flight (watchOn)
}

// headReader is a pooled reader of response heads: http.ReadResponse
// wants a *bufio.Reader, needed only until the head is parsed; it reads
// through lim, so a head has at most MaxResponseHeaderBytes.
type headReader struct {
	br  *bufio.Reader
	lim headLimit
}

// headLimit reads at most n more bytes of r, then io.EOF.
type headLimit struct {
	r    io.Reader
	n    int64
	line int64 // bytes since the last newline
	long bool  // a line went past MaxResponseHeaderLineBytes
}

func (l *headLimit) Read(p []byte) (int, error) {
	if l.n <= 0 || l.long {
		return 0, io.EOF
	}
	if int64(len(p)) > l.n {
		p = p[:l.n]
	}
	n, err := l.r.Read(p)
	l.n -= int64(n)
	// What the buffer reads past the head (at most one buffer of body,
	// far below the line bound) counts as a line too, harmlessly.
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		l.line = int64(n - 1 - i)
	} else {
		l.line += int64(n)
	}
	if l.line > MaxResponseHeaderLineBytes {
		l.long = true
	}
	return n, err
}

var headPool = sync.Pool{New: func() any {
	h := &headReader{}
	h.br = bufio.NewReaderSize(&h.lim, leanReadBufferBytes)
	return h
}}

func newLean(fallback *http.Transport, tlsCfg *tls.Config, dialTimeout time.Duration, noReuse bool) *lean {
	return &lean{
		dial:        fallback.DialContext,
		dialTimeout: dialTimeout,
		tls:         tlsCfg,
		proxy:       fallback.Proxy,
		fallback:    fallback,
		noReuse:     noReuse,
		idle:        map[connKey][]*leanConn{},
	}
}

// aLongTimeAgo is a deadline that makes every blocked read or write on a
// connection return at once: how a cancelled context interrupts one.
var aLongTimeAgo = time.Unix(1, 0)

var writeBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// RoundTrip implements http.RoundTripper.
func (l *lean) RoundTrip(req *http.Request) (*http.Response, error) {
	if !l.handles(req) {
		return sendHard(l.fallback.RoundTrip, req)
	}
	u := req.URL
	ctx := req.Context()
	trace := httptrace.ContextClientTrace(ctx)
	addr := canonicalAddr(u)
	c, err := l.get(ctx, connKey{u.Scheme, addr}, addr, u)
	if err != nil {
		closeBody(req)
		return nil, err
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: c.conn, Reused: c.reused})
	}
	// A soft deadline (the runner's for a lean client, whose Done does not
	// close for it: loadgen.WithSoftDeadline) is the connection's, cleared
	// before the connection is reused. A context that ends interrupts a
	// blocked read or write by a deadline in the past; no goroutine waits
	// for it.
	deadline, hasDeadline := loadgen.SoftDeadline(ctx)
	if hasDeadline {
		_ = c.conn.SetDeadline(deadline)
		c.deadline = true
	}
	l.watchOn(ctx, c)
	answered := false
	fail := func(err error) (*http.Response, error) {
		c.unwatch()
		c.conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, &leanError{err: err, reused: c.reused, answered: answered}
	}
	if err := l.write(c, req); err != nil {
		return fail(err)
	}
	if trace != nil && trace.WroteRequest != nil {
		trace.WroteRequest(httptrace.WroteRequestInfo{})
	}
	// Wait for the answer (the server's prefill) without a buffer.
	if err := c.in.fill(); err != nil {
		return fail(err)
	}
	answered = true
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	resp, err := readHead(&c.in, req)
	if err != nil {
		return fail(err)
	}
	reusable := !l.noReuse && !resp.Close && !req.Close
	// A stream keeps its answer for its whole life, and through
	// resp.Request the request's headers (cloned twice on the way: by the
	// caller and by http.Client) and body: over a kilobyte per stream. The
	// answer keeps a request without them, shared by the answers to the
	// same URL (read-only, as an answer's Request is).
	resp.Request = l.answerRequest(req)
	held, _ := ctx.Value(heldKey{}).(*Held)
	// An allocation of its own, not a part of the answer's (headAnswer): a
	// stream holds its body while it waits for tokens, and would hold the
	// answer, its head and its header map with it.
	body := &leanBody{l: l, c: c, reusable: reusable, reqDeadline: deadline, held: held}
	if !body.r.init(&c.in, resp) {
		resp.Body = http.NoBody
		if !c.unwatch() || !reusable {
			c.conn.Close()
		} else {
			l.putOrHold(c, held)
		}
		return resp, nil
	}
	resp.Body = body
	return resp, nil
}

// answerRequest is what an answer to req keeps of it: method, URL, proto
// and host, shared with the answers before it when they are the same
// (the same parsed URL: Client.Send's, parsed once).
func (l *lean) answerRequest(req *http.Request) *http.Request {
	if a := l.lastAnswer.Load(); a != nil && a.URL == req.URL && a.Method == req.Method && a.Host == req.Host &&
		a.Proto == req.Proto && a.ProtoMajor == req.ProtoMajor && a.ProtoMinor == req.ProtoMinor {
		return a
	}
	a := &http.Request{Method: req.Method, URL: req.URL, Proto: req.Proto, ProtoMajor: req.ProtoMajor, ProtoMinor: req.ProtoMinor, Host: req.Host}
	l.lastAnswer.Store(a)
	return a
}

// write writes req on c in one write. Not inlined: its frames are not on
// the stack while the answer is read (a request's deepest point, which
// sets the size its goroutine's stack grows to).
//
//go:noinline
func (l *lean) write(c *leanConn, req *http.Request) error {
	bp := writeBufPool.Get().(*[]byte)
	b, err := appendRequest((*bp)[:0], req, l.noReuse)
	closeBody(req)
	if err == nil {
		_, err = c.conn.Write(b)
	}
	*bp = b[:0]
	if cap(b) <= 64<<10 {
		writeBufPool.Put(bp)
	}
	return err
}

// readHead reads an answer's head: a plain one from the buffered bytes
// (fastHead), any other with net/http's parser, through a pooled
// bufio.Reader: what that reader read past the head is the body's
// start, and goes back to in. The body net/http made over the reader is
// left unread: bodyReader reads in its place.
func readHead(in *connReader, req *http.Request) (resp *http.Response, err error) {
	if resp := fastHead(in, req); resp != nil {
		return resp, nil
	}
	h := headPool.Get().(*headReader)
	br := h.br
	// The limit counts what the buffer read past the head too, as
	// net/http's does: at most one buffer's worth of the body.
	h.lim = headLimit{r: in, n: MaxResponseHeaderBytes + leanReadBufferBytes}
	br.Reset(&h.lim)
	for {
		if resp, err = http.ReadResponse(br, req); err != nil {
			switch {
			case h.lim.long:
				err = errHeaderLineTooLong
			case h.lim.n <= 0:
				err = errHeadersTooLarge
			}
			break
		}
		// 100 Continue (and other informational answers but 101) come
		// before the real one; net/http skips them too.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			rest, _ := br.Peek(br.Buffered())
			in.unread(rest)
			break
		}
	}
	br.Reset(&h.lim)
	h.lim = headLimit{}
	headPool.Put(h)
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// leanError is a failed request's error, with what transport.Client.Do
// would otherwise learn from an httptrace.ClientTrace (a trace per request
// that a stream would keep for its whole life): whether the connection
// was a reused one, and whether any of the answer had come.
type leanError struct {
	err              error
	reused, answered bool
}

func (e *leanError) Error() string { return e.err.Error() }
func (e *leanError) Unwrap() error { return e.err }

// handles says whether req goes on lean's own connections: http or https
// and no proxy; the rest goes to net/http.
func (l *lean) handles(req *http.Request) bool {
	if u := req.URL; (u.Scheme != "http" && u.Scheme != "https") || req.Method == http.MethodConnect {
		return false
	}
	if l.proxy != nil {
		if p, err := l.proxy(req); err != nil || p != nil {
			return false
		}
	}
	return true
}

// canonicalAddr is u's host:port, the port from the scheme when absent.
func canonicalAddr(u *url.URL) string {
	port := u.Port()
	if port != "" {
		// Already host:port, as JoinHostPort would write it: no string
		// built for every request.
		return u.Host
	}
	port = "80"
	if u.Scheme == "https" {
		port = "443"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// appendRequest writes req as HTTP/1.1 on the wire: request line, Host,
// the request's headers, Content-Length, and the body (read whole: the
// protocols send small, ready-made bodies).
func appendRequest(b []byte, req *http.Request, close bool) ([]byte, error) {
	host := req.Host
	if host == "" {
		host = req.URL.Host
	}
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.URL.RequestURI()...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	for k, vs := range req.Header {
		for _, v := range vs {
			b = append(b, k...)
			b = append(b, ": "...)
			b = append(b, v...)
			b = append(b, "\r\n"...)
		}
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		b = append(b, "User-Agent: Go-http-client/1.1\r\n"...)
	}
	if u := req.URL.User; u != nil && req.Header.Get("Authorization") == "" {
		p, _ := u.Password()
		b = append(b, "Authorization: Basic "...)
		b = base64.StdEncoding.AppendEncode(b, []byte(u.Username()+":"+p))
		b = append(b, "\r\n"...)
	}
	if close || req.Close {
		b = append(b, "Connection: close\r\n"...)
	}
	if req.Body != nil && req.Body != http.NoBody {
		b = append(b, "Content-Length: "...)
		if req.ContentLength > 0 {
			b = strconv.AppendInt(b, req.ContentLength, 10)
		}
		// An unknown length is read first and said after (below).
		b = append(b, "\r\n\r\n"...)
		bodyAt := len(b)
		for {
			if len(b) == cap(b) {
				b = append(b, 0)[:len(b)]
			}
			n, err := req.Body.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				break
			}
			if err != nil {
				return b, err
			}
		}
		n := len(b) - bodyAt
		if req.ContentLength > 0 && int64(n) != req.ContentLength {
			return b, fmt.Errorf("http: ContentLength=%d with Body length %d", req.ContentLength, n)
		}
		if req.ContentLength <= 0 {
			// Rebuild with the length now known.
			body := append([]byte(nil), b[bodyAt:]...)
			b = b[:bodyAt-len("\r\n\r\n")]
			b = strconv.AppendInt(b, int64(n), 10)
			b = append(b, "\r\n\r\n"...)
			b = append(b, body...)
		}
	} else if req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		b = append(b, "Content-Length: 0\r\n\r\n"...)
	} else {
		b = append(b, "\r\n"...)
	}
	return b, nil
}

// get returns an idle connection to key or dials one.
func (l *lean) get(ctx context.Context, key connKey, addr string, u *url.URL) (*leanConn, error) {
	if !l.noReuse {
		l.mu.Lock()
		if cs := l.idle[key]; len(cs) > 0 {
			c := cs[len(cs)-1]
			cs[len(cs)-1] = nil
			l.idle[key] = cs[:len(cs)-1]
			l.mu.Unlock()
			c.reused = true
			return c, nil
		}
		l.mu.Unlock()
	}
	conn, err := l.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if u.Scheme == "https" {
		cfg := &tls.Config{}
		if l.tls != nil {
			cfg = l.tls.Clone()
		}
		if cfg.ServerName == "" {
			cfg.ServerName = u.Hostname()
		}
		cfg.NextProtos = []string{"http/1.1"}
		tc := tls.Client(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, l.dialTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tc
	}
	c := &leanConn{key: key, conn: conn}
	c.in.conn = conn
	if u.Scheme != "https" {
		// TLS decrypts through crypto/tls's own buffers: its reads block
		// holding a pooled buffer.
		c.in.raw = rawReaderOf(conn)
	}
	return c, nil
}

// Held collects the connections of the lean client's requests made under
// HoldConnections, kept out of the pool until Release: each such request
// then opens a connection of its own, and no goroutine needs to hold an
// answer open to keep its connection (Preconnect: a goroutine and an
// answer held open per connection would cost thousands of connections
// as much memory as the run's streams).
type Held struct {
	mu    sync.Mutex
	conns []heldConn
}

type heldConn struct {
	l *lean
	c *leanConn
}

type heldKey struct{}

// HoldConnections returns ctx under which the lean client keeps the
// connections of answers read to their end in h, not in its pool, until
// h.Release. Requests that go through net/http are not affected.
func HoldConnections(ctx context.Context) (context.Context, *Held) {
	h := &Held{}
	return context.WithValue(ctx, heldKey{}, h), h
}

// Len is how many connections h holds.
func (h *Held) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.conns)
}

// Release puts the held connections in their clients' pools.
func (h *Held) Release() {
	h.mu.Lock()
	conns := h.conns
	h.conns = nil
	h.mu.Unlock()
	for _, hc := range conns {
		hc.l.put(hc.c)
	}
}

// putOrHold pools c, or keeps it in held.
func (l *lean) putOrHold(c *leanConn, held *Held) {
	if held == nil || c.in.buffered() > 0 {
		l.put(c)
		return
	}
	held.mu.Lock()
	held.conns = append(held.conns, heldConn{l, c})
	held.mu.Unlock()
}

func (l *lean) put(c *leanConn) {
	if c.in.buffered() > 0 { // bytes past the answer: not a clean connection
		c.conn.Close()
		return
	}
	if c.deadline {
		_ = c.conn.SetDeadline(time.Time{})
		c.deadline = false
	}
	l.mu.Lock()
	l.idle[c.key] = append(l.idle[c.key], c)
	l.mu.Unlock()
}

// CloseIdleConnections closes the pooled connections (http.Client calls it).
func (l *lean) CloseIdleConnections() {
	l.mu.Lock()
	idle := l.idle
	l.idle = map[connKey][]*leanConn{}
	l.mu.Unlock()
	for _, cs := range idle {
		for _, c := range cs {
			c.conn.Close()
		}
	}
	l.fallback.CloseIdleConnections()
}

// leanBody is an answer's body: read to its end, it gives its connection
// back to the pool; closed early or failed, it closes the connection.
type leanBody struct {
	l        *lean
	c        *leanConn
	r        bodyReader
	reusable bool
	done     bool
	// reqDeadline is the request's deadline (zero: none): a read deadline
	// set later never extends it.
	reqDeadline time.Time
	held        *Held // the connection goes here, not to the pool
}

// SetReadDeadline bounds the body's reads: what a caller that would stop
// reading after a while (openai's drain after [DONE]) uses in place of a
// cancellable context per request. It never reads past the request's own
// deadline.
func (b *leanBody) SetReadDeadline(t time.Time) error {
	if b.done {
		// Read to its end, the body gave its connection back (to the
		// pool, where the next request would meet this deadline) or
		// closed it.
		return nil
	}
	if !b.reqDeadline.IsZero() && (t.IsZero() || t.After(b.reqDeadline)) {
		t = b.reqDeadline
	}
	b.c.deadline = b.c.deadline || !t.IsZero()
	return b.c.conn.SetReadDeadline(t)
}

func (b *leanBody) Read(p []byte) (int, error) {
	if b.done {
		if b.r.err != nil {
			return 0, b.r.err
		}
		return 0, io.EOF
	}
	n, err := b.r.Read(p)
	if n > 0 && err == nil && b.r.mode == bodyLength && b.r.left == 0 {
		err = io.EOF // as net/http: the last bytes come with the end
	}
	b.check(err)
	return n, err
}

// WaitRead waits until Read will not block, holding no buffer meanwhile
// (sse.Waiter): a stream between tokens holds no read buffer.
func (b *leanBody) WaitRead() error {
	if b.done {
		return nil
	}
	err := b.r.ready()
	b.check(err)
	if errors.Is(err, io.EOF) {
		return nil // Read says it
	}
	return err
}

func (b *leanBody) check(err error) {
	if errors.Is(err, io.EOF) {
		b.finish(true)
	} else if err != nil {
		// Classify looks at the caller's context before the error, so the
		// deadline a cancelled context set reads as the cancel it is.
		b.finish(false)
	}
}

func (b *leanBody) finish(clean bool) {
	if b.done {
		return
	}
	b.done = true
	if clean && b.c.unwatch() && b.reusable && !b.r.dirty {
		b.l.putOrHold(b.c, b.held)
		return
	}
	b.c.unwatch()
	b.c.conn.Close()
}

func (b *leanBody) Close() error {
	b.finish(false)
	return nil
}

// useLean says whether c's requests go through the lean client (those
// through a proxy never do).
func (c Config) useLean() (bool, error) {
	switch c.HTTPClient {
	case "", HTTPClientNetHTTP:
		return false, nil
	case HTTPClientLean:
		if c.MaxConnsPerHost > 0 {
			return false, errors.New("HTTP client lean: no connection cap (MaxConnsPerHost); use nethttp")
		}
		return true, nil
	case HTTPClientAuto:
		// A client certificate works over crypto/tls too, but mutual TLS
		// (like a connection cap) is the unusual set-up the reference
		// client is kept for.
		return c.CertFile == "" && c.KeyFile == "" && c.MaxConnsPerHost == 0, nil
	}
	return false, fmt.Errorf("HTTP client %q: want %s, %s or %s", c.HTTPClient, HTTPClientAuto, HTTPClientLean, HTTPClientNetHTTP)
}
