package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/tailgate-llm/tailgate/internal/seedfiles"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/sse"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// seedStreams is every stream body in testdata, as fuzz seeds.
func seedStreams(tb testing.TB) [][]byte { return seedfiles.Read(tb, "testdata", ".txt") }

// parseBody runs the stream reader over an in-memory body, as Do does
// once the response headers are in, keeping the text.
func parseBody(c *Client, r io.Reader) *loadgen.Record {
	rec := loadgen.NewRecord(time.Now())
	c.readStream(context.Background(), func() {}, r, rec, 0, true, "")
	rec.Finalize()
	return rec
}

// FuzzStream feeds arbitrary bodies through the stream reader and checks
// the invariants every record must keep, whatever the server sends.
func FuzzStream(f *testing.F) {
	for _, seed := range seedStreams(f) {
		f.Add(seed)
	}
	f.Add([]byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}],\"usage\":{\"completion_tokens\":3}}\n\n" +
		"data: {\"choices\":[{\"delta\":{\"reasoning\":\"b\"}}],\"usage\":{\"completion_tokens\":2}}\n\n" +
		"data: {\"choices\":[{\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n"))
	c, err := New(Config{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1"}})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) { checkStream(t, c, in) })
}

func checkStream(t *testing.T, c *Client, in []byte) {
	t.Helper()
	{
		rec := parseBody(c, bytes.NewReader(in))

		dataEvents := 0
		s := sse.NewScanner(bytes.NewReader(in))
		for s.Next() {
			if d := bytes.TrimSpace(s.Data()); len(d) > 0 {
				dataEvents++
				if !bytes.Equal(d, []byte("[DONE]")) {
					checkDecoders(t, d)
				}
			}
		}
		if len(rec.Chunks) > dataEvents {
			t.Fatalf("%d chunks from %d data events", len(rec.Chunks), dataEvents)
		}
		answerSeen := rec.FirstAnswer == 0
		var prev time.Duration
		for i, ch := range rec.Chunks {
			if ch.At < prev || ch.At > rec.End {
				t.Fatalf("chunk %d at %v: out of order (prev %v, End %v)", i, ch.At, prev, rec.End)
			}
			if ch.Tokens < 1 {
				t.Fatalf("chunk %d has %d tokens after Finalize", i, ch.Tokens)
			}
			if ch.At == rec.FirstAnswer {
				answerSeen = true
			}
			prev = ch.At
		}
		if !answerSeen {
			t.Fatalf("FirstAnswer %v is no chunk's instant", rec.FirstAnswer)
		}
		if rec.OutputTokens < 0 || rec.InputTokens < 0 {
			t.Fatalf("negative tokens: in %d out %d", rec.InputTokens, rec.OutputTokens)
		}
		switch rec.ErrorKind {
		case loadgen.ErrNone:
			if !bytes.Contains(in, []byte("[DONE]")) && rec.FinishReason == "" {
				t.Fatalf("OK without [DONE] or a finish reason")
			}
		case loadgen.ErrStreamError, loadgen.ErrContextLength, loadgen.ErrStreamTruncated, loadgen.ErrProtocol:
			if rec.Error == "" {
				t.Fatalf("%s without a message", rec.ErrorKind)
			}
		default:
			t.Fatalf("unexpected kind %q for an in-memory body", rec.ErrorKind)
		}
		if len(rec.Error) > 2*transport.MaxErrorMessage+200 {
			t.Fatalf("Error is %d bytes", len(rec.Error))
		}

		// Read one byte at a time, the record must be the same but for
		// its instants.
		one := parseBody(c, iotest.OneByteReader(bytes.NewReader(in)))
		if !sameRecord(rec, one) {
			t.Fatalf("one-byte reads changed the record:\n%+v\n%+v", rec, one)
		}
	}
}

func sameRecord(a, b *loadgen.Record) bool {
	tokens := func(r *loadgen.Record) []int {
		var out []int
		for _, c := range r.Chunks {
			out = append(out, c.Tokens)
		}
		return out
	}
	return a.ErrorKind == b.ErrorKind && a.Error == b.Error && a.FinishReason == b.FinishReason &&
		a.InputTokens == b.InputTokens && a.OutputTokens == b.OutputTokens && a.Text == b.Text &&
		a.TokenSource == b.TokenSource && a.ChunkTokenSource == b.ChunkTokenSource &&
		(a.FirstAnswer == 0) == (b.FirstAnswer == 0) && slices.Equal(tokens(a), tokens(b))
}

// vllmStream builds a vLLM-shaped chat stream of n one-token chunks.
func vllmStream(n int) []byte {
	var b bytes.Buffer
	const head = `data: {"id":"chatcmpl-8b2b91720edd4372b0579e89255b4828","object":"chat.completion.chunk","created":1772423572,"model":"qwen3_8b","choices":[{"index":0,"delta":`
	b.WriteString(head + `{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n")
	words := []string{" the", " quick", " brown", " fox", " jumps", " over", " lazy", " dog", ",", "\\n"}
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "%s{\"content\":\"%s\"},\"logprobs\":null,\"finish_reason\":null}]}\n\n", head, words[i%len(words)])
	}
	b.WriteString(head + `{},"logprobs":null,"finish_reason":"length"}]}` + "\n\n")
	fmt.Fprintf(&b, `data: {"id":"chatcmpl-8b2b91720edd4372b0579e89255b4828","object":"chat.completion.chunk","created":1772423572,"model":"qwen3_8b","choices":[],"usage":{"prompt_tokens":12,"total_tokens":%d,"completion_tokens":%d}}`+"\n\n", n+12, n)
	b.WriteString(done)
	return b.Bytes()
}

// BenchmarkParseStream measures the per-token cost of the read path:
// SSE framing, chunk decoding, the chunk record. One op is one stream.
func BenchmarkParseStream(b *testing.B) {
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("keepText=%v", keep), func(b *testing.B) {
			const tokens = 1000
			body := vllmStream(tokens)
			c, err := New(Config{Endpoint: transport.Endpoint{URL: "http://127.0.0.1:1"}})
			if err != nil {
				b.Fatal(err)
			}
			r := bytes.NewReader(body)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				r.Reset(body)
				rec := loadgen.NewRecord(time.Now())
				c.readStream(context.Background(), func() {}, r, rec, tokens, keep, "")
				if len(rec.Chunks) != tokens || rec.ErrorKind != loadgen.ErrNone {
					b.Fatalf("%d chunks, %s %s", len(rec.Chunks), rec.ErrorKind, rec.Error)
				}
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			total := float64(tokens) * float64(b.N)
			b.ReportMetric(total/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/total, "allocs/token")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/total, "ns/token")
		})
	}
}

// BenchmarkDoHTTP runs whole requests over loopback, 16 streams at once,
// server included: a floor for what the client sustains. "8KiB" writes
// the body in 8 KiB pieces; "per-event" flushes every event, as servers
// do, so each token costs a write and a read system call.
func BenchmarkDoHTTP(b *testing.B) {
	for _, client := range []string{transport.HTTPClientNetHTTP, transport.HTTPClientLean} {
		for _, tokens := range []int{1, 1000} {
			for _, mode := range []string{"8KiB", "per-event"} {
				if tokens == 1 && mode == "8KiB" {
					continue // the same as per-event
				}
				b.Run(fmt.Sprintf("%s/%dtok/%s", client, tokens, mode), func(b *testing.B) { benchDoHTTP(b, client, tokens, mode) })
			}
		}
	}
}

// benchDoHTTP: streams of tokens one-token events, written in 8 KiB
// pieces or one event per write, read by client.
func benchDoHTTP(b *testing.B, client string, tokens int, mode string) {
	full := vllmStream(tokens)
	{
		{
			var pieces [][]byte
			if mode == "per-event" {
				pieces = bytes.SplitAfter(full, []byte("\n\n"))
			} else {
				for body := full; len(body) > 0; {
					n := min(len(body), 8<<10)
					pieces, body = append(pieces, body[:n]), body[n:]
				}
			}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", "text/event-stream")
				for _, p := range pieces {
					_, _ = w.Write(p)
					w.(http.Flusher).Flush()
				}
			}))
			defer srv.Close()
			c, err := New(Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{HTTPClient: client}}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.CloseIdleConnections()
			b.ReportAllocs()
			var mu sync.Mutex
			var failed string
			b.SetParallelism(8) // × GOMAXPROCS goroutines
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					rec := loadgen.NewRecord(time.Now())
					c.Do(context.Background(), testPrompt, rec)
					if len(rec.Chunks) != tokens || !rec.OK() {
						mu.Lock()
						failed = fmt.Sprintf("%d chunks, %s %s", len(rec.Chunks), rec.ErrorKind, rec.Error)
						mu.Unlock()
					}
				}
			})
			b.StopTimer()
			if failed != "" {
				b.Fatal(failed)
			}
			b.ReportMetric(float64(tokens)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		}
	}
}

// typedChunk is what a client written the plain way would decode a chunk
// into with encoding/json: the baseline BenchmarkDecodeEvent reports the
// fast path against.
type typedChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string `json:"content"`
			Reasoning        *string `json:"reasoning"`
			ReasoningContent *string `json:"reasoning_content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// BenchmarkDecodeEvent decodes one vLLM content chunk three ways: the fast
// path (what the client uses), the encoding/json reference that judges it
// (generic maps), and a typed-struct encoding/json decode, the baseline a
// plain client would have. Report fast as a ratio of typed, measured in
// the same run.
func BenchmarkDecodeEvent(b *testing.B) {
	events := bytes.Split(vllmStream(1), []byte("\n\n"))
	data := bytes.TrimPrefix(events[1], []byte("data: "))
	var ev event
	var text []byte
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ev.reset()
			var err error
			if text, err = decodeEvent(data, &ev, text[:0], false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			ev.reset()
			var err error
			if text, err = decodeSlow(data, &ev, text[:0], false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typed", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			var c typedChunk
			if err := json.Unmarshal(data, &c); err != nil || len(c.Choices) != 1 {
				b.Fatal(err)
			}
		}
	})
}
