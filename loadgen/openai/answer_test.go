package openai

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// runOne sends p once through a Runner, which settles the record as a run
// does (Finalize, then what the answer must carry).
func runOne(t *testing.T, c *Client, p *prompts.Prompt, acceptEmpty bool) *loadgen.Record {
	t.Helper()
	r, err := loadgen.NewRunner(c, &loadgen.Repeat{Prompt: *p}, loadgen.Options{Closed: true, Requests: 1,
		Stages: []loadgen.Stage{{Name: "main", Concurrency: 1, Duration: testTimeout}}, Timeout: testTimeout, AcceptEmpty: acceptEmpty})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 16)
	done := make(chan []*loadgen.Record)
	go func() {
		var recs []*loadgen.Record
		for rec := range out {
			recs = append(recs, rec)
		}
		done <- recs
	}()
	if _, err := r.Run(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	recs := <-done
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	return recs[0]
}

// An answer with no output token is empty_answer, streamed or not, unless
// the server says the model stopped at its EOS token (finish_reason stop
// and a usage count of at least one, as llama.cpp and Ollama send) or the
// run accepts empty answers.
func TestEmptyAnswers(t *testing.T) {
	const stopUsage = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}` + "\n\n" + "data: [DONE]\n\n"
	const lengthZero = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":0,"total_tokens":5}}` + "\n\n" + "data: [DONE]\n\n"
	const stopNoUsage = `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n" + "data: [DONE]\n\n"
	const overUsage = `data: {"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}` + "\n\n" +
		`data: {"choices":[{"index":0,"delta":{"content":" b"},"finish_reason":"length"}]}` + "\n\n" +
		`data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":9,"total_tokens":14}}` + "\n\n" + "data: [DONE]\n\n"
	cases := []struct {
		name        string
		stream      bool
		ctype, body string
		maxTokens   int
		accept      bool
		want        loadgen.ErrorKind
	}{
		{"non-streamed {}", false, "application/json", `{}`, 16, false, loadgen.ErrEmptyAnswer},
		{"streamed {} (stream ignored)", true, "application/json", `{}`, 16, false, loadgen.ErrEmptyAnswer},
		{"only [DONE]", true, "text/event-stream", "data: [DONE]\n\n", 16, false, loadgen.ErrEmptyAnswer},
		{"length, 0 completion tokens", true, "text/event-stream", lengthZero, 16, false, loadgen.ErrEmptyAnswer},
		{"stop without usage", true, "text/event-stream", stopNoUsage, 16, false, loadgen.ErrEmptyAnswer},
		{"stop at EOS, usage 1", true, "text/event-stream", stopUsage, 16, false, loadgen.ErrNone},
		{"stop at EOS, usage 1, max_tokens unset", true, "text/event-stream", stopUsage, 0, false, loadgen.ErrNone},
		{"non-streamed stop at EOS", false, "application/json",
			`{"choices":[{"index":0,"message":{"role":"assistant","content":""},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`, 16, false, loadgen.ErrNone},
		{"only [DONE], accepted", true, "text/event-stream", "data: [DONE]\n\n", 16, true, loadgen.ErrNone},
		{"non-streamed {}, accepted", false, "application/json", `{}`, 16, true, loadgen.ErrNone},
		{"9 tokens for max_tokens 2", true, "text/event-stream", overUsage, 2, false, loadgen.ErrOverGeneration},
		{"9 tokens for max_tokens 8 (one unstreamed EOS)", true, "text/event-stream", overUsage, 8, false, loadgen.ErrNone},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ctype)
				_, _ = io.WriteString(w, tc.body)
			}))
			defer srv.Close()
			c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", Stream: Bool(tc.stream), MaxTokens: tc.maxTokens})
			rec := runOne(t, c, testPrompt, tc.accept)
			if rec.ErrorKind != tc.want {
				t.Errorf("kind %q (%s), want %q; chunks %d, output tokens %d (%s), finish %q",
					rec.ErrorKind, rec.Error, tc.want, len(rec.Chunks), rec.OutputTokens, rec.TokenSource, rec.FinishReason)
			}
			if tc.want != loadgen.ErrNone && !tc.want.Counted() {
				t.Errorf("%s is not counted as a failure", tc.want)
			}
		})
	}
}

// A server that ignores max_tokens and streams without end: the client
// stops reading at the output bound and closes the connection, so the
// record is over_generation and holds no more than the bound's chunks.
func TestOverGenerationStopsReading(t *testing.T) {
	for _, hc := range []string{transport.HTTPClientLean, transport.HTTPClientNetHTTP} {
		t.Run(hc, func(t *testing.T) {
			var written atomic.Int64
			gone := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(gone)
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				chunk := []byte(`data: {"choices":[{"index":0,"delta":{"content":" tok"},"finish_reason":null}]}` + "\n\n")
				for {
					if _, err := w.Write(chunk); err != nil {
						return // the client closed the connection
					}
					w.(http.Flusher).Flush()
					written.Add(1)
				}
			}))
			defer srv.Close()
			const maxTokens = 8
			cfg := Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: maxTokens}
			cfg.Transport.HTTPClient = hc
			c := newClient(t, cfg)
			rec := runOne(t, c, testPrompt, false)
			if rec.ErrorKind != loadgen.ErrOverGeneration || !strings.Contains(rec.Error, "max_tokens 8") {
				t.Fatalf("kind %q (%s), want over_generation", rec.ErrorKind, rec.Error)
			}
			if b := loadgen.OutputBound(maxTokens); len(rec.Chunks) != b+1 {
				t.Errorf("%d chunks kept, want the bound %d and the one past it", len(rec.Chunks), b)
			}
			select {
			case <-gone:
			case <-time.After(testTimeout):
				t.Fatalf("the server was still writing after %d chunks: the client did not close the connection", written.Load())
			}
		})
	}
}

func TestOutputBound(t *testing.T) {
	for _, tc := range []struct{ max, want int }{{0, 0}, {1, 65}, {8, 72}, {128, 512}} {
		if got := loadgen.OutputBound(tc.max); got != tc.want {
			t.Errorf("OutputBound(%d) = %d, want %d", tc.max, got, tc.want)
		}
	}
}

// A 50 MB response header fails the request as protocol on both HTTP
// clients, having read no more than the 1 MB limit of it; the lean client
// stops at the line bound, far sooner.
func TestHugeResponseHeader(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) {
		defer conn.Close()
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Big: "); err != nil {
			return
		}
		block := bytes.Repeat([]byte("a"), 64<<10)
		for sent := 0; sent < 50<<20; sent += len(block) {
			if _, err := conn.Write(block); err != nil {
				return
			}
		}
		_, _ = io.WriteString(conn, "\r\n\r\ndata: [DONE]\n\n")
	})
	for _, hc := range []string{transport.HTTPClientLean, transport.HTTPClientNetHTTP} {
		t.Run(hc, func(t *testing.T) {
			cfg := Config{Endpoint: transport.Endpoint{URL: url}, Model: "m", MaxTokens: 8}
			cfg.Transport.HTTPClient = hc
			c := newClient(t, cfg)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			rec := runOne(t, c, testPrompt, false)
			runtime.ReadMemStats(&after)
			words, bound := "headers exceeded", uint64(16<<20)
			if hc == transport.HTTPClientLean {
				words, bound = "header line exceeded", 1<<20 // the whole head would cost twice the head limit
			}
			if rec.ErrorKind != loadgen.ErrProtocol || !strings.Contains(rec.Error, words) {
				t.Errorf("kind %q (%s), want protocol: %s", rec.ErrorKind, rec.Error, words)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > bound {
				t.Errorf("%d KiB allocated reading the head, want at most %d", got>>10, bound>>10)
			}
		})
	}
}

// A header line just under the lean client's line bound, in a head under
// the head limit, is an answer like any other.
func TestLongHeaderLineUnderBound(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) {
		defer conn.Close()
		ev := `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n"
		long := strings.Repeat("a", transport.MaxResponseHeaderLineBytes-64)
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Long: %s\r\nContent-Length: %d\r\n\r\n%s", long, len(ev), ev)
	})
	for _, hc := range []string{transport.HTTPClientLean, transport.HTTPClientNetHTTP} {
		t.Run(hc, func(t *testing.T) {
			cfg := Config{Endpoint: transport.Endpoint{URL: url}, Model: "m", MaxTokens: 8}
			cfg.Transport.HTTPClient = hc
			rec := runOne(t, newClient(t, cfg), testPrompt, false)
			if !rec.OK() || rec.OutputTokens != 1 {
				t.Errorf("kind %q (%s), %d tokens: want ok with 1", rec.ErrorKind, rec.Error, rec.OutputTokens)
			}
		})
	}
}

// A chunk size that is not hex is the server's broken framing: protocol,
// not a truncated stream, on both clients.
func TestBogusChunkSize(t *testing.T) {
	url := rawServer(t, func(conn net.Conn) {
		defer conn.Close()
		ev := `data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}` + "\n\n"
		_, _ = fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\nzz\r\n%s\r\n0\r\n\r\n", len(ev), ev, ev)
	})
	for _, hc := range []string{transport.HTTPClientLean, transport.HTTPClientNetHTTP} {
		t.Run(hc, func(t *testing.T) {
			cfg := Config{Endpoint: transport.Endpoint{URL: url}, Model: "m", MaxTokens: 8}
			cfg.Transport.HTTPClient = hc
			rec := runOne(t, newClient(t, cfg), testPrompt, false)
			if rec.ErrorKind != loadgen.ErrProtocol || !strings.Contains(rec.Error, "chunk length") {
				t.Errorf("kind %q (%s), want protocol: a bad chunk length", rec.ErrorKind, rec.Error)
			}
		})
	}
}
