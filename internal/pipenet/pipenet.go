// Package pipenet serves and dials HTTP over in-memory connections
// (net.Pipe), so a server and its clients run inside a testing/synctest
// bubble: a goroutine blocked on a real socket is not durably blocked and
// the fake clock would not move, one blocked on a pipe is. On that clock
// every instant is exact whatever the machine's load.
package pipenet

import (
	"context"
	"net"
	"sync"
)

// Listener is a net.Listener whose connections come from its Dial.
type Listener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

// Listen returns a new Listener. Make it inside the bubble that uses it.
func Listen() *Listener {
	return &Listener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

// Accept waits for the next Dial.
func (l *Listener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close ends Accept and refuses later dials.
func (l *Listener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

// Addr is "pipe".
func (l *Listener) Addr() net.Addr { return Addr{} }

// Dial connects to the listener whatever the address: it has the
// signature of net.Dialer.DialContext, for an http.Transport.
func (l *Listener) Dial(ctx context.Context, _, _ string) (net.Conn, error) {
	client, server := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Addr is a Listener's address.
type Addr struct{}

// Network is "pipe".
func (Addr) Network() string { return "pipe" }

// String is "pipe".
func (Addr) String() string { return "pipe" }
