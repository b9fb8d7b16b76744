package main

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// testDial, when a test sets it, opens every connection to the target and
// its /metrics instead of TCP: the tests serve simulators over in-memory
// pipes (simtest.StartPipe) and run whole commands in a synctest bubble,
// on whose fake clock the simulator's delays are exact however busy the
// machine. Nil in the binary.
var testDial func(ctx context.Context, network, addr string) (net.Conn, error)

// withTestDial routes tc's HTTP through testDial when a test set it.
func withTestDial(tc *transport.Config) {
	if testDial == nil {
		return
	}
	tc.RoundTripper = &http.Transport{DialContext: testDial, MaxIdleConnsPerHost: transport.DefaultMaxIdleConnsPerHost,
		IdleConnTimeout: 90 * time.Second, DisableCompression: true}
}
