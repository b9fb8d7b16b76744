package telemetry

import (
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
)

// pipeServer serves h over in-memory connections (net.Pipe) for Runs
// sampling inside a synctest bubble, where a goroutine blocked on a
// socket is not durably blocked and the fake clock would not move. Make
// it inside the bubble and give its dial (or pipeDialer's) to the
// Config. The server closes when the test ends.
type pipeServer struct {
	conns chan net.Conn
	once  sync.Once
	done  chan struct{}
	srv   *http.Server
}

func newPipeServer(t *testing.T, h http.Handler) *pipeServer {
	t.Helper()
	p := &pipeServer{conns: make(chan net.Conn), done: make(chan struct{}), srv: &http.Server{Handler: h}}
	go p.srv.Serve(p)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// dial is a Config's dialer: any address reaches this server.
func (p *pipeServer) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case p.conns <- server:
		return client, nil
	case <-p.done:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Accept, Close and Addr make it the server's net.Listener.
func (p *pipeServer) Accept() (net.Conn, error) {
	select {
	case c := <-p.conns:
		return c, nil
	case <-p.done:
		return nil, net.ErrClosed
	}
}

func (p *pipeServer) Close() error {
	p.once.Do(func() { close(p.done) })
	return nil
}

func (p *pipeServer) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// pipeDialer routes each host of a Config's scrape URLs to its server.
func pipeDialer(servers map[string]*pipeServer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		s, ok := servers[addr]
		if !ok {
			return nil, &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no such pipe server", Addr: addr}}
		}
		return s.dial(ctx, network, addr)
	}
}
