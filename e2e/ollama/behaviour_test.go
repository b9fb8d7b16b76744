package ollama

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/ollamatest"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// TestOllamaEOS: TinyEOS stops some answers early at the end-of-sequence
// token, which Ollama counts in eval_count (and /v1's completion_tokens)
// but never streams. Such a record keeps the server's count (TPOT counts
// the EOS decode step) and gives its chunks only the streamed tokens.
func TestOllamaEOS(t *testing.T) {
	s := start(t, ollamatest.Options{NumParallel: 4})
	const tokens = 12
	for _, api := range []string{"ollama-chat", "openai-chat"} {
		t.Run(api, func(t *testing.T) {
			// About half stop early: all or none of 16 is under 1e-4.
			recs := load(t, s, api, ollamatest.TinyEOS, true, tokens,
				loadgen.Options{Stages: []loadgen.Stage{{Name: "c", Concurrency: 4, Duration: time.Minute}}, Closed: true, Requests: 16})
			stops := 0
			for _, r := range recs {
				if r.ErrorKind != loadgen.ErrNone {
					t.Fatalf("request %d: %s %s", r.Seq, r.ErrorKind, r.Error)
				}
				streamed := 0
				for _, c := range r.Chunks {
					streamed += c.Tokens
				}
				switch r.FinishReason {
				case "length":
					if r.OutputTokens != tokens || len(r.Chunks) != tokens || streamed != tokens {
						t.Errorf("request %d (length): %d tokens, %d chunks carrying %d", r.Seq, r.OutputTokens, len(r.Chunks), streamed)
					}
				case "stop":
					stops++
					if r.OutputTokens != len(r.Chunks)+1 || streamed != len(r.Chunks) {
						t.Errorf("request %d (stop): %d tokens, %d chunks carrying %d: want chunks + 1 (the EOS) and one a chunk",
							r.Seq, r.OutputTokens, len(r.Chunks), streamed)
					}
				default:
					t.Errorf("request %d: finish %q", r.Seq, r.FinishReason)
				}
			}
			if stops == 0 || stops == len(recs) {
				t.Errorf("%d of %d answers stopped early: the EOS model should stop some, not all", stops, len(recs))
			}
			t.Logf("%d of %d stopped at EOS", stops, len(recs))
		})
	}
}

// TestOllamaRunnerKilled: the runner process is killed (SIGKILL) while
// it streams. The request it was streaming fails as stream_error, in the
// server's words; the run goes on and later requests succeed once Ollama
// has started a new runner.
func TestOllamaRunnerKilled(t *testing.T) {
	s := start(t, ollamatest.Options{NumParallel: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var killed atomic.Bool
	var killedSeq atomic.Int64
	// Kill the runner at the third chunk of the second request, seen by a
	// proxy between client and server as it forwards the stream, so the
	// kill is mid-stream for certain and nothing reads the client's record
	// while it is written.
	var chats atomic.Int64
	upstream, _ := url.Parse(s.URL)
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	proxy.FlushInterval = -1 // every line at once, as Ollama sends it
	proxy.ModifyResponse = func(resp *http.Response) error {
		if resp.Request.URL.Path == "/api/chat" && chats.Add(1) == 2 {
			resp.Body = &killAfterLines{ReadCloser: resp.Body, lines: 3, kill: func() {
				pid := s.Runner(ollamatest.Tiny)
				if pid == 0 {
					t.Errorf("no runner for %s", ollamatest.Tiny)
					return
				}
				syscall.Kill(pid, syscall.SIGKILL)
				killedSeq.Store(1) // the second request of the closed loop
				killed.Store(true)
			}}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	defer front.Close()
	c, _, err := protocol.Open(ctx, protocol.Target{Endpoint: transport.Endpoint{URL: front.URL}, API: "ollama-chat", Model: ollamatest.Tiny, Stream: true, MaxTokens: 48})
	if err != nil {
		t.Fatal(err)
	}
	client := loadgen.ClientFunc(c.Do)
	r, err := loadgen.NewRunner(client, &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: prompt}},
		loadgen.Options{Stages: []loadgen.Stage{{Name: "c", Concurrency: 1, Duration: time.Minute}}, Closed: true, Requests: 5, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 16)
	go func() {
		if _, err := r.Run(ctx, out); err != nil {
			t.Error(err)
		}
	}()
	var recs []*loadgen.Record
	for rec := range out {
		recs = append(recs, rec)
	}
	if !killed.Load() {
		t.Fatal("the runner was never killed")
	}
	for _, r := range recs {
		t.Logf("request %d: %q %q, %d chunks", r.Seq, r.ErrorKind, r.Error, len(r.Chunks))
		switch {
		case r.Seq == killedSeq.Load():
			if r.ErrorKind != loadgen.ErrStreamError || len(r.Chunks) < 3 {
				t.Errorf("killed request %d: %q %q after %d chunks, want stream_error mid-stream", r.Seq, r.ErrorKind, r.Error, len(r.Chunks))
			}
		case r.ErrorKind != loadgen.ErrNone:
			t.Errorf("request %d: %s %s, want ok", r.Seq, r.ErrorKind, r.Error)
		}
	}
	if len(recs) != 5 {
		t.Errorf("%d records, want 5: the run goes on", len(recs))
	}
}

// killAfterLines calls kill once the body has passed lines newlines.
type killAfterLines struct {
	io.ReadCloser
	lines int
	kill  func()
}

func (k *killAfterLines) Read(p []byte) (int, error) {
	n, err := k.ReadCloser.Read(p)
	if k.lines > 0 {
		k.lines -= bytes.Count(p[:n], []byte("\n"))
		if k.lines <= 0 {
			k.kill()
		}
	}
	return n, err
}

// TestOllamaOverload: with OLLAMA_NUM_PARALLEL=1 and OLLAMA_MAX_QUEUE=1,
// a burst that arrives while the model loads, beyond the one request the
// queue holds, is refused with
// Ollama's 503 "server busy": rate_limited, never server_error, on both
// APIs, with the server's words.
func TestOllamaOverload(t *testing.T) {
	s := start(t, ollamatest.Options{NumParallel: 1, MaxQueue: 1, Unloaded: true})
	// Ollama's queue fills while its scheduler loads a model: each API
	// gets a model not loaded yet.
	for api, model := range map[string]string{"ollama-chat": ollamatest.Tiny, "openai-chat": ollamatest.TinyEOS} {
		t.Run(api, func(t *testing.T) {
			recs := load(t, s, api, model, true, 24,
				loadgen.Options{Stages: []loadgen.Stage{{Name: "c", Concurrency: 6, Duration: time.Minute}}, Closed: true, Requests: 12})
			limited, ok := 0, 0
			for _, r := range recs {
				switch r.ErrorKind {
				case loadgen.ErrNone:
					ok++
				case loadgen.ErrRateLimited:
					limited++
					if r.Status != 503 || !strings.Contains(r.Error, "server busy") {
						t.Errorf("request %d: %d %q", r.Seq, r.Status, r.Error)
					}
				default:
					t.Errorf("request %d: %s %s", r.Seq, r.ErrorKind, r.Error)
				}
			}
			if limited == 0 || ok == 0 {
				t.Errorf("%d ok, %d rate_limited: want both", ok, limited)
			}
		})
	}
}
