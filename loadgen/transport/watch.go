package transport

import (
	"context"
	"sync"
)

// A request's context that ends interrupts the request's blocked read or
// write by a deadline in the past on its connection. The requests of a
// run share one context (the runner's), so rather than a context.AfterFunc
// per request (its own context, closure and entry in the run's map of
// children), the lean client keeps one watch per context: the connections
// of its requests in flight, all interrupted when it ends.

// watch is one context's connections in flight.
type watch struct {
	l     *lean
	done  <-chan struct{}
	stop  func() bool // its context.AfterFunc's
	mu    sync.Mutex
	conns map[*leanConn]struct{}
	fired bool
}

// watchOn registers c's request under ctx: when ctx ends, c's deadline is
// put in the past. A context that cannot end needs no watch.
func (l *lean) watchOn(ctx context.Context, c *leanConn) {
	done := ctx.Done()
	if done == nil {
		return
	}
	for {
		l.wmu.Lock()
		w := l.watches[done]
		if w == nil {
			w = &watch{l: l, done: done, conns: map[*leanConn]struct{}{}}
			if l.watches == nil {
				l.watches = map[<-chan struct{}]*watch{}
			}
			l.watches[done] = w
			// Under wmu: the AfterFunc, which may run at once, takes wmu
			// to drop the watch only once it is in place.
			w.stop = context.AfterFunc(ctx, w.fire)
		}
		l.wmu.Unlock()
		w.mu.Lock()
		if !w.fired {
			w.conns[c] = struct{}{}
			c.watch = w
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		// Fired or retired between the lookup and now: for a context
		// that ended, interrupt the request here; else look again.
		if err := ctx.Err(); err != nil {
			_ = c.conn.SetDeadline(aLongTimeAgo)
			c.watch = firedWatch
			return
		}
	}
}

// firedWatch stands for a watch that fired on a connection.
var firedWatch = &watch{fired: true}

// unwatch takes c's request off its watch: false when the context ended
// first (c's deadline was put in the past: it is not to be reused), as
// context.AfterFunc's stop says.
func (c *leanConn) unwatch() bool {
	w := c.watch
	if w == nil {
		return true
	}
	c.watch = nil
	if w == firedWatch {
		return false
	}
	w.mu.Lock()
	_, ok := w.conns[c]
	delete(w.conns, c)
	empty := ok && len(w.conns) == 0
	w.mu.Unlock()
	if empty {
		w.retire()
	}
	return ok
}

// retire drops a watch left with no connection, so that a context that
// never ends (a caller's own, never cancelled) holds none: a later request
// under it makes a new one.
func (w *watch) retire() {
	w.l.wmu.Lock()
	w.mu.Lock()
	gone := len(w.conns) == 0 && !w.fired && w.l.watches[w.done] == w
	if gone {
		delete(w.l.watches, w.done)
		w.fired = true // a watchOn that found it looks again
	}
	w.mu.Unlock()
	w.l.wmu.Unlock()
	if gone {
		w.stop()
	}
}

// fire interrupts every connection of the watch and drops it: a later
// request under the same (ended) context interrupts itself (watchOn).
func (w *watch) fire() {
	w.l.wmu.Lock()
	if w.l.watches[w.done] == w {
		delete(w.l.watches, w.done)
	}
	w.l.wmu.Unlock()
	w.mu.Lock()
	w.fired = true
	// Under mu: a connection unwatch has not taken off yet is still this
	// request's when its deadline is set.
	for c := range w.conns {
		_ = c.conn.SetDeadline(aLongTimeAgo)
	}
	clear(w.conns)
	w.mu.Unlock()
}
