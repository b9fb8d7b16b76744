package telemetry

import (
	"context"
	"net"
	"net/http"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/pipenet"
)

// pipeServer serves h over in-memory connections for Runs sampling inside
// a synctest bubble. Make it inside the bubble and give its dial (or
// pipeDialer's) to the Config's Dial. The server closes when the test
// ends.
type pipeServer struct {
	ln *pipenet.Listener
}

func newPipeServer(t *testing.T, h http.Handler) *pipeServer {
	t.Helper()
	p := &pipeServer{ln: pipenet.Listen()}
	srv := &http.Server{Handler: h}
	go srv.Serve(p.ln)
	t.Cleanup(func() { srv.Close() })
	return p
}

// dial is a Config's Dial: any address reaches this server.
func (p *pipeServer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	return p.ln.Dial(ctx, network, addr)
}

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
