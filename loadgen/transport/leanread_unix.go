//go:build unix

package transport

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// sysRead is the read system call; tests count it.
var sysRead = syscall.Read

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
	if err := cr.pending; err != nil {
		cr.pending = nil
		return err
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
	n, errno, ok := cr.readOnce(fd)
	if !ok {
		return false
	}
	cr.rawN, cr.rawErrno = n, errno
	return true
}

// readOnce reads the socket into a pooled buffer, kept only for bytes
// read; ok is false when there was nothing to read.
func (cr *connReader) readOnce(fd uintptr) (n int, errno error, ok bool) {
	bp := cr.getIn()
	for {
		n, errno = sysRead(int(fd), *bp)
		if errno != syscall.EINTR {
			break
		}
	}
	if errno == syscall.EAGAIN {
		putIn(bp)
		return 0, nil, false
	}
	if n > 0 {
		cr.took(bp, n)
	} else {
		putIn(bp)
	}
	return n, errno, true
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

// pump runs step inside one wait of the poller (see leanBody.Pump): a read
// that finds nothing ends step's turn and the poller waits, without the
// fresh read each wait of fillRaw begins with. The end or a failure, of a
// read or of the wait (a deadline, a closed connection), waits in pending
// for the next fill, which reports it as fillRaw would.
func (cr *connReader) pump(step func() bool) {
	if cr.pumpRead == nil {
		cr.pumpRead = cr.pumpRaw
	}
	cr.step, cr.pumping = step, true
	err := cr.raw.Read(cr.pumpRead)
	cr.step, cr.pumping = nil, false
	if err != nil && cr.pending == nil {
		cr.pending = cr.readError(err, nil)
	}
}

// pumpRaw is pump's turn, called by the poller with the socket: step reads
// what is buffered; when it asks for more, a read, and false (wait) when
// the socket has no more. A read that did not fill its buffer took all the
// socket had (TCP copies until the buffer is full or the queue is empty), so
// the wait follows it without a read that would find nothing: bytes that
// come later are a new edge for the poller (nginx's recv treats a short
// read so under epoll). A turn's first read is never skipped: the turn
// follows a wait, or the reset of the poller's readiness a wait begins with.
func (cr *connReader) pumpRaw(fd uintptr) bool {
	drained := false
	for {
		if cr.step() {
			return true
		}
		// step took all it could: nothing is buffered.
		if drained {
			return false
		}
		n, errno, ok := cr.readOnce(fd)
		if !ok {
			return false
		}
		if n > 0 {
			drained = !cr.big // the read did not fill its buffer
			continue
		}
		if errno != nil {
			cr.pending = cr.readError(nil, errno)
		} else {
			cr.pending = io.EOF
		}
		return true
	}
}
