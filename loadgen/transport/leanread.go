package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"sync"

	"github.com/tailgate-llm/tailgate/internal/hexdigit"
)

// A lean connection holds a read buffer only while it has unread bytes:
// thousands of streams that wait for their next token would otherwise hold
// thousands of buffers that are empty. connReader waits for the socket to
// be readable without a buffer (readReady), then reads into one from
// inPool; the buffer goes back when its bytes are consumed.

// leanReadBufferBytes is the size of the pooled buffers a lean connection
// reads into: token events are ~200 bytes and come a few at a time.
// leanBigReadBufferBytes is the size it reads into after a read that
// filled a small one: an answer that comes faster than it is read (a
// zero-delay stream, a whole non-streamed body) then takes one system call
// per 32 KiB, not per 4 (reads are a large share of the client's CPU on
// zero-delay streams: bench-peers' streamed step). A buffer is held only
// while its bytes wait to be consumed, so the big ones are few at a time.
const (
	leanReadBufferBytes    = 4 << 10
	leanBigReadBufferBytes = 32 << 10
)

var (
	inPool    = sync.Pool{New: func() any { b := make([]byte, leanReadBufferBytes); return &b }}
	inBigPool = sync.Pool{New: func() any { b := make([]byte, leanBigReadBufferBytes); return &b }}
)

type connReader struct {
	conn net.Conn
	raw  rawReader // nil: reads block holding a buffer (TLS, other systems)
	buf  *[]byte   // nil when nothing is buffered
	r, w int
	big  bool // the last read filled its buffer: the next takes a big one

	rawRead  func(fd uintptr) bool // readRaw, bound once
	rawN     int                   // what readRaw read
	rawErrno error
}

// rawReader is syscall.RawConn's Read.
type rawReader interface {
	Read(func(fd uintptr) bool) error
}

func (cr *connReader) buffered() int { return cr.w - cr.r }

// bytes are the unread bytes.
func (cr *connReader) bytes() []byte {
	if cr.buf == nil {
		return nil
	}
	return (*cr.buf)[cr.r:cr.w]
}

// consume marks n bytes read; the buffer goes back once it is empty.
func (cr *connReader) consume(n int) {
	cr.r += n
	if cr.r == cr.w {
		cr.release()
	}
}

func (cr *connReader) release() {
	if cr.buf != nil {
		putIn(cr.buf)
		cr.buf, cr.r, cr.w = nil, 0, 0
	}
}

// getIn is a read buffer from the pools: a big one after a read that
// filled its buffer.
func (cr *connReader) getIn() *[]byte {
	if cr.big {
		return inBigPool.Get().(*[]byte)
	}
	return inPool.Get().(*[]byte)
}

// putIn gives a pooled buffer back (an unread one, of its own size, is
// dropped).
func putIn(bp *[]byte) {
	switch cap(*bp) {
	case leanReadBufferBytes:
		inPool.Put(bp)
	case leanBigReadBufferBytes:
		inBigPool.Put(bp)
	}
}

// took records a read of n bytes into bp: it holds them, and whether it
// was filled says which size the next read takes.
func (cr *connReader) took(bp *[]byte, n int) {
	cr.big = n == len(*bp)
	cr.buf, cr.r, cr.w = bp, 0, n
}

// fill reads more bytes when none are buffered. It waits for them without
// a buffer where the connection allows it.
func (cr *connReader) fill() error {
	if cr.buffered() > 0 {
		return nil
	}
	if cr.raw != nil {
		return cr.fillRaw()
	}
	return cr.fillBlocking()
}

// fillBlocking reads into a pooled buffer, which the read holds while it
// waits.
func (cr *connReader) fillBlocking() error {
	bp := cr.getIn()
	n, err := cr.conn.Read(*bp)
	if n > 0 {
		cr.took(bp, n)
		return nil
	}
	putIn(bp)
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// Read reads buffered bytes first, then from the connection into p: the
// response head's bufio.Reader reads through it.
func (cr *connReader) Read(p []byte) (int, error) {
	if cr.buffered() > 0 {
		n := copy(p, cr.bytes())
		cr.consume(n)
		return n, nil
	}
	return cr.conn.Read(p)
}

// unread puts b back in front of the buffered bytes (what the head's
// bufio.Reader read past the head). The bytes go into a slice of their
// size, not a pooled buffer: an answer whose body is not read at once
// (Preconnect holds thousands) then holds only its own bytes.
func (cr *connReader) unread(b []byte) {
	if len(b) == 0 {
		return
	}
	if cr.buf != nil && cr.r >= len(b) {
		cr.r -= len(b)
		copy((*cr.buf)[cr.r:], b)
		return
	}
	s := append(append(make([]byte, 0, len(b)+cr.buffered()), b...), cr.bytes()...)
	cr.release()
	cr.buf, cr.r, cr.w = &s, 0, len(s)
}

// Body framings.
const (
	bodyChunked = iota
	bodyLength  // Content-Length
	bodyClose   // to the end of the connection
)

// Chunked decoding states.
const (
	chunkHeader  = iota // reading a chunk-size line
	chunkData           // inside a chunk's data
	chunkCRLF           // the CRLF after a chunk's data (crlf says how much of it came)
	chunkTrailer        // trailer lines after the last chunk, to the blank one
)

// maxChunkLine bounds a chunk-size or trailer line, as net/http does.
const maxChunkLine = 4096

var (
	errLineTooLong       = errors.New("header line too long")
	errTrailerEOF        = errors.New("http: unexpected EOF reading trailer")
	errLongTrailer       = errors.New("http: suspiciously long trailer after chunked body")
	errExcess            = errors.New("chunked encoding contains too much non-data")
	errMalformedChunked  = errors.New("malformed chunked encoding")
	errChunkBareLF       = errors.New("chunked line ends with bare LF")
	errChunkCR           = errors.New("invalid CR in chunked line")
	errChunkEmptyLength  = errors.New("empty hex number for chunk length")
	errChunkLengthByte   = errors.New("invalid byte in chunk length")
	errChunkLengthTooBig = errors.New("http chunk length too large")
)

// bodyReader decodes an answer's body from a connReader in place: the
// chunk framing needs no buffer of its own, so a body that waits for its
// next chunk holds nothing but this state. Errors are net/http's for the
// same input, so both clients give the same records.
type bodyReader struct {
	in     *connReader
	mode   int
	left   int64 // bodyLength: bytes of the body left; bodyChunked: of the chunk
	state  int
	crlf   int // chunkCRLF: bytes of the chunk's end seen
	end    [2]byte
	line   []byte // a chunk-size line split across reads, or the trailer
	excess int64  // framing beyond its due, as net/http counts it
	err    error  // sticky; io.EOF at the body's clean end
	dirty  bool   // the body's end was read past: the connection is not reusable
}

// init reads resp's body framing as net/http does; false when there is
// no body to read.
func (b *bodyReader) init(in *connReader, resp *http.Response) bool {
	b.in = in
	switch {
	case resp.Body == http.NoBody || resp.ContentLength == 0:
		return false
	case len(resp.TransferEncoding) > 0 && resp.TransferEncoding[0] == "chunked":
		b.mode = bodyChunked
	case resp.ContentLength > 0:
		b.mode, b.left = bodyLength, resp.ContentLength
	default:
		b.mode = bodyClose
	}
	return true
}

// ready returns nil once data bytes are buffered, or the error (io.EOF at
// the end) that ends the body. It waits without holding a buffer.
func (b *bodyReader) ready() error {
	in := b.in
	for b.err == nil {
		if b.mode == bodyLength && b.left == 0 {
			b.err = io.EOF
			break
		}
		if b.mode != bodyChunked || b.state == chunkData {
			if in.buffered() > 0 {
				return nil
			}
		} else if in.buffered() > 0 {
			b.frame()
			continue
		}
		// Not in.fill: one frame fewer on the stack of a waiting stream.
		var err error
		if in.raw != nil {
			err = in.fillRaw()
		} else {
			err = in.fillBlocking()
		}
		if err != nil {
			switch {
			case !errors.Is(err, io.EOF):
			case b.mode == bodyClose:
			case b.mode == bodyChunked && b.state == chunkTrailer && len(b.line) < 2:
				err = errTrailerEOF
			case b.mode == bodyChunked && b.state == chunkTrailer:
				err = errLongTrailer // net/http's words for a trailer cut short too
			default:
				err = io.ErrUnexpectedEOF
			}
			b.err = err
		}
	}
	return b.err
}

// frame consumes chunk framing from the buffered bytes.
func (b *bodyReader) frame() {
	in := b.in
	if b.state == chunkCRLF {
		// Two bytes, then the verdict: net/http reads both first, so a
		// connection cut after one is a cut, not bad framing.
		n := copy(b.end[b.crlf:], in.bytes())
		b.crlf += n
		in.consume(n)
		if b.crlf == 2 {
			if b.end != [2]byte{'\r', '\n'} {
				b.err = errMalformedChunked
				return
			}
			b.state, b.crlf = chunkHeader, 0
		}
		return
	}
	if b.state == chunkTrailer {
		b.trailer()
		return
	}
	p := in.bytes()
	i := bytes.IndexByte(p, '\n')
	if i < 0 {
		if len(b.line)+len(p) >= maxChunkLine+2 {
			b.err = errLineTooLong
			return
		}
		b.line = append(b.line, p...)
		in.consume(len(p))
		return
	}
	line := p[:i+1]
	if len(b.line) > 0 {
		line = append(b.line, line...)
		b.line = b.line[:0]
	}
	b.chunkLine(line)
	in.consume(i + 1) // after the parse: the buffer may go back to the pool
}

// trailer reads what follows the last chunk: a bare CRLF, or trailer
// fields to a blank line, checked (and then dropped: nothing a load
// generator reads) as net/http checks them: the blank line within 4 KiB,
// the fields by textproto.
func (b *bodyReader) trailer() {
	in := b.in
	if len(b.line) == 0 && in.buffered() >= 2 && string(in.bytes()[:2]) == "\r\n" {
		in.consume(2)
		b.err = io.EOF
		return
	}
	had := len(b.line)
	p := in.bytes()
	b.line = append(b.line, p[:min(len(p), maxChunkLine-had)]...)
	if len(b.line) < 2 {
		in.consume(len(p))
		return
	}
	if string(b.line[:2]) == "\r\n" {
		in.consume(2 - had)
		b.err = io.EOF
		return
	}
	end := bytes.Index(b.line, []byte("\r\n\r\n"))
	if end < 0 {
		if len(b.line) >= maxChunkLine {
			b.err = errLongTrailer
			return
		}
		in.consume(len(p))
		return
	}
	block := b.line[:end+4]
	br := bufio.NewReader(bytes.NewReader(block))
	if _, err := textproto.NewReader(br).ReadMIMEHeader(); err != nil {
		if errors.Is(err, io.EOF) {
			err = errTrailerEOF
		}
		b.err = err
		return
	}
	// The fields end where textproto stopped (at the first blank line,
	// a bare LF one too). Bytes past it that were consumed already are
	// lost to the connection: it is not reused.
	if n := len(block) - br.Buffered() - had; n >= 0 {
		in.consume(n)
	} else {
		b.dirty = true
	}
	b.err = io.EOF
}

// chunkLine parses a chunk-size line as net/http does.
func (b *bodyReader) chunkLine(p []byte) {
	if idx := bytes.IndexByte(p, '\r'); idx == -1 {
		b.err = errChunkBareLF
		return
	} else if idx != len(p)-2 {
		b.err = errChunkCR
		return
	}
	p = p[:len(p)-2]
	lineLen := len(p)
	if len(p) >= maxChunkLine {
		b.err = errLineTooLong
		return
	}
	for len(p) > 0 && (p[len(p)-1] == ' ' || p[len(p)-1] == '\t') {
		p = p[:len(p)-1]
	}
	p, _, _ = bytes.Cut(p, []byte(";"))
	if len(p) == 0 {
		b.err = errChunkEmptyLength
		return
	}
	var n uint64
	for i, c := range p {
		v, ok := hexdigit.Value(c)
		if !ok {
			b.err = errChunkLengthByte
			return
		}
		if i == 16 {
			b.err = errChunkLengthTooBig
			return
		}
		n = n<<4 | uint64(v)
	}
	// net/http's guard against a sender of mostly framing, its very sums.
	b.excess += int64(lineLen) + 2
	b.excess -= 16 + (2 * int64(n))
	b.excess = max(b.excess, 0)
	if b.excess > 16*1024 {
		b.err = errExcess
		return
	}
	if n == 0 {
		b.state = chunkTrailer
		return
	}
	// A chunk longer than any connection carries reads to the end of it.
	b.left, b.state = int64(min(n, 1<<62)), chunkData
}

// Read reads body bytes into p.
func (b *bodyReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, b.err
	}
	if err := b.ready(); err != nil {
		return 0, err
	}
	in := b.in
	src := in.bytes()
	if b.mode != bodyClose && int64(len(src)) > b.left {
		src = src[:b.left]
	}
	n := copy(p, src)
	in.consume(n)
	if b.mode != bodyClose {
		b.left -= int64(n)
	}
	if b.mode == bodyChunked && b.left == 0 {
		b.state = chunkCRLF
		if in.buffered() >= 2 {
			b.frame() // the CRLF usually came with the data: let the buffer go
		}
	}
	return n, nil
}
