package openai

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// waitingStackBudget is what a stream's goroutine may hold as stack while
// it waits for its next chunk. Stacks come in powers of two from 2 KiB:
// waiting needs 4 KiB, and the //go:noinline pragmas on the request's
// side paths (send, answer, the lean transport's write, the SSE reader's
// put) keep it there; one of them inlined back doubles it to 8 KiB, which
// a pod's memory pays for every waiting stream.
const waitingStackBudget = 4 << 10

// TestWaitingStreamStackBudget holds streams open against a server in
// another process (whose goroutines are not counted) and waits until the
// client's stacks, shrunk by GC while the streams wait, fit the budget; a
// refactor that deepens the waiting frame never gets there (net/http's
// client, for one, waits in 8 KiB). Stack sizes are whole powers of two,
// so this is a count, not a timing.
func TestWaitingStreamStackBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process")
	}
	if raceOn {
		t.Skip("the race detector's instrumentation doubles the frames; make test runs this without it")
	}
	const n = 256
	addr, stdin, lines := startHoldServer(t)
	// The lean client, the binary's for plain http: the budget is its.
	c, err := New(Config{Endpoint: transport.Endpoint{URL: "http://" + addr, Transport: transport.Config{HTTPClient: transport.HTTPClientLean}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	if got, err := c.Preconnect(context.Background(), n); err != nil || got != n {
		t.Fatalf("preconnect: %d connections, %v", got, err)
	}
	stacks := func() uint64 {
		// Each GC halves a stack that uses under a quarter of it.
		for range 4 {
			runtime.GC()
		}
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.StackInuse
	}
	stack0 := stacks()
	p := &prompts.Prompt{ID: "s", Messages: testPrompt.Messages, MaxTokens: 30}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	recs := make([]*loadgen.Record, n)
	for i := range n {
		recs[i] = loadgen.NewRecord(time.Now())
		wg.Go(func() { c.Do(ctx, p, recs[i]) })
	}
	for got := 0; got < n; {
		if !lines.Scan() {
			t.Fatal("hold server ended early")
		}
		got, _ = strconv.Atoi(lines.Text())
	}
	// Every stream has its first event; each client reads it and blocks
	// on the next. The stacks settle once all are blocked: wait for that,
	// bounded, rather than for a fixed time.
	// Halfway to the next size: the few other goroutines (the runtime's,
	// the test's) move the mean by a little, a grown frame by a whole
	// size.
	const limit = waitingStackBudget * 3 / 2
	var per int64
	for deadline := time.Now().Add(20 * time.Second); ; {
		per = (int64(stacks()) - int64(stack0)) / n
		if per <= limit || time.Now().After(deadline) {
			break
		}
		runtime.Gosched()
	}
	stdin.Close()
	wg.Wait()
	for i, r := range recs {
		if !r.OK() || len(r.Chunks) != 1 {
			t.Fatalf("stream %d: %s %s, %d chunks", i, r.ErrorKind, r.Error, len(r.Chunks))
		}
	}
	if per > limit {
		t.Errorf("a waiting stream holds %d B of stack, budget %d B: a frame on the waiting path grew (an inlined side path?)", per, waitingStackBudget)
	}
	t.Logf("%d B of stack per waiting stream (budget %d B)", per, waitingStackBudget)
}
