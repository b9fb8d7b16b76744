package main

import (
	"context"
	"net"
)

// dialFunc opens a connection in place of TCP (transport.Config.Dial,
// telemetry.Config.Dial).
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

type dialKey struct{}

// withDial returns a context whose command invocation opens every
// connection to the target and its /metrics with d instead of TCP: the
// tests serve simulators over in-memory pipes (simtest.StartPipe) and run
// whole commands in a synctest bubble, on whose fake clock the simulator's
// delays are exact however busy the machine. The dialer travels with the
// invocation, not in a package variable, so bubbles can run in parallel.
// The binary never sets one.
func withDial(ctx context.Context, d dialFunc) context.Context {
	return context.WithValue(ctx, dialKey{}, d)
}

// dialFrom is the dialer withDial put on ctx, or nil (TCP).
func dialFrom(ctx context.Context) dialFunc {
	d, _ := ctx.Value(dialKey{}).(dialFunc)
	return d
}
