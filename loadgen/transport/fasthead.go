package transport

import (
	"bytes"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
)

// chunkedTE is the TransferEncoding of every chunked answer that
// fastHead parses: shared, read-only.
var chunkedTE = []string{"chunked"}

// fastHead parses the answer's head from in's buffered bytes when it is
// all there and of the plain kind every server sends on success: HTTP/1.1,
// a final status with a body, CRLF line ends, one field per name (names of
// letters, digits and '-'; values of printable ASCII and tabs), framed by
// one Content-Length or by "Transfer-Encoding: chunked", and no field that
// net/http's parser would act on further (Pragma, Trailer, a Connection
// other than keep-alive).
// What it returns is what http.ReadResponse returns for the same bytes,
// but in four allocations where net/http takes a dozen: the head as one
// string that the values are cut from, the map (two), the answer with the
// values' slice (headAnswer; a head of more fields than it holds takes a
// fifth for them). Anything else is nil, with nothing consumed: readHead then
// parses it with net/http, errors and all.
func fastHead(in *connReader, req *http.Request) *http.Response {
	if req.Method == http.MethodHead {
		return nil
	}
	p := in.bytes()
	end := bytes.Index(p, []byte("\r\n\r\n"))
	if end < 0 || end+4 > MaxResponseHeaderBytes {
		return nil
	}
	raw := p[:end+2] // each line with its CRLF
	// Status line: "HTTP/1.1 NNN[ reason]".
	nl := bytes.IndexByte(raw, '\n')
	if nl < 1 || raw[nl-1] != '\r' {
		return nil
	}
	status := raw[:nl-1]
	if len(status) < 12 || string(status[:9]) != "HTTP/1.1 " || (len(status) > 12 && status[12] != ' ') {
		return nil
	}
	code := 0
	for _, c := range status[9:12] {
		if c < '0' || c > '9' {
			return nil
		}
		code = code*10 + int(c-'0')
	}
	if code < 200 || code == http.StatusNoContent || code == http.StatusNotModified {
		return nil
	}
	if !printable(status[9:]) {
		return nil
	}
	fields := 0
	for _, c := range raw[nl+1:] {
		if c == '\n' {
			fields++
		}
	}
	head := string(raw) // the one copy: every string below is cut from it
	ha := &headAnswer{}
	resp := &ha.resp
	*resp = http.Response{
		Status: head[9 : nl-1], StatusCode: code,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        make(http.Header, fields),
		ContentLength: -1,
		Request:       req,
	}
	vals := ha.vals[:]
	if fields > len(vals) {
		vals = make([]string, fields)
	}
	length, chunked := false, false
	for i, rest := 0, head[nl+1:]; rest != ""; i++ {
		nl := indexByte(rest, '\n')
		if nl < 1 || rest[nl-1] != '\r' || nl > MaxResponseHeaderLineBytes {
			return nil // a bare LF: net/http's reading of it stands
		}
		line := rest[:nl-1]
		rest = rest[nl+1:]
		colon := indexByte(line, ':')
		if colon <= 0 || !token(line[:colon]) {
			return nil
		}
		value := trimSpaceTab(line[colon+1:])
		if !printable(value) {
			return nil
		}
		key := line[:colon]
		if strings.EqualFold(key, "Transfer-Encoding") {
			key = "Transfer-Encoding" // not among textproto's interned names
		} else {
			key = textproto.CanonicalMIMEHeaderKey(key)
		}
		if _, dup := resp.Header[key]; dup {
			return nil
		}
		switch key {
		case "Connection":
			if !strings.EqualFold(value, "keep-alive") {
				return nil // close, or a list: shouldClose's to read
			}
		case "Pragma", "Trailer":
			return nil
		case "Content-Length":
			n, err := strconv.ParseUint(value, 10, 63)
			if err != nil {
				return nil
			}
			resp.ContentLength, length = int64(n), true
		case "Transfer-Encoding":
			if value != "chunked" {
				return nil
			}
			chunked = true
			continue // net/http takes it out of the header
		}
		vals[i] = value
		resp.Header[key] = vals[i : i+1 : i+1]
	}
	if length == chunked { // neither (read to the close) or both
		return nil
	}
	switch {
	case chunked:
		resp.TransferEncoding = chunkedTE
		resp.Body = fastBody{}
	case resp.ContentLength == 0:
		resp.Body = http.NoBody
	default:
		resp.Body = fastBody{}
	}
	in.consume(end + 4)
	return resp
}

// headAnswer is fastHead's answer and its values in one allocation: a
// streamed answer's head has a handful of fields.
type headAnswer struct {
	resp http.Response
	vals [8]string
}

// fastBody stands for a body that RoundTrip reads with its own reader:
// never read.
type fastBody struct{}

func (fastBody) Read([]byte) (int, error) { panic("transport: fastBody read") }
func (fastBody) Close() error             { return nil }

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// token: a field name of letters, digits and '-' only.
func token(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// printable: visible ASCII, spaces and tabs.
func printable[S string | []byte](b S) bool {
	for i := 0; i < len(b); i++ {
		if c := b[i]; (c < ' ' && c != '\t') || c > '~' {
			return false
		}
	}
	return true
}

func trimSpaceTab(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
