package openai

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/loopbacktest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// A streamed request on the lean client, kept-alive connection, costs the
// client seven allocations: the record and its chunks (the measurement,
// the test's own here), the answer's head (fastHead: the head's string,
// the answer with its values, the header map's two) and its body. The
// request, its body and the stream's state are pooled. The server here
// answers from one canned buffer, allocating nothing.
func TestLeanRequestAllocs(t *testing.T) {
	if raceOn {
		t.Skip("sync.Pool drops at random under the race detector")
	}
	stream := vllmStream(1)
	answer := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: "+
		strconv.Itoa(len(stream))+"\r\n\r\n"), stream...)
	addr := loopbacktest.Serve(t, func(conn net.Conn) { serveCanned(conn, answer) })
	c, err := New(Config{Model: "qwen3_8b", Endpoint: transport.Endpoint{URL: "http://" + addr,
		Transport: transport.Config{HTTPClient: transport.HTTPClientLean}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	epoch := time.Now()
	var failed *loadgen.Record
	allocs := testing.AllocsPerRun(200, func() {
		rec := loadgen.NewRecord(epoch)
		c.Do(context.Background(), testPrompt, rec)
		if len(rec.Chunks) != 1 || !rec.OK() || rec.ResponseModel != "qwen3_8b" {
			failed = rec
		}
	})
	if failed != nil {
		t.Fatalf("%d chunks, %s %s, model %q", len(failed.Chunks), failed.ErrorKind, failed.Error, failed.ResponseModel)
	}
	if allocs > 7 {
		t.Errorf("%.0f allocations per request, want at most 7", allocs)
	}
}

// serveCanned answers every request on conn (a Content-Length body) with
// answer, reading into one buffer.
func serveCanned(conn net.Conn, answer []byte) {
	defer conn.Close()
	buf := make([]byte, 64<<10)
	n := 0
	for {
		end := bytes.Index(buf[:n], []byte("\r\n\r\n"))
		if end >= 0 {
			length := 0
			if i := bytes.Index(buf[:end], []byte("Content-Length: ")); i >= 0 {
				for _, d := range buf[i+len("Content-Length: ") : end] {
					if d < '0' || d > '9' {
						break
					}
					length = length*10 + int(d-'0')
				}
			}
			if total := end + 4 + length; n >= total {
				if _, err := conn.Write(answer); err != nil {
					return
				}
				n = copy(buf, buf[total:n])
				continue
			}
		}
		if n == len(buf) {
			return
		}
		m, err := conn.Read(buf[n:])
		if err != nil {
			return
		}
		n += m
	}
}
