package transport

import (
	"bufio"
	"bytes"
	"net/http"
	"reflect"
	"testing"
)

// heads are answer heads of every kind, each followed by body bytes that
// must stay unread.
var heads = []string{
	// What the fast path takes: vLLM's (uvicorn's lower-case names), SGLang's, net/http's.
	"HTTP/1.1 200 OK\r\ndate: Mon, 07 Dec 2026 11:00:00 GMT\r\nserver: uvicorn\r\ncontent-type: text/event-stream; charset=utf-8\r\ntransfer-encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 7\r\nConnection: keep-alive\r\nX-Empty:\r\n\r\n",
	"HTTP/1.1 200\r\nContent-Length:   12  \r\nX-A:\tv w\t\r\n\r\n",
	"HTTP/1.1 429 Too Many Requests\r\nretry-after: 1\r\nx-request-id: abc-1\r\nContent-Length: 2\r\n\r\n",
	// Exactly as many fields as headAnswer holds, and more.
	"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\nE: 5\r\nF: 6\r\nG: 7\r\nH: 8\r\nI: 9\r\ntransfer-encoding: chunked\r\nZ: 10\r\n\r\n",
	// What it leaves to net/http.
	"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n",
	"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 204 No Content\r\n\r\n",
	"HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\nX: y\r\n\r\n",
	"HTTP/1.1 200 OK\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n folded\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: -5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: \r\n\r\n",
	"HTTP/1.1 200 OK\r\nPragma: no-cache\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nTrailer: X\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX_Under: 1\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nX: caf\xc3\xa9\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 2x0 OK\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200OK\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\n: v\r\nContent-Length: 5\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
}

// fastHead takes the plain heads, and what it makes of one is exactly
// what http.ReadResponse makes of it, leaving the same bytes unread; the
// rest it leaves, consuming nothing.
func TestFastHeadAgreesWithNetHTTP(t *testing.T) {
	took := 0
	for i, h := range heads {
		if checkFastHead(t, []byte(h+"body!"), http.MethodPost) {
			took++
			if i >= 8 {
				t.Errorf("head %d taken: %q", i, h)
			}
		} else if i < 8 {
			t.Errorf("head %d left to net/http: %q", i, h)
		}
	}
	if checkFastHead(t, []byte(heads[1]+"body!"), http.MethodHead) {
		t.Error("an answer to HEAD taken")
	}
	if took != 8 {
		t.Errorf("took %d heads, want 8", took)
	}
}

func FuzzFastHead(f *testing.F) {
	for _, h := range heads {
		f.Add([]byte(h + "body!"))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastHead(t, b, http.MethodPost) })
}

// checkFastHead runs fastHead over b and, where it takes the head,
// compares its answer with net/http's; it says whether it took it.
func checkFastHead(t *testing.T, b []byte, method string) bool {
	t.Helper()
	req, _ := http.NewRequest(method, "http://x/", nil)
	buf := append([]byte(nil), b...)
	in := &connReader{buf: &buf, w: len(buf)}
	got := fastHead(in, req)
	if got == nil {
		if in.buffered() != len(b) {
			t.Errorf("%q: left to net/http with %d bytes consumed", b, len(b)-in.buffered())
		}
		return false
	}
	br := bufio.NewReader(bytes.NewReader(b))
	want, err := http.ReadResponse(br, req)
	if err != nil {
		t.Errorf("%q: taken, but net/http says %v", b, err)
		return true
	}
	if got.Status != want.Status || got.StatusCode != want.StatusCode || got.Proto != want.Proto ||
		got.ProtoMajor != want.ProtoMajor || got.ProtoMinor != want.ProtoMinor ||
		!reflect.DeepEqual(got.Header, want.Header) || got.ContentLength != want.ContentLength ||
		!reflect.DeepEqual(got.TransferEncoding, want.TransferEncoding) || got.Close != want.Close ||
		!reflect.DeepEqual(got.Trailer, want.Trailer) || got.Uncompressed != want.Uncompressed ||
		(got.Body == http.NoBody) != (want.Body == http.NoBody) {
		t.Errorf("%q:\n got %+v\nwant %+v", b, got, want)
	}
	// What net/http's reader holds past the head is what fastHead left.
	rest, _ := br.Peek(br.Buffered())
	if unread := in.bytes(); !bytes.Equal(unread, rest) {
		t.Errorf("%q: left %q unread, net/http %q", b, unread, rest)
	}
	return true
}

// The head of a streamed answer from uvicorn (lower-case names) costs the
// four allocations fastHead is for.
func TestFastHeadAllocs(t *testing.T) {
	req, _ := http.NewRequest(http.MethodPost, "http://x/", nil)
	head := []byte(heads[0])
	buf := make([]byte, len(head))
	allocs := testing.AllocsPerRun(100, func() {
		copy(buf, head)
		in := &connReader{buf: &buf, w: len(buf)}
		if fastHead(in, req) == nil {
			t.Fatal("not taken")
		}
	})
	if allocs > 4 {
		t.Errorf("%.0f allocations, want at most 4", allocs)
	}
}
