package simtest

import (
	"testing"

	"github.com/tailgate-llm/tailgate/sim"
)

// GRPCServer is a simulator serving both its HTTP API and KServe v2 gRPC
// on 127.0.0.1 for one test. GRPCAddr is host:port (grpc://GRPCAddr for
// --target).
type GRPCServer struct {
	*Server
	GRPCAddr string
}

// StartGRPC is Start plus the gRPC service on a free port, both closed when
// the test ends (gRPC first).
func StartGRPC(t testing.TB, cfg sim.Config) *GRPCServer {
	t.Helper()
	srv := Start(t, cfg)
	g, err := srv.ServeGRPC("127.0.0.1:0")
	if err != nil {
		t.Fatalf("simtest: serve gRPC: %v", err)
	}
	t.Cleanup(func() {
		// Ending the server's requests first lets Stop return at once.
		srv.Close()
		if err := g.Close(); err != nil {
			t.Errorf("simtest: close gRPC at %s: %v", g.Addr, err)
		}
	})
	return &GRPCServer{Server: srv, GRPCAddr: g.Addr}
}
