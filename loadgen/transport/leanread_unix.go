//go:build unix

package transport

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// rawReaderOf is the connection's raw reader: a plain TCP connection's.
func rawReaderOf(c net.Conn) rawReader {
	if tc, ok := c.(*net.TCPConn); ok {
		if rc, err := tc.SyscallConn(); err == nil {
			return rc
		}
	}
	return nil
}

// fillRaw reads when the socket is readable: the runtime's poller waits,
// and a buffer is taken from the pool only for a read that will not block.
// The system calls are those of net.Conn.Read: a read that finds nothing,
// the wait, the read.
func (cr *connReader) fillRaw() error {
	var (
		n     int
		errno error
	)
	err := cr.raw.Read(func(fd uintptr) bool {
		bp := inPool.Get().(*[]byte)
		for {
			n, errno = syscall.Read(int(fd), *bp)
			if errno != syscall.EINTR {
				break
			}
		}
		if errno == syscall.EAGAIN {
			inPool.Put(bp)
			return false
		}
		if n > 0 {
			cr.buf, cr.r, cr.w = bp, 0, n
		} else {
			inPool.Put(bp)
		}
		return true
	})
	if err != nil {
		// A deadline (a cancelled context) or a closed connection, worded
		// as net.Conn.Read words it.
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
		return &net.OpError{Op: "read", Net: "tcp", Source: cr.conn.LocalAddr(), Addr: cr.conn.RemoteAddr(), Err: err}
	}
	switch {
	case errno != nil:
		return &net.OpError{Op: "read", Net: "tcp", Source: cr.conn.LocalAddr(), Addr: cr.conn.RemoteAddr(), Err: os.NewSyscallError("read", errno)}
	case n <= 0:
		return io.EOF
	}
	return nil
}
