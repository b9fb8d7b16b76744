package openai

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

var _ loadgen.Preconnector = (*Client)(nil)

// Preconnect opens n connections to the target before the run, so the
// first wave of requests does not pay TCP (and TLS) set-up inside its
// latency: n GET /v1/models at once, each holding its connection until
// all n have an answer (so no two share one), then left idle in the pool.
// It returns how many new connections were opened (fewer under HTTP/2,
// which multiplexes one) and the first error.
func (c *Client) Preconnect(ctx context.Context, n int) (int, error) {
	if n <= 0 {
		return 0, nil
	}
	ctx, cancel := context.WithTimeout(ctx, PreflightTimeout)
	defer cancel()
	var opened atomic.Int64
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		if !i.Reused {
			opened.Add(1)
		}
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
			req, err := c.http.NewRequest(httptrace.WithClientTrace(ctx, trace), http.MethodGet, c.modelsURL(), nil)
			if err != nil {
				errOnce.Do(func() { first = err })
				return
			}
			req.Header.Set("Accept", "application/json")
			req.Header.Del("Content-Type")
			resp, _, err := c.http.Do(req)
			if err != nil {
				_, msg := transport.Classify(ctx, err, "before the response")
				errOnce.Do(func() { first = fmt.Errorf("preconnect GET %s: %s", c.http.Scrub(c.modelsURL()), c.http.Scrub(msg)) })
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
	return int(opened.Load()), first
}
