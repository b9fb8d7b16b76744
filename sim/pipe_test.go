package sim

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
)

// pipeListener serves HTTP over in-memory connections (net.Pipe), so a
// whole server and its clients run inside a synctest bubble: on its fake
// clock every instant is exact, whatever the machine's load.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// startPipeSim serves a new Server over a pipeListener; call it inside
// synctest.Test. It returns the server, a client for it and its base URL;
// everything is closed (Running.Close) at the bubble's end.
func startPipeSim(t *testing.T, cfg Config) (*Server, *http.Client, string) {
	t.Helper()
	r, ln := startPipe(t, cfg)
	tr := &http.Transport{DialContext: ln.dial, MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return r.Server, &http.Client{Transport: tr}, r.URL
}

// startPipe serves a new Server over a pipeListener, for the caller to
// dial and close.
func startPipe(t *testing.T, cfg Config) (*Running, *pipeListener) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := newPipeListener()
	return serve(s, ln), ln
}
