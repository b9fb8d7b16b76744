package openai

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"

	"github.com/tailgate-llm/tailgate/loadgen"
)

var _ loadgen.Preconnector = (*Client)(nil)

// Preconnect opens n connections to the target before the run, so the
// first wave of requests does not pay TCP (and TLS) set-up inside its
// latency: n GET /v1/models at once, each holding its connection until
// all n have an answer (so no two share one), then left idle in the pool.
// It returns how many distinct connections the n requests held (fewer
// under HTTP/2, which multiplexes one): new ones, and one the preflight
// left idle, which is as ready as a new one; and the first error.
func (c *Client) Preconnect(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		mu.Lock()
		conns[i.Conn] = true
		mu.Unlock()
	}}
	var got, done sync.WaitGroup
	got.Add(n)
	var errOnce sync.Once
	var first error
	for i := 0; i < n; i++ {
		done.Add(1)
		go func() {
			defer done.Done()
			answered := false
			defer func() {
				if !answered {
					got.Done()
				}
			}()
			resp, err := c.http.SideRequest(httptrace.WithClientTrace(ctx, trace), http.MethodGet, c.modelsURL(), "application/json")
			if err != nil {
				errOnce.Do(func() { first = fmt.Errorf("preconnect GET %s: %v", c.http.Scrub(c.modelsURL()), err) })
				return
			}
			answered = true
			got.Done()
			got.Wait() // hold the connection until every one is open
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxModelsBytes))
			resp.Body.Close()
		}()
	}
	done.Wait()
	mu.Lock()
	defer mu.Unlock()
	return len(conns), first
}
