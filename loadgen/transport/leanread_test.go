package transport

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/loopbacktest"
)

// noProxy keeps a test off http.ProxyFromEnvironment, which reads the
// environment once per process (TestTransportConfig sets it).
func noProxy(*http.Request) (*url.URL, error) { return nil, nil }

// leanClient is a lean client off the environment's proxy, its idle
// connections closed when the test ends.
func leanClient(t *testing.T) *Client {
	t.Helper()
	cl, err := Config{HTTPClient: HTTPClientLean, Proxy: noProxy}.NewClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// pieceConn is a connection whose reads return at most size bytes of in:
// the network's way of cutting a stream anywhere.
type pieceConn struct {
	net.Conn // nil: only Read and Close are used
	in       []byte
	size     int
}

func (c *pieceConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.in[:min(c.size, len(c.in))])
	c.in = c.in[n:]
	return n, nil
}

// leanRead reads an answer as the lean client does: the head through
// readHead, the body through bodyReader, over reads of size bytes. held
// counts the reads that found the connection still holding a buffer when
// it had to wait for more bytes.
func leanRead(wire []byte, size int) (body []byte, held int, err error) {
	in := &connReader{conn: &pieceConn{in: wire, size: size}}
	if err := in.fill(); err != nil {
		return nil, 0, err
	}
	resp, err := readHead(in, &http.Request{Method: http.MethodPost})
	if err != nil {
		return nil, 0, err
	}
	var b bodyReader
	if !b.init(in, resp) {
		return nil, 0, nil
	}
	buf := make([]byte, 7)
	for {
		if err := b.ready(); err != nil && !errors.Is(err, io.EOF) {
			return body, held, err
		}
		n, err := b.Read(buf)
		body = append(body, buf[:n]...)
		if errors.Is(err, io.EOF) {
			return body, held, nil
		}
		if err != nil {
			return body, held, err
		}
		if in.buffered() == 0 && in.buf != nil {
			held++
		}
	}
}

// netHTTPRead is net/http's reading of the same answer.
func netHTTPRead(wire []byte) ([]byte, error) {
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(wire)), &http.Request{Method: http.MethodPost})
	if err != nil {
		return nil, err
	}
	return io.ReadAll(resp.Body)
}

var framingHeads = []string{
	"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	"HTTP/1.1 200 OK\r\nContent-Length: 40\r\n\r\n",
	"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n",
}

// checkBodyAgrees holds bodyReader to net/http's body reader on one body
// after each head, read in pieces of every size: the same bytes, the same
// error text, and no buffer held once its bytes are read.
func checkBodyAgrees(t *testing.T, body []byte) {
	t.Helper()
	for _, head := range framingHeads {
		wire := append([]byte(head), body...)
		want, wantErr := netHTTPRead(wire)
		for _, size := range []int{1, 2, 3, 5, 16, 4096} {
			got, held, err := leanRead(wire, size)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !bytes.Equal(got, want) {
				t.Fatalf("%q%q in pieces of %d:\nlean     %q, %v\nnet/http %q, %v", head, body, size, got, err, want, wantErr)
			}
			if held > 0 {
				t.Fatalf("%q%q in pieces of %d: a buffer held with nothing in it, %d times", head, body, size, held)
			}
		}
	}
}

var bodyVectors = []string{
	"5\r\nhello\r\n0\r\n\r\n",
	"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
	"5;ext=1\r\nhello\r\n0\r\n\r\n",
	"5 \t\r\nhello\r\n0\r\n\r\n",
	"A\r\n0123456789\r\n0\r\n\r\n",
	"5\r\nhello\r\n0\r\nX-Trailer: t\r\n\r\n",
	"5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
	"5\r\nhello\r\n0\r\n",
	"5\r\nhello\r\n0\r\nX: y\r\n",
	"5\r\nhello\r\n0\r\n\n",
	"5\r\nhello\r\n0\r\nA: b\n\nX\r\n\r\n",
	"5\r\nhel",
	"5\r\nhello",
	"5\r\nhelloXY",
	"5\nhello\r\n",
	"5\r\r\nhello\r\n",
	"\r\nhello\r\n",
	"z\r\nhello\r\n",
	"10000000000000000\r\n",
	"ffffffffffffffff\r\nabc",
	"",
	"data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\n",
	strings.Repeat("1\r\na\r\n", 5000) + "0\r\n\r\n",
}

func TestBodyReaderAgreesWithNetHTTP(t *testing.T) {
	for _, v := range bodyVectors {
		checkBodyAgrees(t, []byte(v))
	}
}

func FuzzBodyReader(f *testing.F) {
	for _, v := range bodyVectors {
		f.Add([]byte(v))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkBodyAgrees(t, body) })
}

// Over a real connection, a body waits for its next chunk holding no
// buffer, and reads the chunk when it comes.
func TestLeanBodyWaitsWithoutBuffer(t *testing.T) {
	next := make(chan string)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.(http.Flusher).Flush() // the head, before any event
		for ev := range next {
			io.WriteString(w, ev)
			w.(http.Flusher).Flush()
		}
	}))
	defer srv.Close()
	cl := leanClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := cl.NewRequest(ctx, http.MethodPost, srv.URL, strings.NewReader("{}"))
	resp, _, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := resp.Body.(*leanBody)
	if body.c.in.raw == nil {
		t.Fatal("no raw reads on a plain TCP connection")
	}
	for i := range 3 {
		ev := fmt.Sprintf("data: %d\n\n", i)
		next <- ev
		if err := body.WaitRead(); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 64)
		n, err := body.Read(got)
		if err != nil || string(got[:n]) != ev {
			t.Fatalf("event %d: %q, %v", i, got[:n], err)
		}
		// The chunk's CRLF came with it: nothing is left, and no buffer.
		if body.c.in.buf != nil {
			t.Fatalf("event %d: the connection holds a buffer of %d bytes, %d unread", i, len(*body.c.in.buf), body.c.in.buffered())
		}
	}
	close(next)
	if b, err := io.ReadAll(resp.Body); err != nil || len(b) != 0 {
		t.Fatalf("end: %q, %v", b, err)
	}
}

// An answer that redirects is followed, as http.Client follows it.
func TestLeanFollowsRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/a", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/b", http.StatusTemporaryRedirect) })
	mux.HandleFunc("/b", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s", r.Method, b)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	cl := leanClient(t)
	req, _ := cl.NewRequest(context.Background(), http.MethodPost, srv.URL+"/a", strings.NewReader("body"))
	resp, _, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "POST body" {
		t.Fatalf("%d %q, want 200 \"POST body\"", resp.StatusCode, b)
	}
}

// A body's read deadline (openai's bound on the drain after [DONE]) is
// cleared before its connection goes back to the pool: the next request
// on it reads as usual.
func TestLeanDeadlineClearedForReuse(t *testing.T) {
	var conns atomic.Int32
	addr := loopbacktest.Serve(t, func(c net.Conn) {
		conns.Add(1)
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			// Head and body in one write: the body is read with the head.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	})
	cl := leanClient(t)
	for i := range 2 {
		req, _ := cl.NewRequest(context.Background(), http.MethodPost, "http://"+addr, strings.NewReader("{}"))
		resp, _, err := cl.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		// A deadline already past: only a read that needs the network fails.
		if err := resp.Body.(*leanBody).SetReadDeadline(time.Now().Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || string(b) != "ok" {
			t.Fatalf("request %d: %q, %v", i+1, b, err)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("%d connections for two requests, want 1 (reused)", n)
	}
}

// A read that fills its buffer is followed by reads into big ones (an
// answer that comes faster than it is read takes fewer system calls); a
// read that does not fill one goes back to small buffers (a stream
// between tokens holds little).
func TestConnReaderBufferSize(t *testing.T) {
	wire := bytes.Repeat([]byte("x"), 100<<10)
	pc := &pieceConn{in: wire, size: len(wire)}
	in := &connReader{conn: pc}
	var sizes []int
	var got int
	read := func() {
		t.Helper()
		if err := in.fill(); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, cap(*in.buf))
		got += in.buffered()
		in.consume(in.buffered())
		if in.buf != nil {
			t.Fatal("a consumed buffer was kept")
		}
	}
	read()
	read()
	pc.size = 200 // now a few bytes at a time
	read()
	read()
	want := []int{leanReadBufferBytes, leanBigReadBufferBytes, leanBigReadBufferBytes, leanReadBufferBytes}
	if fmt.Sprint(sizes) != fmt.Sprint(want) {
		t.Errorf("buffer sizes %v, want %v", sizes, want)
	}
	if want := leanReadBufferBytes + leanBigReadBufferBytes + 400; got != want {
		t.Errorf("read %d bytes, want %d", got, want)
	}
}
