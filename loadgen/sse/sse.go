// Package sse reads Server-Sent Events: the framing every streaming HTTP
// protocol of tailgate shares (OpenAI-compatible servers, TGI's native
// API, Triton's generate extension). It knows nothing of what an event's
// data means; each protocol decodes its own.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// DefaultMaxEventBytes bounds one event's data (and one line), so a server
// that never sends a newline cannot make the client buffer without limit.
const DefaultMaxEventBytes = 8 << 20

// ErrEventTooLarge is reported by Scanner.Err when a line or an event's
// data exceeds the scanner's limit.
var ErrEventTooLarge = errors.New("sse: event exceeds size limit")

// DefaultBufferBytes is the read buffer of a Scanner that makes its own.
const DefaultBufferBytes = 16 << 10

var bom = []byte("\xef\xbb\xbf")

// PooledBufferBytes is the read buffer a pooled Scanner borrows.
const PooledBufferBytes = 4 << 10

var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, PooledBufferBytes) }}

// Waiter is an input that can wait for its next bytes without a read
// buffer: WaitRead returns once a Read would not block (bytes, the end, or
// an error that Read will return). A pooled Scanner over a Waiter holds no
// buffer while it waits.
type Waiter interface {
	WaitRead() error
}

// Scanner reads Server-Sent Events (WHATWG HTML §9.2) from a stream and
// yields each event's data. It follows the spec where servers rely on it:
// "data:" with or without the one optional space, LF or CRLF line ends,
// comment lines (": keep-alive", a bare ":"), unknown fields ignored,
// events ended by a blank line, multi-line data joined with "\n", events
// split across reads. Deviations, each for a real server: a bare CR is not
// a line end (no LLM server sends one, and supporting it would cost a
// second byte search per line); an event whose lines were complete but that
// lacks the closing blank line at EOF is still dispatched; and the
// non-standard "error:" field of old llama.cpp builds is kept (ErrorData),
// since it is the only place those servers report a failure.
//
// The slices returned by Data, Type and ErrorData are valid until the next
// call to Next, Wait, Rest or Reset (Data may point into the read buffer,
// which a pooled scanner gives back). A Scanner is not safe for concurrent
// use.
type Scanner struct {
	r             *bufio.Reader
	own           bool // r is the scanner's: Reset reuses its buffer
	pooled        bool // r comes from readerPool, only while needed
	src           io.Reader
	waiter        Waiter // src, when it can wait without a buffer
	maxEventBytes int

	data    []byte
	view    []byte // the event's data in the read buffer, if not in data
	typ     []byte
	errData []byte
	hasData bool
	line    []byte // assembles lines longer than the reader's buffer

	started bool // past the first line, where a BOM may sit
	partial bool // the stream ended inside a line
	err     error
}

// NewScanner returns a Scanner reading r. An r that is already a
// *bufio.Reader is used as it is, so its buffer size is the caller's choice.
func NewScanner(r io.Reader) *Scanner {
	s := &Scanner{maxEventBytes: DefaultMaxEventBytes}
	s.Reset(r)
	return s
}

// NewScannerSize returns a Scanner with its own read buffer of size bytes
// (bufio's minimum is 16), kept across Reset: a pool of scanners holds one
// buffer per in-flight stream, so its size is a memory cost per stream.
func NewScannerSize(r io.Reader, size int) *Scanner {
	s := &Scanner{maxEventBytes: DefaultMaxEventBytes, own: true}
	s.r = bufio.NewReaderSize(r, size)
	return s
}

// NewPooledScanner returns a Scanner that borrows its read buffer from a
// shared pool while it holds unread input. Over an input that is a Waiter
// it gives the buffer back whenever the input read so far is consumed, and
// waits for more without one: thousands of streams waiting for their next
// event then hold no read buffers. Over any other input it holds the
// buffer until Reset.
func NewPooledScanner() *Scanner {
	return &Scanner{maxEventBytes: DefaultMaxEventBytes, pooled: true}
}

// Reset makes s read r from the start, keeping its buffers: a scanner
// with its own read buffer reads r through it, even an r that is a
// *bufio.Reader. Reset(nil) lets go of the last input (before pooling s).
func (s *Scanner) Reset(r io.Reader) {
	switch br, ok := r.(*bufio.Reader); {
	case s.pooled:
		s.putReader()
		s.src = r
		s.waiter, _ = r.(Waiter)
	case s.own:
		s.r.Reset(r)
	case ok:
		s.r = br
	default:
		s.r, s.own = bufio.NewReaderSize(r, DefaultBufferBytes), true
	}
	s.data, s.typ, s.errData, s.line, s.view = s.data[:0], s.typ[:0], s.errData[:0], s.line[:0], nil
	s.hasData, s.started, s.partial, s.err = false, false, false, nil
}

// RetainedBytes is the capacity of the event buffers s keeps for reuse: a
// pool drops a scanner that one huge event grew.
func (s *Scanner) RetainedBytes() int {
	return cap(s.data) + cap(s.line) + cap(s.typ) + cap(s.errData)
}

// Rest is what is left of the input after the last event read, its
// buffered bytes first: a client drains it so the connection is reused.
func (s *Scanner) Rest() io.Reader {
	if s.r == nil {
		return s.src
	}
	return s.r
}

// putReader gives a pooled scanner's reader back. Not inlined: bufio's
// Reset would grow the frame a waiting stream holds (see Wait).
//
//go:noinline
func (s *Scanner) putReader() {
	if s.r != nil {
		s.r.Reset(nil)
		readerPool.Put(s.r)
		s.r = nil
	}
}

// Wait gives, on a pooled scanner over a Waiter, its read buffer back if
// it holds no unread input and waits for more without one; otherwise it
// does nothing. Next waits so itself, but a caller that calls Wait between
// events waits higher up its stack: the wait of an idle stream then keeps
// the goroutine's stack small (it shrinks to what a waiting stream uses).
// An error is left for Next to report.
func (s *Scanner) Wait() {
	if s.waiter == nil || s.err != nil || (s.r != nil && s.r.Buffered() > 0) {
		return
	}
	s.putReader()
	_ = s.waiter.WaitRead()
}

// getReader makes sure a pooled scanner has a reader: over a Waiter it
// gives back an empty one and waits for input without it.
func (s *Scanner) getReader() error {
	if s.waiter != nil {
		if s.r != nil && s.r.Buffered() == 0 {
			s.putReader()
		}
		if s.r == nil {
			if err := s.waiter.WaitRead(); err != nil {
				return err
			}
		}
	}
	if s.r == nil {
		s.r = readerPool.Get().(*bufio.Reader)
		s.r.Reset(s.src)
	}
	return nil
}

// SetMaxEventBytes changes the limit on one line or one event's data.
func (s *Scanner) SetMaxEventBytes(n int) { s.maxEventBytes = n }

// Next advances to the next event that has data (or an error field) and
// reports whether there is one. At the end of the stream or on a read
// error it returns false; Err tells which.
func (s *Scanner) Next() bool {
	if s.err != nil {
		return false
	}
	s.data, s.typ, s.errData, s.hasData, s.view = s.data[:0], s.typ[:0], s.errData[:0], false, nil
	if s.started {
		if ok, done := s.nextFast(); done {
			return ok
		}
	}
	for {
		line, err := s.readLine()
		if err != nil {
			s.err = err
			// Lines before EOF were complete: dispatch them rather than
			// lose a final "data: [DONE]" sent without its blank line.
			return errors.Is(err, io.EOF) && (s.hasData || len(s.errData) > 0)
		}
		if !s.started {
			s.started = true
			line = bytes.TrimPrefix(line, bom)
		}
		if len(line) == 0 {
			if s.hasData || len(s.errData) > 0 {
				return true
			}
			s.typ = s.typ[:0] // the spec resets the type on an empty event
			continue
		}
		if line[0] == ':' {
			continue // comment: keep-alive pings
		}
		field, value := line, line[:0]
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if len(s.data)+len(value)+1 > s.maxEventBytes {
				s.err = ErrEventTooLarge
				return false
			}
			if s.hasData {
				s.data = append(s.data, '\n')
			}
			s.data = append(s.data, value...)
			s.hasData = true
		case "event":
			s.typ = append(s.typ[:0], value...)
		case "error":
			s.errData = append(s.errData[:0], value...)
		}
		// id, retry and unknown fields carry nothing a load generator uses.
	}
}

// nextFast reads the event servers send for each token, one "data:" line
// and its blank line, when it is whole in the read buffer: one search for
// the line end, no per-line reader calls, and the data is not copied. done
// is false, with nothing consumed, for anything else; Next's line loop
// then reads it.
func (s *Scanner) nextFast() (ok, done bool) {
	if s.pooled {
		if err := s.getReader(); err != nil {
			s.err = err // as readLine would report it
			return false, true
		}
	}
	r := s.r
	n := r.Buffered()
	if n == 0 {
		// What ReadSlice would do first: one read into the empty buffer.
		if _, err := r.Peek(1); err != nil {
			s.err = err
			return false, true
		}
		n = r.Buffered()
	}
	buf, _ := r.Peek(n)
	if len(buf) < 7 || string(buf[:5]) != "data:" {
		return false, false
	}
	eol := bytes.IndexByte(buf, '\n')
	if eol < 0 || eol+1 >= len(buf) {
		return false, false
	}
	end := eol + 1
	switch {
	case buf[end] == '\n':
		end++
	case buf[end] == '\r' && end+1 < len(buf) && buf[end+1] == '\n':
		end += 2
	default:
		return false, false // more lines in this event
	}
	value := trimEOL(buf[5 : eol+1])
	if len(value) > 0 && value[0] == ' ' {
		value = value[1:]
	}
	if len(value)+1 > s.maxEventBytes {
		return false, false // the line loop reports it
	}
	s.view = value        // not copied: valid until the buffer is read again
	_, _ = r.Discard(end) // buffered: cannot fail
	return true, true
}

// readLine returns the next line without its LF or CRLF. The slice is
// valid until the next read.
func (s *Scanner) readLine() ([]byte, error) {
	if s.pooled {
		if err := s.getReader(); err != nil {
			return nil, err
		}
	}
	line, err := s.r.ReadSlice('\n')
	if err == nil {
		return trimEOL(line), nil
	}
	if errors.Is(err, bufio.ErrBufferFull) {
		s.line = append(s.line[:0], line...)
		for errors.Is(err, bufio.ErrBufferFull) {
			line, err = s.r.ReadSlice('\n')
			if len(s.line)+len(line) > s.maxEventBytes {
				return nil, ErrEventTooLarge
			}
			s.line = append(s.line, line...)
		}
		if err == nil {
			return trimEOL(s.line), nil
		}
		line = s.line
	}
	// EOF or a read error: whatever is left is a line cut short.
	if len(line) > 0 {
		s.partial = true
	}
	return nil, err
}

func trimEOL(line []byte) []byte {
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line
}

// Data is the current event's data, data lines joined with "\n".
func (s *Scanner) Data() []byte {
	if s.view != nil {
		return s.view
	}
	return s.data
}

// Type is the current event's "event:" field; empty means "message".
func (s *Scanner) Type() []byte { return s.typ }

// ErrorData is the value of a non-standard "error:" field line in the
// current event (old llama.cpp builds), or empty.
func (s *Scanner) ErrorData() []byte { return s.errData }

// Err is the error that ended the stream, or nil at a clean end of input.
func (s *Scanner) Err() error {
	if errors.Is(s.err, io.EOF) {
		return nil
	}
	return s.err
}

// PartialLine reports whether the input ended inside a line: the sign of a
// connection cut mid-event rather than a server that closed cleanly.
func (s *Scanner) PartialLine() bool { return s.partial }
