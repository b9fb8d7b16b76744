package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"testing/synctest"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// inBubble runs f in a synctest bubble where the commands reach the
// simulators of sims over in-memory pipes: simulator NAME answers at
// http://NAME, and its delays and every instant the commands measure are on
// the bubble's fake clock, exact however busy the machine. Commands reach
// the pipes through bctx (withDial; tgCmdCtx), so bubbles need no package
// state.
func inBubble(t *testing.T, sims map[string]sim.Config, f func(t *testing.T, srv map[string]*simtest.Server, bctx context.Context)) {
	t.Helper()
	// os/signal starts its watcher goroutine on the first Notify; started
	// inside the bubble it would block in the runtime, never durably, and
	// the fake clock would never move.
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGUSR2)
	signal.Stop(c)
	synctest.Test(t, func(t *testing.T) {
		srv := map[string]*simtest.Server{}
		for name, cfg := range sims {
			s := simtest.StartPipe(t, cfg)
			s.URL = "http://" + name
			srv[name] = s
		}
		bctx := withDial(context.Background(), func(ctx context.Context, network, addr string) (net.Conn, error) {
			host, _, _ := net.SplitHostPort(addr)
			s, ok := srv[host]
			if !ok {
				return nil, &net.OpError{Op: "dial", Net: network, Err: &net.AddrError{Err: "no such simulator", Addr: addr}}
			}
			return s.Dial(ctx, network, addr)
		})
		f(t, srv, bctx)
	})
}

// tgCmdCtx is tgCmd with the invocation's context derived from ctx.
func tgCmdCtx(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatchContext(ctx, args, &o, &e)
	return code, o.String(), e.String()
}
