package main

import (
	"context"
	"net"
)

// testDial, when a test sets it, opens every connection to the target and
// its /metrics instead of TCP (transport.Config.Dial, telemetry.Config.Dial):
// the tests serve simulators over in-memory pipes (simtest.StartPipe) and
// run whole commands in a synctest bubble, on whose fake clock the
// simulator's delays are exact however busy the machine. Nil in the binary.
var testDial func(ctx context.Context, network, addr string) (net.Conn, error)
