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
	if cr.rawRead == nil {
		cr.rawRead = cr.readRaw // one closure per connection, not per read
	}
	cr.rawN, cr.rawErrno = 0, nil
	err := cr.raw.Read(cr.rawRead)
	if err != nil || cr.rawErrno != nil {
		return cr.readError(err, cr.rawErrno)
	}
	if cr.rawN <= 0 {
		return io.EOF
	}
	return nil
}

// readRaw is fillRaw's read, called by the poller with the socket: false
// (wait) when there is nothing to read.
func (cr *connReader) readRaw(fd uintptr) bool {
	bp := cr.getIn()
	var n int
	var errno error
	for {
		n, errno = syscall.Read(int(fd), *bp)
		if errno != syscall.EINTR {
			break
		}
	}
	if errno == syscall.EAGAIN {
		putIn(bp)
		return false
	}
	cr.rawN, cr.rawErrno = n, errno
	if n > 0 {
		cr.took(bp, n)
	} else {
		putIn(bp)
	}
	return true
}

// readError words a failed read as net.Conn.Read does: a deadline (a
// cancelled context), a closed connection, or the system call's error. Not
// inlined: it would grow the frame every waiting stream holds.
//
//go:noinline
func (cr *connReader) readError(err, errno error) error {
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) {
			err = oe.Err
		}
	} else {
		err = os.NewSyscallError("read", errno)
	}
	return &net.OpError{Op: "read", Net: "tcp", Source: cr.conn.LocalAddr(), Addr: cr.conn.RemoteAddr(), Err: err}
}
