package transport

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
)

// outgoing is what Send builds a lean request from without allocating it
// anew for every request: the header map (the client's own values shared
// read-only, the request's own in slots of its own), the body's reader and
// its GetBody (bound to o once, reading the body o holds).
// It is pooled, so it may be used only for requests the lean client sends
// itself on its own connections, which keep nothing of a request once its
// head is read: the answer keeps a copy without headers or body
// (lean.RoundTrip), and a re-sent request is a clone. A request that
// could reach net/http's transport (which keeps it until its answer's
// body is closed) is built by NewRequest.
type outgoing struct {
	req    http.Request // WithContext's copy, kept here: see newOutgoing
	header http.Header
	body   postBody
	id     [1]string
	accept [1]string

	payload []byte                        // the body, for getBody
	getBody func() (io.ReadCloser, error) // o.rewind, made once
}

// rewind is GetBody of o's request: a fresh reader over its body, for a
// re-send on a fresh connection or a redirect, both inside Do.
func (o *outgoing) rewind() (io.ReadCloser, error) {
	return io.NopCloser(bytes.NewReader(o.payload)), nil
}

// postBody is a request body over a byte slice: closing it does nothing.
type postBody struct{ bytes.Reader }

func (*postBody) Close() error { return nil }

var outgoingPool = sync.Pool{New: func() any {
	o := &outgoing{header: make(http.Header, 8)}
	o.getBody = o.rewind
	return o
}}

// put gives o back to the pool, holding nothing of its request.
func (o *outgoing) put() {
	o.req = http.Request{} // nor its context
	clear(o.header)
	o.body.Reset(nil)
	o.payload = nil
	o.id[0], o.accept[0] = "", ""
	outgoingPool.Put(o)
}

// parsedURL is a request URL as NewRequest parses it.
type parsedURL struct {
	raw  string
	u    *url.URL // shared by every request to raw: read-only
	host string
}

// target is rawURL parsed, from the client's one-entry cache (a protocol
// client posts to one URL, or a few); nil when rawURL does not parse.
func (cl *Client) target(rawURL string) *parsedURL {
	if t := cl.lastURL.Load(); t != nil && t.raw == rawURL {
		return t
	}
	req, err := http.NewRequest(http.MethodPost, rawURL, nil)
	if err != nil {
		return nil
	}
	t := &parsedURL{raw: rawURL, u: req.URL, host: req.Host}
	cl.lastURL.Store(t)
	return t
}

// newOutgoing builds p's request as Send would through NewRequest, from a
// pooled outgoing, when the lean client sends it on its own connections
// (pooled and fresh alike); nil otherwise, or when p.URL does not parse
// (NewRequest then says why). The caller gives o back (put) once Do
// returns.
func (cl *Client) newOutgoing(ctx context.Context, p Post, seq int64) (*http.Request, *outgoing) {
	if !cl.leanAll || ctx == nil {
		return nil, nil
	}
	t := cl.target(p.URL)
	if t == nil {
		return nil, nil
	}
	o := outgoingPool.Get().(*outgoing)
	h := o.header
	for k, v := range cl.shared {
		h[k] = v
	}
	id := p.ID
	if id == "" {
		id = strconv.FormatInt(seq, 10)
	}
	o.id[0] = id
	h["X-Request-Id"] = o.id[:]
	if p.Accept != "" {
		o.accept[0] = p.Accept
		h["Accept"] = o.accept[:]
	}
	for k, v := range p.Header {
		h.Set(k, v)
	}
	host := t.host
	if cl.headers.Host != "" {
		host = cl.headers.Host
	}
	// A request's context is set only through WithContext, which copies
	// the request; the copy is kept in o (it goes no further than its
	// dereference, so it needs no allocation of its own).
	o.req = *(&http.Request{
		Method:     http.MethodPost,
		URL:        t.u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     h,
		Host:       host,
	}).WithContext(ctx)
	req := &o.req
	if len(p.Body) == 0 {
		req.Body = http.NoBody
		req.GetBody = noBody
	} else {
		o.body.Reset(p.Body)
		req.Body = &o.body
		req.ContentLength = int64(len(p.Body))
		o.payload = p.Body
		req.GetBody = o.getBody
	}
	if !cl.pooled.Transport.(*lean).handles(req) {
		o.put()
		return nil, nil
	}
	return req, o
}

func noBody() (io.ReadCloser, error) { return http.NoBody, nil }
