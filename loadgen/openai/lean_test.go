package openai

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/loopbacktest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
)

// The lean HTTP client is held to net/http's as decodeEvent is held to
// encoding/json: over the same answers, the same records (error kinds and
// texts, chunk and token counts, usage, finish reason), instants aside.

// pairOf builds a net/http and a lean client with the same configuration.
func pairOf(t testing.TB, cfg Config) (ref, lean *Client) {
	t.Helper()
	cfg.Transport.HTTPClient = transport.HTTPClientNetHTTP
	ref, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Transport.HTTPClient = transport.HTTPClientLean
	if lean, err = New(cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.CloseIdleConnections(); lean.CloseIdleConnections() })
	return ref, lean
}

// agree runs p through both clients (twice each, so the second request
// finds a kept-alive connection where the first left one) and fails on any
// difference but the instants.
func agree(t testing.TB, ref, lean *Client, p *prompts.Prompt, timeout time.Duration, what string) *loadgen.Record {
	t.Helper()
	run := func(c *Client) *loadgen.Record {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		rec := loadgen.NewRecord(time.Now())
		rec.Seq = 7
		c.Do(ctx, p, rec)
		rec.Finalize()
		return rec
	}
	var first *loadgen.Record
	for i := range 2 {
		a, b := run(ref), run(lean)
		// A connection's error names its own local port.
		a.Error = localPort.ReplaceAllString(a.Error, "->")
		b.Error = localPort.ReplaceAllString(b.Error, "->")
		a.Error = created.ReplaceAllString(a.Error, `created":`)
		b.Error = created.ReplaceAllString(b.Error, `created":`)
		if !sameRecord(a, b) || len(a.Chunks) != len(b.Chunks) || a.Status != b.Status || a.Unstreamed != b.Unstreamed {
			t.Fatalf("%s, request %d: net/http and lean differ:\nnet/http %s %q status %d chunks %d out %d\nlean     %s %q status %d chunks %d out %d",
				what, i+1, a.ErrorKind, a.Error, a.Status, len(a.Chunks), a.OutputTokens,
				b.ErrorKind, b.Error, b.Status, len(b.Chunks), b.OutputTokens)
		}
		if first == nil {
			first = a
		}
	}
	return first
}

var localPort = regexp.MustCompile(`:[0-9]+->`)

// created is a chunk's "created" field quoted in an error: the clock's
// second, which two requests may straddle.
var created = regexp.MustCompile(`created\\*":[0-9]+`)

// framings serve one SSE body the ways a server can frame it.
var framings = []struct {
	name  string
	serve func(w net.Conn, body []byte)
}{
	{"chunked per event", func(w net.Conn, body []byte) {
		bw := bufio.NewWriter(w)
		bw.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			if len(ev) == 0 {
				continue
			}
			fmt.Fprintf(bw, "%x\r\n%s\r\n", len(ev), ev)
			bw.Flush()
		}
		bw.WriteString("0\r\n\r\n")
		bw.Flush()
	}},
	{"content-length", func(w net.Conn, body []byte) {
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}},
	{"close-delimited", func(w net.Conn, body []byte) {
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n%s", body)
		w.Close()
	}},
	{"chunked, cut mid-body", func(w net.Conn, body []byte) {
		half := body[:len(body)/2]
		fmt.Fprintf(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(half), half)
		w.Close()
	}},
}

// rawServer answers every request on a connection with serve, until serve
// closes it.
func rawServer(t testing.TB, serve func(net.Conn)) string {
	t.Helper()
	return "http://" + loopbacktest.Serve(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			_, _ = io.Copy(io.Discard, req.Body)
			serve(c)
		}
	})
}

func checkAgree(t testing.TB, body []byte) {
	for _, f := range framings {
		url := rawServer(t, func(c net.Conn) { f.serve(c, body) })
		ref, lean := pairOf(t, Config{Endpoint: transport.Endpoint{URL: url}})
		agree(t, ref, lean, sessionPrompt, testTimeout, f.name)
	}
}

// TestLeanAgreesOnVectors: every captured and constructed stream, each
// with and without its terminator, in every framing.
func TestLeanAgreesOnVectors(t *testing.T) {
	for i, s := range seedStreams(t) {
		for _, body := range [][]byte{s, append(bytes.Clone(s), done...)} {
			t.Run(strconv.Itoa(i), func(t *testing.T) { checkAgree(t, body) })
		}
	}
}

// FuzzLeanAgrees: arbitrary bodies, chunked per event and cut, read
// alike by both clients.
func FuzzLeanAgrees(f *testing.F) {
	for _, seed := range seedStreams(f) {
		f.Add(seed)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) { checkAgree(t, in) })
}

// TestLeanAgreesOnSimFaults: the simulator's faults, each through both
// clients.
func TestLeanAgreesOnSimFaults(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Mode = sim.ModeFixed
	cfg.FixedTTFT, cfg.FixedITL = 0, time.Millisecond
	cfg.TruthLimit = -1
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	p := &prompts.Prompt{ID: "f", Messages: testPrompt.Messages, MaxTokens: 8}
	for _, tc := range []struct {
		fault   string
		kind    loadgen.ErrorKind
		timeout time.Duration
	}{
		{"none", loadgen.ErrNone, testTimeout},
		{"stall=20ms", loadgen.ErrNone, testTimeout},
		{"stall_mid=20ms", loadgen.ErrNone, testTimeout},
		{"http_429", loadgen.ErrRateLimited, testTimeout},
		{"http_503", loadgen.ErrServer, testTimeout},
		{"truncate", loadgen.ErrStreamTruncated, testTimeout},
		{"malformed", loadgen.ErrProtocol, testTimeout},
		{"error_in_stream", loadgen.ErrStreamError, testTimeout},
		{"ignore_stream", loadgen.ErrNone, testTimeout},
		{"html_200", loadgen.ErrProtocol, testTimeout},
		{"hang", loadgen.ErrTimeout, 200 * time.Millisecond},
	} {
		t.Run(tc.fault, func(t *testing.T) {
			ref, lean := pairOf(t, Config{Endpoint: transport.Endpoint{URL: hs.URL, Transport: transport.Config{Headers: []string{"X-Sim-Fault: " + tc.fault}}}})
			rec := agree(t, ref, lean, p, tc.timeout, tc.fault)
			if rec.ErrorKind != tc.kind {
				t.Errorf("%s: kind %q (%s), want %q", tc.fault, rec.ErrorKind, rec.Error, tc.kind)
			}
		})
	}
}

// An unknown --http-client is refused when the client is built.
func TestHTTPClientUnknown(t *testing.T) {
	if _, err := New(Config{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1", Transport: transport.Config{HTTPClient: "fast"}}}); err == nil {
		t.Error("HTTPClient \"fast\" accepted")
	}
}

// splitFramings serve an SSE body in pieces that end inside events and
// inside the chunk framing, with pauses between, so the lean client meets
// them in separate reads and waits: an event whose bytes come in two reads
// reads as one, and a cut or reset that comes with the last bytes reads as
// a cut at once (a reader that took a short read for "nothing more to
// come" waited for it to its deadline).
var splitFramings = []struct {
	name  string
	serve func(w net.Conn, body []byte)
}{
	{"events split in two", func(w net.Conn, body []byte) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			if len(ev) == 0 {
				continue
			}
			k := 1 + i*37%max(len(ev)-1, 1)
			for _, part := range [][]byte{ev[:min(k, len(ev))], ev[min(k, len(ev)):]} {
				if len(part) > 0 {
					fmt.Fprintf(w, "%x\r\n%s\r\n", len(part), part)
					// The reader has time to take the first part alone.
					time.Sleep(time.Millisecond)
				}
			}
		}
		io.WriteString(w, "0\r\n\r\n")
	}},
	{"framing in small writes", func(w net.Conn, body []byte) {
		var b bytes.Buffer
		b.WriteString("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			if len(ev) > 0 {
				fmt.Fprintf(&b, "%x\r\n%s\r\n", len(ev), ev)
			}
		}
		b.WriteString("0\r\n\r\n")
		for n := 1; b.Len() > 0; n = n%13 + 1 {
			w.Write(b.Next(n))
		}
	}},
	{"bad framing after the first events", func(w net.Conn, body []byte) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i, ev := range bytes.SplitAfterN(body, []byte("\n\n"), 3) {
			if i == 2 {
				io.WriteString(w, "zz\r\n") // not a chunk size
				break
			}
			fmt.Fprintf(w, "%x\r\n%s\r\n", len(ev), ev)
			time.Sleep(time.Millisecond)
		}
		w.Close()
	}},
	{"cut after a pause, with the last bytes", func(w net.Conn, body []byte) {
		// The client waits for more; then the rest of an event and the
		// close come together, in one wake-up of its poller: the close
		// must read as the cut it is, at once, not as a wait to the
		// deadline (a read that took the last bytes did not see it).
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		evs := bytes.SplitAfter(body, []byte("\n\n"))
		for i, ev := range evs {
			if len(ev) == 0 {
				continue
			}
			if i < len(evs)/2 || len(ev) < 2 {
				fmt.Fprintf(w, "%x\r\n%s\r\n", len(ev), ev)
				time.Sleep(time.Millisecond)
				continue
			}
			fmt.Fprintf(w, "%x\r\n%s", len(ev), ev[:len(ev)/2]) // half an event, then the close
			break
		}
		w.Close()
	}},
	{"reset after the first events", func(w net.Conn, body []byte) {
		io.WriteString(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
		for i, ev := range bytes.SplitAfterN(body, []byte("\n\n"), 3) {
			if i == 2 {
				break
			}
			fmt.Fprintf(w, "%x\r\n%s\r\n", len(ev), ev)
			time.Sleep(time.Millisecond)
		}
		w.(*net.TCPConn).SetLinger(0) // close with a reset
		w.Close()
	}},
}

// TestLeanAgreesSplit: every seed stream, as sent and with CRLF line ends,
// in pieces.
func TestLeanAgreesSplit(t *testing.T) {
	for i, s := range seedStreams(t) {
		for j, body := range [][]byte{s, bytes.ReplaceAll(s, []byte("\n"), []byte("\r\n"))} {
			for _, f := range splitFramings {
				t.Run(fmt.Sprintf("%d/%d/%s", i, j, f.name), func(t *testing.T) {
					url := rawServer(t, func(c net.Conn) { f.serve(c, body) })
					ref, lean := pairOf(t, Config{Endpoint: transport.Endpoint{URL: url}})
					agree(t, ref, lean, sessionPrompt, testTimeout, f.name)
				})
			}
		}
	}
}

// The simulator's refusal for length, in vLLM's words, is context_length
// through both clients, with the server's words in the record.
func TestSimContextLength(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Mode = sim.ModeBatch
	cfg.KVTokens = 32
	cfg.TruthLimit = -1
	srv, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close() })
	ref, lean := pairOf(t, Config{Endpoint: transport.Endpoint{URL: hs.URL}})
	p := &prompts.Prompt{ID: "long", Messages: testPrompt.Messages, MaxTokens: 64}
	rec := agree(t, ref, lean, p, testTimeout, "context")
	if rec.ErrorKind != loadgen.ErrContextLength || rec.Status != 400 || !strings.Contains(rec.Error, "maximum context length is 32 tokens") {
		t.Fatalf("kind %q status %d (%s), want context_length 400 with the server's words", rec.ErrorKind, rec.Status, rec.Error)
	}
}
