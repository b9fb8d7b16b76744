package transport

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// The requests in flight under one context share one watch; cancelling
// the context interrupts every one of them, and a context's watch goes
// once its requests are done, whether it ended or not.
func TestLeanWatchSharesContext(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("hold") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
	}))
	defer srv.Close()
	defer close(release)
	noProxy := func(*http.Request) (*url.URL, error) { return nil, nil }
	cl, err := Config{HTTPClient: HTTPClientLean, Proxy: noProxy}.NewClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.CloseIdleConnections()
	l := cl.pooled.Transport.(*lean)
	watches := func() (n, conns int) {
		l.wmu.Lock()
		defer l.wmu.Unlock()
		for _, w := range l.watches {
			w.mu.Lock()
			conns += len(w.conns)
			w.mu.Unlock()
		}
		return len(l.watches), conns
	}
	get := func(ctx context.Context, u string) (*http.Response, error) {
		req, _ := cl.NewRequest(ctx, http.MethodGet, u, nil)
		resp, _, err := cl.Do(req)
		return resp, err
	}

	// Done, the requests of a context that never ends leave no watch.
	live, stopLive := context.WithCancel(context.Background())
	defer stopLive()
	for range 3 {
		resp, err := get(live, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "a" {
			t.Fatalf("%q, %v", b, err)
		}
		resp.Body.Close()
	}
	if n, _ := watches(); n != 0 {
		t.Errorf("%d watches after the requests, want 0", n)
	}

	const inFlight = 4
	ctx, cancel := context.WithCancel(context.Background())
	var bodies []io.ReadCloser
	for range inFlight {
		resp, err := get(ctx, srv.URL+"/?hold=1")
		if err != nil {
			t.Fatal(err)
		}
		bodies = append(bodies, resp.Body)
	}
	if n, conns := watches(); n != 1 || conns != inFlight {
		t.Errorf("%d watches of %d connections, want 1 of %d", n, conns, inFlight)
	}
	var wg sync.WaitGroup
	errs := make([]error, inFlight)
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = io.ReadAll(b)
			b.Close()
		}()
	}
	time.Sleep(20 * time.Millisecond) // the reads block
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err == nil {
			t.Errorf("body %d read to its end after the cancel", i)
		}
	}
	if n, _ := watches(); n != 0 {
		t.Errorf("%d watches after the cancel, want 0", n)
	}
	// A request under the ended context fails at once.
	if _, err := get(ctx, srv.URL+"/?hold=1"); err == nil || !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "timeout") {
		t.Errorf("under a cancelled context: %v", err)
	}
}
