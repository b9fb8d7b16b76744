package loopbacktest

import (
	"io"
	"net"
	"testing"
)

// Each connection gets its own handler, and the cleanup ends a handler
// still reading a connection the client left open.
func TestServe(t *testing.T) {
	done := make(chan struct{}, 2)
	var addr string
	var clients []net.Conn
	t.Run("serve", func(t *testing.T) {
		addr = Serve(t, func(c net.Conn) {
			defer func() { done <- struct{}{} }()
			buf := make([]byte, 1)
			if _, err := io.ReadFull(c, buf); err != nil {
				return
			}
			_, _ = c.Write(buf)
			_, _ = c.Read(buf) // until the cleanup closes it
		})
		for _, b := range []byte("ab") {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, c)
			if _, err := c.Write([]byte{b}); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 1)
			if _, err := io.ReadFull(c, got); err != nil || got[0] != b {
				t.Fatalf("echo of %q: %q, %v", b, got, err)
			}
		}
	})
	// The clients are still open: only the cleanup can have ended the
	// handlers' last reads.
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	// The subtest's cleanup has run: both handlers returned, the port is shut.
	for range 2 {
		select {
		case <-done:
		default:
			t.Fatal("a handler outlived its test")
		}
	}
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Error("the listener outlived its test")
	}
}
