// Package simtest starts a simulator (package sim) for a test in another
// package, as net/http/httptest starts a server: on a free loopback port,
// closed when the test ends.
//
//	srv := simtest.Start(t, cfg)
//	c, _ := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m"})
//	... srv.Truth(), srv.StallAll(d), srv.WaitIdle(ctx) ...
//
// Package sim's own tests cannot import it (an import cycle) and keep their
// own copy of Start.
package simtest

import (
	"context"
	"net"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/pipenet"
	"github.com/tailgate-llm/tailgate/sim"
)

// Server is a simulator serving on 127.0.0.1 for one test. It embeds the
// running simulator: URL (no trailing slash; the API is under URL+"/v1"),
// Addr, Truth, StallAll, SetFaults, WaitIdle, Config and Close are its.
type Server struct {
	*sim.Running
	// Dial is set by StartPipe: it connects to the simulator whatever the
	// address (give it to transport.Config's and telemetry.Config's Dial,
	// or an http.Transport's DialContext). Nil for a server on TCP.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Start validates cfg (see sim.New: zero counts take their defaults), serves
// it on a free port of 127.0.0.1 and registers its Close with t.Cleanup, so
// it outlives every deferred call of the test. A configuration or listen
// error fails the test at once; an error from Close (a handler that did not
// return) fails it at the end.
func Start(t testing.TB, cfg sim.Config) *Server {
	t.Helper()
	r, err := sim.Start(cfg, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("simtest: start simulator: %v", err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("simtest: close simulator at %s: %v", r.URL, err)
		}
	})
	return &Server{Running: r}
}

// StartPipe is Start on in-memory connections instead of a port: call it
// inside synctest.Test, where the simulator's delays and every client's
// clock are the bubble's fake clock, exact whatever the machine's load.
// Reach it through Dial (transport.Config's and telemetry.Config's);
// its URL is http://pipe.
func StartPipe(t testing.TB, cfg sim.Config) *Server {
	t.Helper()
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatalf("simtest: start simulator: %v", err)
	}
	ln := pipenet.Listen()
	r := sim.Serve(s, ln)
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("simtest: close simulator: %v", err)
		}
	})
	return &Server{Running: r, Dial: ln.Dial}
}
