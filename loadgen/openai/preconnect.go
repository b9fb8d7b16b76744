package openai

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

var _ loadgen.Preconnector = (*Client)(nil)

// preconnectAtOnce bounds the lean client's preconnect requests in
// flight: as many as the kernel's default accept backlog takes at once.
const preconnectAtOnce = 512

// preconnectBudget is how long opening n connections may take: the
// preflight's timeout, and a share per connection, so tens of thousands
// of dials on a busy machine are not cut off part way, which would leave
// the rest to dial at once when the load starts.
func preconnectBudget(n int) time.Duration {
	return PreflightTimeout + time.Duration(max(n, 0))*time.Millisecond
}

// Preconnect opens n connections to the target before the run, so the
// first wave of requests does not pay TCP (and TLS) set-up inside its
// latency: n GET /v1/models, each on a connection of its own, all left
// idle in the pool once every one has an answer. On the lean client the
// answered connections are held aside (transport.HoldConnections) and up
// to preconnectAtOnce requests are in flight; on net/http all n are sent
// at once, each holding its answer open until all have one (so no two
// share one).
// It returns how many distinct connections the n requests held (fewer
// under HTTP/2, which multiplexes one): new ones, and one the preflight
// left idle, which is as ready as a new one; and the first error.
func (c *Client) Preconnect(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, preconnectBudget(n))
	defer cancel()
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		mu.Lock()
		conns[i.Conn] = true
		mu.Unlock()
	}}
	var errOnce sync.Once
	var first error
	// get sends one request; nil when it failed (the first error is kept).
	get := func(ctx context.Context) *http.Response {
		resp, err := c.http.SideRequest(ctx, http.MethodGet, c.modelsURL(), "application/json")
		if err != nil {
			errOnce.Do(func() { first = fmt.Errorf("preconnect GET %s: %w", c.http.Scrub(c.modelsURL()), err) })
		}
		return resp
	}
	finish := func(resp *http.Response) {
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxModelsBytes))
		resp.Body.Close()
	}
	ctx = httptrace.WithClientTrace(ctx, trace)
	var done sync.WaitGroup
	if c.lean {
		// The lean client keeps each answered connection aside until
		// all are open: no goroutine holds one, so a few at a time do.
		hctx, held := transport.HoldConnections(ctx)
		defer held.Release()
		sem := make(chan struct{}, preconnectAtOnce)
		for i := 0; i < n && ctx.Err() == nil; i++ {
			sem <- struct{}{}
			done.Add(1)
			go func() {
				defer func() { <-sem; done.Done() }()
				if resp := get(hctx); resp != nil {
					finish(resp)
				}
			}()
		}
	} else {
		var got sync.WaitGroup
		got.Add(n)
		for i := 0; i < n; i++ {
			done.Add(1)
			go func() {
				defer done.Done()
				resp := get(ctx)
				got.Done()
				if resp != nil {
					got.Wait() // hold the connection until every one is open
					finish(resp)
				}
			}()
		}
	}
	done.Wait()
	mu.Lock()
	defer mu.Unlock()
	return len(conns), first
}
