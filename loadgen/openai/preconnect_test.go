package openai

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// Preconnect opens n distinct connections, and n requests at once after it
// open none: the set-up happened before them.
func TestPreconnectOpensThePool(t *testing.T) {
	var conns atomic.Int32
	hold := make(chan struct{})
	arrived := make(chan struct{}, 64)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/models") {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"data":[{"id":"m"}]}`))
			return
		}
		arrived <- struct{}{}
		<-hold // every request in flight at once
		w.Header().Set("Content-Type", "text/event-stream")
		w.Write(readVector(t, "openai_canonical.txt"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m"})
	const n = 12
	opened, err := c.Preconnect(context.Background(), n)
	if err != nil || opened != n || conns.Load() != n {
		t.Fatalf("Preconnect(%d): opened %d (server saw %d), %v", n, opened, conns.Load(), err)
	}
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if rec := do(t, c, testPrompt); !rec.OK() {
				failed.Add(1)
			}
		}()
	}
	for range n { // all n wait in the handler
		<-arrived
	}
	close(hold)
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d requests failed", failed.Load())
	}
	if got := conns.Load(); got != n {
		t.Errorf("%d requests at once after Preconnect(%d) opened %d new connections", n, n, got-n)
	}
}

// A target that refuses connections: Preconnect says so, naming it, and
// opens nothing.
func TestPreconnectUnreachable(t *testing.T) {
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := l.Addr().String()
	l.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: "http://" + addr}, Model: "m"})
	n, err := c.Preconnect(context.Background(), 3)
	if err == nil || n != 0 || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Preconnect to a closed port: %d, %v", n, err)
	}
}
