package sim

import (
	"net/http"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/pipenet"
)

// startPipeSim serves a new Server over in-memory connections; call it
// inside synctest.Test, where on the fake clock every instant is exact,
// whatever the machine's load. It returns the server, a client for it
// and its base URL; everything is closed (Running.Close) at the bubble's
// end.
func startPipeSim(t *testing.T, cfg Config) (*Server, *http.Client, string) {
	t.Helper()
	r, ln := startPipe(t, cfg)
	tr := &http.Transport{DialContext: ln.Dial, MaxIdleConnsPerHost: 64, DisableCompression: true}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		tr.CloseIdleConnections()
	})
	return r.Server, &http.Client{Transport: tr}, r.URL
}

// startPipe serves a new Server over in-memory connections, for the
// caller to dial and close.
func startPipe(t *testing.T, cfg Config) (*Running, *pipenet.Listener) {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln := pipenet.Listen()
	return Serve(s, ln), ln
}
