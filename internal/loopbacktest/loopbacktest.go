// Package loopbacktest serves raw connections on a loopback TCP port for
// tests that need a real socket (a client's own reading of the wire, its
// allocations, its connection reuse), where internal/pipenet's in-memory
// connections would not exercise the same code.
package loopbacktest

import (
	"net"
	"sync"
	"testing"
)

// Serve listens on a free loopback port and runs handle on each accepted
// connection in a goroutine of its own, closing the connection when
// handle returns. It returns the address, host:port. At tb's cleanup the
// listener and every open connection are closed and Serve waits for the
// handlers, so none outlives the test: handle must return once its
// connection is closed.
func Serve(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		mu     sync.Mutex
		conns  = map[net.Conn]struct{}{}
		closed bool
		wg     sync.WaitGroup
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			if closed {
				// Accepted as the cleanup began: it would miss this one.
				mu.Unlock()
				c.Close()
				return
			}
			conns[c] = struct{}{}
			wg.Add(1)
			mu.Unlock()
			go func() {
				defer wg.Done()
				defer func() {
					mu.Lock()
					delete(conns, c)
					mu.Unlock()
					c.Close()
				}()
				handle(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		closed = true
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}
