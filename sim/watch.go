package sim

import (
	"context"
	"sync"
	"sync/atomic"
)

// stateWatch tells waiters that the server's state changed (a request
// arrived, was admitted, sent a chunk, ended; an engine's queue moved), so
// they wait for a condition on an event rather than by polling. Changing
// state costs an atomic load while nobody waits.
type stateWatch struct {
	waiters atomic.Int32
	mu      sync.Mutex
	ch      chan struct{} // closed at the next change; nil while nobody holds it
}

// changed wakes every waiter. Call it after the change is visible.
func (w *stateWatch) changed() {
	if w == nil || w.waiters.Load() == 0 {
		return
	}
	w.mu.Lock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
	w.mu.Unlock()
}

// await blocks until cond holds, checking it again after every change.
func (w *stateWatch) await(ctx context.Context, cond func() bool) error {
	w.waiters.Add(1)
	defer w.waiters.Add(-1)
	for {
		w.mu.Lock()
		if w.ch == nil {
			w.ch = make(chan struct{})
		}
		ch := w.ch
		w.mu.Unlock()
		// Checked after taking ch: a change from here on closes it.
		if cond() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Await blocks until cond holds or ctx ends, checking cond again whenever
// the server's state changes: a request arriving, leaving the queue,
// sending a chunk or ending (Truth, InFlight, Pending), an engine's queue
// or batch moving, a global stall beginning. It is how a test waits for a
// state (N requests in flight, a request's first chunk) without sleeping.
// cond must not block; it may call the Server's methods.
func (s *Server) Await(ctx context.Context, cond func() bool) error {
	return s.watch.await(ctx, cond)
}
