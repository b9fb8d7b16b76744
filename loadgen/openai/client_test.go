package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
)

// testTimeout bounds every request a test makes.
const testTimeout = 5 * time.Second

// httpClientFlag is the HTTP client the package's tests use: auto, as
// tailgate's default (the lean client on their plain loopback servers);
// -http-client=nethttp runs them on the reference.
var httpClientFlag = flag.String("http-client", transport.HTTPClientAuto, "HTTP client for the tests: auto, lean or nethttp")

var testPrompt = &prompts.Prompt{ID: "p-1", Messages: []prompts.Message{{Role: "user", Content: "Say hi"}}}

// sessionPrompt is a turn of a multi-turn session: its answer text is kept
// for the next turn.
var sessionPrompt = &prompts.Prompt{ID: "s-1", Messages: testPrompt.Messages, Session: "s", Turn: 1,
	FollowUp: func(string) *prompts.Prompt { return nil }}

func newClient(t *testing.T, cfg Config) *Client {
	t.Helper()
	if cfg.Transport.HTTPClient == "" {
		cfg.Transport.HTTPClient = *httpClientFlag
	}
	c, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// do runs one request under testTimeout and returns its record.
func do(t *testing.T, c *Client, p *prompts.Prompt) *loadgen.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	rec := loadgen.NewRecord(time.Now())
	rec.Seq = 42
	c.Do(ctx, p, rec)
	rec.Finalize() // as the runner does, once
	return rec
}

// sseServer answers every request with body, written whole or one event
// per write with a flush between.
func sseServer(t *testing.T, body []byte, perEvent bool) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		if !perEvent {
			_, _ = w.Write(body)
			return
		}
		for _, ev := range bytes.SplitAfter(body, []byte("\n\n")) {
			_, _ = w.Write(ev)
			w.(http.Flusher).Flush()
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func readVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

const done = "data: [DONE]\n\n"

func TestVectors(t *testing.T) {
	tests := []struct {
		file   string
		suffix string // appended to fragments captured without their end
		api    string

		kind         loadgen.ErrorKind
		errContains  string
		chunkTokens  []int // after Finalize; len is the chunk count
		firstAnswer  int   // index of the first answer chunk; -1 none
		finish       string
		inputTokens  int
		outputTokens int
		tokenSource  string
		chunkSource  string
	}{
		{file: "openai_canonical.txt", chunkTokens: []int{1}, finish: "stop", inputTokens: 9, outputTokens: 1,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "vllm_v1.txt", kind: loadgen.ErrStreamTruncated, errContains: "without [DONE]", chunkTokens: []int{1, 1},
			outputTokens: 2, tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "vllm_v1.txt", suffix: done, chunkTokens: []int{1, 1}, outputTokens: 2,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "vllm_v2.txt", suffix: done, chunkTokens: []int{1, 1, 1, 1, 1}, outputTokens: 5,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		// continuous_usage_stats: exact per-chunk deltas; the fragment
		// starts after one token, so the first chunk gets two.
		{file: "vllm_v3_continuous_usage.txt", suffix: done, chunkTokens: []int{2, 1, 1, 1}, inputTokens: 16, outputTokens: 5,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "server"},
		{file: "vllm_v4_completions.txt", suffix: done, api: APICompletions, chunkTokens: []int{1}, inputTokens: 5, outputTokens: 1,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "server"},
		{file: "vllm_v5_reasoning.txt", chunkTokens: []int{5, 5}, firstAnswer: 1, finish: "length", inputTokens: 12, outputTokens: 10,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "vllm_v5_error.txt", kind: loadgen.ErrStreamError, errContains: "some engine failure (code 400)", firstAnswer: -1,
			tokenSource: loadgen.TokensFromChunks},
		{file: "sglang_s1.txt", suffix: done, chunkTokens: []int{1, 1}, outputTokens: 2,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "sglang_s2_gateway.txt", suffix: done, chunkTokens: []int{1, 1, 1}, outputTokens: 3,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "sglang_s3.txt", chunkTokens: []int{2, 2}, firstAnswer: 1, finish: "stop", inputTokens: 20, outputTokens: 4,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "tgi_t4_chat.txt", chunkTokens: []int{3}, finish: "stop", inputTokens: 39, outputTokens: 3,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "llamacpp_l1.txt", chunkTokens: []int{22}, finish: "stop", inputTokens: 28, outputTokens: 22,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		// Captured from llama.cpp: four tokens, stopped at the length limit.
		{file: "llamacpp_capture_chat.txt", chunkTokens: []int{1, 1, 1, 1}, finish: "length", inputTokens: 29, outputTokens: 4,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		// Stopped at end-of-sequence: usage counts the unstreamed EOS token,
		// which goes to no chunk (the first would get 2).
		{file: "llamacpp_capture_chat_eos.txt", chunkTokens: []int{1, 1, 1, 1}, finish: "stop", inputTokens: 29, outputTokens: 5,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		// Reasoning only, timings.predicted_n 8 → 9 gives exact counts.
		{file: "llamacpp_l2_reasoning.txt", kind: loadgen.ErrStreamTruncated, chunkTokens: []int{8, 1}, firstAnswer: -1,
			outputTokens: 9, tokenSource: loadgen.TokensFromChunks, chunkSource: "server"},
		{file: "llamacpp_l2_reasoning.txt", suffix: done, chunkTokens: []int{8, 1}, firstAnswer: -1, outputTokens: 9,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "server"},
		{file: "llamacpp_l4_error.txt", kind: loadgen.ErrStreamError, errContains: "an internal error (code 500)", firstAnswer: -1,
			tokenSource: loadgen.TokensFromChunks},
		{file: "llamacpp_l4_error_legacy.txt", kind: loadgen.ErrStreamError, errContains: "an internal error (code 500)", firstAnswer: -1,
			tokenSource: loadgen.TokensFromChunks},
		{file: "ollama_o4_old_v1.txt", kind: loadgen.ErrStreamTruncated, chunkTokens: []int{1, 1, 1}, outputTokens: 3,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "ollama_o4_old_v1.txt", suffix: done, chunkTokens: []int{1, 1, 1}, outputTokens: 3,
			tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
		{file: "ollama_o5_v1.txt", chunkTokens: []int{1}, finish: "stop", inputTokens: 26, outputTokens: 1,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "trtllm_r1.txt", chunkTokens: []int{1, 1}, finish: "stop", inputTokens: 11, outputTokens: 2,
			tokenSource: loadgen.TokensFromUsage, chunkSource: "spread"},
		{file: "trtllm_r2_truncated.txt", kind: loadgen.ErrStreamTruncated, errContains: "after 2 events and 1 chunks",
			chunkTokens: []int{1}, outputTokens: 1, tokenSource: loadgen.TokensFromChunks, chunkSource: "one"},
	}
	for _, tt := range tests {
		for _, perEvent := range []bool{false, true} {
			name := strings.TrimSuffix(tt.file, ".txt")
			if tt.suffix != "" {
				name += "+done"
			}
			if perEvent {
				name += "/per-event"
			}
			t.Run(name, func(t *testing.T) {
				body := append(readVector(t, tt.file), tt.suffix...)
				srv := sseServer(t, body, perEvent)
				c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, API: tt.api, Model: "m"})
				rec := do(t, c, testPrompt)

				if rec.ErrorKind != tt.kind {
					t.Fatalf("ErrorKind = %q (%s), want %q", rec.ErrorKind, rec.Error, tt.kind)
				}
				if !strings.Contains(rec.Error, tt.errContains) {
					t.Errorf("Error = %q, want it to contain %q", rec.Error, tt.errContains)
				}
				var got []int
				for _, ch := range rec.Chunks {
					got = append(got, ch.Tokens)
				}
				if !reflect.DeepEqual(got, tt.chunkTokens) {
					t.Errorf("chunk tokens = %v, want %v", got, tt.chunkTokens)
				}
				switch {
				case tt.firstAnswer < 0 && rec.FirstAnswer != 0:
					t.Errorf("FirstAnswer = %v, want none", rec.FirstAnswer)
				case tt.firstAnswer >= 0 && len(rec.Chunks) > tt.firstAnswer && rec.FirstAnswer != rec.Chunks[tt.firstAnswer].At:
					t.Errorf("FirstAnswer = %v, want chunk %d at %v", rec.FirstAnswer, tt.firstAnswer, rec.Chunks[tt.firstAnswer].At)
				}
				if rec.FinishReason != tt.finish {
					t.Errorf("FinishReason = %q, want %q", rec.FinishReason, tt.finish)
				}
				if rec.InputTokens != tt.inputTokens || rec.OutputTokens != tt.outputTokens {
					t.Errorf("tokens in/out = %d/%d, want %d/%d", rec.InputTokens, rec.OutputTokens, tt.inputTokens, tt.outputTokens)
				}
				if rec.TokenSource != tt.tokenSource || rec.ChunkTokenSource != tt.chunkSource {
					t.Errorf("sources = %q/%q, want %q/%q", rec.TokenSource, rec.ChunkTokenSource, tt.tokenSource, tt.chunkSource)
				}
				if rec.Status != http.StatusOK {
					t.Errorf("Status = %d", rec.Status)
				}
				// llama.cpp's timings object: the server's prefill and
				// generation times, as the capture's last chunk gives them.
				if tt.file == "llamacpp_capture_chat.txt" {
					want := loadgen.ServerTimings{Prompt: 2869 * time.Microsecond, Eval: 3806 * time.Microsecond}
					if rec.Server == nil || *rec.Server != want {
						t.Errorf("server timings %+v, want %+v", rec.Server, want)
					}
				} else if !strings.HasPrefix(tt.file, "llamacpp") && rec.Server != nil {
					t.Errorf("server timings %+v from a server that gives none", rec.Server)
				}
				// The model the server named, by encoding/json from the
				// first event (the whole body when not streamed).
				if want := firstEventModel(t, body); rec.ResponseModel != want {
					t.Errorf("ResponseModel = %q, want %q", rec.ResponseModel, want)
				}
				if tt.file == "llamacpp_capture_chat.txt" && rec.ResponseModel != "tiny" {
					t.Errorf("ResponseModel = %q, want the capture's \"tiny\"", rec.ResponseModel)
				}
				checkInstants(t, rec)
			})
		}
	}
}

// firstEventModel is the top-level "model" string of the first JSON data
// event of an SSE body, or of the body itself when it is one JSON value.
func firstEventModel(t *testing.T, body []byte) string {
	t.Helper()
	model := func(b []byte) (string, bool) {
		var v map[string]any
		if json.Unmarshal(b, &v) != nil {
			return "", false
		}
		m, _ := v["model"].(string)
		return m, true
	}
	if m, ok := model(body); ok {
		return m
	}
	for _, line := range strings.Split(string(body), "\n") {
		d, ok := strings.CutPrefix(line, "data:")
		if !ok {
			continue
		}
		d = strings.TrimSpace(d)
		if d == "" || d == "[DONE]" {
			continue
		}
		m, _ := model([]byte(d))
		return m
	}
	return ""
}

// checkInstants asserts the ordering every record must have.
func checkInstants(t *testing.T, rec *loadgen.Record) {
	t.Helper()
	if rec.Sent <= 0 || rec.End < rec.Sent {
		t.Errorf("Sent %v, End %v: want 0 < Sent <= End", rec.Sent, rec.End)
	}
	prev := rec.Sent
	for i, ch := range rec.Chunks {
		if ch.At < prev || ch.At > rec.End {
			t.Errorf("chunk %d at %v outside [%v, End %v]", i, ch.At, prev, rec.End)
		}
		prev = ch.At
	}
}

func TestRequest(t *testing.T) {
	type seen struct {
		path   string
		header http.Header
		body   map[string]any
	}
	var mu sync.Mutex
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		mu.Lock()
		got = append(got, seen{r.URL.Path, r.Header.Clone(), body})
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, done)
	}))
	defer srv.Close()
	last := func() seen {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}

	c := newClient(t, Config{
		Endpoint: transport.Endpoint{URL: srv.URL + "/v1/", Transport: transport.Config{APIKey: " sk-test \n",
			Headers: []string{"X-Tenant: a", "X-Trace: on", "X-Api-Key: secret-value-123"}}}, Model: "llama", MaxTokens: 64,
	})
	rec := do(t, c, &prompts.Prompt{ID: "req-7", Text: "hello <b>&</b>", MaxTokens: 5,
		Params: map[string]any{"temperature": 0.5, "ignore_eos": true, "stream": false, "messages": "x"}})
	if !rec.OK() {
		t.Fatalf("request failed: %s %s", rec.ErrorKind, rec.Error)
	}
	s := last()
	if s.path != "/v1/chat/completions" {
		t.Errorf("path %q", s.path)
	}
	for k, want := range map[string]string{
		"Authorization": "Bearer sk-test", "X-Request-Id": "req-7", "Content-Type": "application/json",
		"Accept": "text/event-stream", "X-Tenant": "a", "X-Trace": "on", "X-Api-Key": "secret-value-123",
		"Accept-Encoding": "",
	} {
		if g := s.header.Get(k); g != want {
			t.Errorf("header %s = %q, want %q", k, g, want)
		}
	}
	wantBody := map[string]any{
		"model": "llama", "max_tokens": 5.0, "stream": true, "temperature": 0.5, "ignore_eos": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []any{map[string]any{"role": "user", "content": "hello <b>&</b>"}},
	}
	if !reflect.DeepEqual(s.body, wantBody) {
		t.Errorf("body %v\nwant %v", s.body, wantBody)
	}

	// Completions, no stream options, default max tokens, Seq as the id.
	c = newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, API: APICompletions, MaxTokens: 64, IncludeUsage: Bool(false)})
	do(t, c, &prompts.Prompt{Messages: []prompts.Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}})
	s = last()
	if s.path != "/v1/completions" || s.header.Get("X-Request-Id") != "42" || s.header.Get("Authorization") != "" {
		t.Errorf("path %q, X-Request-Id %q, Authorization %q", s.path, s.header.Get("X-Request-Id"), s.header.Get("Authorization"))
	}
	wantBody = map[string]any{"max_tokens": 64.0, "stream": true, "prompt": "a\nb"}
	if !reflect.DeepEqual(s.body, wantBody) {
		t.Errorf("body %v\nwant %v", s.body, wantBody)
	}
}

func TestEndpointURL(t *testing.T) {
	for _, tt := range []struct{ base, api, want string }{
		{"http://127.0.0.1:8000", APIChat, "http://127.0.0.1:8000/v1/chat/completions"},
		{"http://127.0.0.1:8000/", APIChat, "http://127.0.0.1:8000/v1/chat/completions"},
		{"http://127.0.0.1:8000/v1", APIChat, "http://127.0.0.1:8000/v1/chat/completions"},
		{"http://127.0.0.1:8000/v1/", APICompletions, "http://127.0.0.1:8000/v1/completions"},
		{"https://h/proxy/v1", APIChat, "https://h/proxy/v1/chat/completions"},
		{"https://h/proxy", APIChat, "https://h/proxy/v1/chat/completions"},
		{"http://h/v1/chat/completions", APIChat, "http://h/v1/chat/completions"},
	} {
		c, err := New(Config{Endpoint: transport.Endpoint{URL: tt.base}, API: tt.api})
		if err != nil {
			t.Errorf("%s: %v", tt.base, err)
			continue
		}
		if c.URL() != tt.want {
			t.Errorf("%s %s: URL %q, want %q", tt.base, tt.api, c.URL(), tt.want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	for _, tt := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "base URL is empty"},
		{Config{Endpoint: transport.Endpoint{URL: "ftp://h"}}, "scheme must be http or https"},
		{Config{Endpoint: transport.Endpoint{URL: "http://user:hunter2@/x"}}, "no host"},
		{Config{Endpoint: transport.Endpoint{URL: "http://h"}, API: "kserve"}, `api "kserve"`},
		{Config{Endpoint: transport.Endpoint{URL: "http://h"}, MaxTokens: -1}, "must not be negative"},
		{Config{Endpoint: transport.Endpoint{URL: "http://h", Transport: transport.Config{Headers: []string{"X-Ok: 1", "Authorization Bearer hunter2"}}}}, "header line 2"},
		{Config{Endpoint: transport.Endpoint{URL: "http://h", Transport: transport.Config{Headers: []string{"Bad Name: v"}}}}, "not a valid header name"},
		{Config{Endpoint: transport.Endpoint{URL: "http://h", Transport: transport.Config{CAFile: "/nonexistent/ca.pem"}}}, "/nonexistent/ca.pem"},
	} {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want error containing %q", tt.cfg, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("error %q shows a credential", err)
		}
	}
}

// TestTimestamps checks that chunk instants are arrival instants: the
// gaps the client records match the gaps the server left between writes.
func TestTimestamps(t *testing.T) {
	gaps := []time.Duration{60 * time.Millisecond, 30 * time.Millisecond, 90 * time.Millisecond, 45 * time.Millisecond}
	var mu sync.Mutex
	var written []time.Time // server-side instant of each content write
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		f.Flush()
		for i, g := range gaps {
			time.Sleep(g) // the server's gaps: what the client must record
			fmt.Fprintf(w, "data: {\"choices\":[{\"delta\":{\"content\":\"t%d\"}}]}\n\n", i)
			f.Flush()
			mu.Lock()
			written = append(written, time.Now())
			mu.Unlock()
		}
		_, _ = io.WriteString(w, `data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4}}`+"\n\n"+done)
	}))
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}})
	rec := do(t, c, testPrompt)
	if !rec.OK() || len(rec.Chunks) != len(gaps) {
		t.Fatalf("%s %s, %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
	}
	// Loopback delivery jitter on a shared machine stays well under this.
	const tolerance = 5 * time.Millisecond
	mu.Lock()
	defer mu.Unlock()
	for i := 1; i < len(rec.Chunks); i++ {
		client := rec.Chunks[i].At - rec.Chunks[i-1].At
		server := written[i].Sub(written[i-1])
		if d := client - server; d > tolerance || d < -tolerance {
			t.Errorf("gap %d: client %v, server %v", i, client, server)
		}
	}
	if ttft := rec.Chunks[0].At - rec.Sent; ttft < gaps[0] || ttft > gaps[0]+50*time.Millisecond {
		t.Errorf("first token %v after Sent, want about %v", ttft, gaps[0])
	}
	if rec.FirstAnswer != rec.Chunks[0].At {
		t.Errorf("FirstAnswer %v, first chunk %v", rec.FirstAnswer, rec.Chunks[0].At)
	}
	if e2e := rec.End - rec.Chunks[len(rec.Chunks)-1].At; e2e > 20*time.Millisecond {
		t.Errorf("End %v after the last chunk, want right after", e2e)
	}
}

func TestHTTPErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		kind   loadgen.ErrorKind
		want   string
	}{
		{429, `{"error":{"message":"rate limited","type":"rate_limit_error","code":"rate_limit"}}`, loadgen.ErrRateLimited, "HTTP 429: rate limited (code rate_limit)"},
		{400, `{"object":"error","message":"max_tokens too large","type":"BadRequestError","code":400}`, loadgen.ErrClient, "HTTP 400: max_tokens too large (code 400)"},
		{404, `{"detail":"Not Found"}`, loadgen.ErrClient, "HTTP 404: Not Found"},
		{422, `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`, loadgen.ErrClient, "field required"},
		{500, "Internal Server Error\nstack trace...", loadgen.ErrServer, "HTTP 500: Internal Server Error"},
		{503, `{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}`, loadgen.ErrServer, "HTTP 503: Loading model (code 503)"},
		{502, "", loadgen.ErrServer, "HTTP 502"},
		{500, `{"error":"` + strings.Repeat("é", 400) + `"}`, loadgen.ErrServer, "..."},
		// Refusals for length, in each server's words: vLLM, llama.cpp, TGI.
		{400, `{"object":"error","message":"This model's maximum context length is 128 tokens. However, you requested 200 tokens (150 in the messages, 50 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, loadgen.ErrContextLength, "maximum context length is 128 tokens"},
		{400, `{"error":{"code":400,"message":"request (13392 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":13392,"n_ctx":8192}}`, loadgen.ErrContextLength, "exceeds the available context size"},
		{422, "{\"error\":\"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 4000 `inputs` tokens and 200 `max_new_tokens`\",\"error_type\":\"validation\"}", loadgen.ErrContextLength, "must be <= 4096"},
	} {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				_, _ = io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
			if rec.ErrorKind != tt.kind || rec.Status != tt.status {
				t.Fatalf("kind %q status %d, want %q %d", rec.ErrorKind, rec.Status, tt.kind, tt.status)
			}
			if !strings.Contains(rec.Error, tt.want) {
				t.Errorf("Error %q, want it to contain %q", rec.Error, tt.want)
			}
			if len(rec.Error) > transport.MaxErrorMessage+64 {
				t.Errorf("Error is %d bytes long", len(rec.Error))
			}
			if !utf8Valid(rec.Error) {
				t.Errorf("Error is not valid UTF-8: %q", rec.Error)
			}
			checkInstants(t, rec)
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\x00") == s }

func TestAPIKeyNeverInError(t *testing.T) {
	const key = "sk-live-0123456789abcdef"
	var sawKey atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawKey.Store(r.Header.Get("Authorization") == "Bearer "+key)
		w.WriteHeader(http.StatusUnauthorized)
		// Servers do echo what they were given.
		fmt.Fprintf(w, `{"error":{"message":"Incorrect API key provided: %s (header %q)","code":"invalid_api_key"}}`,
			key, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{APIKey: key}}}), testPrompt)
	if !sawKey.Load() {
		t.Fatal("server did not receive the key as a bearer token")
	}
	if rec.ErrorKind != loadgen.ErrClient {
		t.Fatalf("kind %q", rec.ErrorKind)
	}
	if strings.Contains(rec.Error, key) || strings.Contains(rec.Error, "0123456789") {
		t.Fatalf("Error shows the key: %q", rec.Error)
	}
	if !strings.Contains(rec.Error, redact.Mask) {
		t.Errorf("Error %q: want the echo redacted", rec.Error)
	}
	// In-stream errors are scrubbed the same way.
	srv2 := sseServer(t, []byte(`data: {"error":{"message":"bad key `+key+`"}}`+"\n\n"), false)
	rec = do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv2.URL, Transport: transport.Config{APIKey: key}}}), testPrompt)
	if rec.ErrorKind != loadgen.ErrStreamError || strings.Contains(rec.Error, key) {
		t.Fatalf("kind %q, Error %q", rec.ErrorKind, rec.Error)
	}
}

// hang is a handler that sends the role chunk, then nothing until the
// client goes away (or the test ends).
func hang(stop <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Read the body first: only then does net/http watch the
		// connection and cancel r.Context when the client leaves.
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"content":"a"}}]}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
}

// silent is a handler that reads the request and answers nothing until
// the client goes away (or the test ends).
func silent(stop <-chan struct{}) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}
}

func TestContextErrors(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(hang(stop))
	defer srv.Close()
	defer close(stop)
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}})

	t.Run("timeout mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
		defer cancel()
		rec := loadgen.NewRecord(time.Now())
		start := time.Now()
		c.Do(ctx, testPrompt, rec)
		if rec.ErrorKind != loadgen.ErrTimeout || len(rec.Chunks) != 1 {
			t.Fatalf("kind %q (%s), %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
		}
		if el := time.Since(start); el > time.Second {
			t.Errorf("Do returned after %v", el)
		}
		checkInstants(t, rec)
	})
	t.Run("cancel mid-stream", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		rec := loadgen.NewRecord(time.Now())
		time.AfterFunc(100*time.Millisecond, cancel)
		c.Do(ctx, testPrompt, rec)
		if rec.ErrorKind != loadgen.ErrCancelled || !strings.Contains(rec.Error, "after 1 events") {
			t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
		}
		checkInstants(t, rec)
	})
	t.Run("timeout before headers", func(t *testing.T) {
		slow := httptest.NewServer(silent(stop))
		defer slow.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		rec := loadgen.NewRecord(time.Now())
		newClient(t, Config{Endpoint: transport.Endpoint{URL: slow.URL}}).Do(ctx, testPrompt, rec)
		if rec.ErrorKind != loadgen.ErrTimeout || rec.Status != 0 || !strings.Contains(rec.Error, "before the response") {
			t.Fatalf("kind %q status %d (%s)", rec.ErrorKind, rec.Status, rec.Error)
		}
	})
	t.Run("cancelled before sending", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rec := loadgen.NewRecord(time.Now())
		c.Do(ctx, testPrompt, rec)
		if rec.ErrorKind != loadgen.ErrCancelled {
			t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
		}
	})
}

// The runner's deadline for a client that keeps it (loadgen.WithSoftDeadline:
// no Done at the deadline) ends a request as a timer would, mid-stream and
// before the answer, on either HTTP client: the lean one by a connection
// deadline, net/http (which the lean client falls back to for proxies and
// redirects) by a context made hard for it.
func TestSoftDeadline(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(hang(stop))
	defer srv.Close()
	slow := httptest.NewServer(silent(stop))
	defer slow.Close()
	defer close(stop)
	for _, hc := range []string{transport.HTTPClientLean, transport.HTTPClientNetHTTP} {
		c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{HTTPClient: hc}}})
		if c.KeepsDeadline() != (hc == transport.HTTPClientLean) {
			t.Errorf("%s: KeepsDeadline %v", hc, c.KeepsDeadline())
		}
		for _, tc := range []struct {
			name  string
			c     *Client
			where string
			n     int
		}{
			{"mid-stream", c, "after 1 events", 1},
			{"before the answer", newClient(t, Config{Endpoint: transport.Endpoint{URL: slow.URL, Transport: transport.Config{HTTPClient: hc}}}), "before the response", 0},
		} {
			rec := loadgen.NewRecord(time.Now())
			start := time.Now()
			tc.c.Do(loadgen.WithSoftDeadline(context.Background(), start.Add(150*time.Millisecond)), testPrompt, rec)
			el := time.Since(start)
			if rec.ErrorKind != loadgen.ErrTimeout || len(rec.Chunks) != tc.n || !strings.Contains(rec.Error, tc.where) {
				t.Errorf("%s %s: kind %q (%s), %d chunks", hc, tc.name, rec.ErrorKind, rec.Error, len(rec.Chunks))
			}
			if el < 150*time.Millisecond || el > 5*time.Second {
				t.Errorf("%s %s: Do returned after %v, deadline 150ms", hc, tc.name, el)
			}
		}
	}
}

// A kept-alive lean connection goes back to the pool without the soft
// deadline of the request it carried, nor the read deadline of the drain
// after [DONE] (set, before this was found, on a body already read to its
// end: its connection, back in the pool, then failed its next request
// after 100 ms, which was sent again on a fresh one): the next request
// on it, sent without a deadline and answered after both have passed,
// succeeds, on the same connection.
func TestSoftDeadlineClearedForReuse(t *testing.T) {
	var conns atomic.Int32
	first := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Request-Id") == "second" {
			<-first // the first request's deadline has passed
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: [DONE]\n\n")
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{HTTPClient: transport.HTTPClientLean}}})
	deadline := time.Now().Add(100 * time.Millisecond)
	rec := loadgen.NewRecord(time.Now())
	c.Do(loadgen.WithSoftDeadline(context.Background(), deadline), &prompts.Prompt{ID: "first", Messages: testPrompt.Messages}, rec)
	if !rec.OK() {
		t.Fatalf("first: %s", rec.Error)
	}
	time.AfterFunc(time.Until(deadline)+20*time.Millisecond, func() { close(first) })
	rec = loadgen.NewRecord(time.Now())
	c.Do(context.Background(), &prompts.Prompt{ID: "second", Messages: testPrompt.Messages}, rec)
	if !rec.OK() || time.Now().Before(deadline) {
		t.Fatalf("second, on the first's connection: %s %s", rec.ErrorKind, rec.Error)
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections, want 1 (the first reused)", n)
	}
}

func TestConnectErrors(t *testing.T) {
	t.Run("refused", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: "http://" + addr}}), testPrompt)
		if rec.ErrorKind != loadgen.ErrConnect || !strings.Contains(rec.Error, "refused") {
			t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
		}
		if strings.Contains(rec.Error, "Post ") {
			t.Errorf("Error %q repeats the request line", rec.Error)
		}
	})
	t.Run("closed before any response", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
		}))
		defer srv.Close()
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
		if rec.ErrorKind != loadgen.ErrConnect || rec.Status != 0 {
			t.Fatalf("kind %q status %d (%s)", rec.ErrorKind, rec.Status, rec.Error)
		}
	})
}

func TestStreamFailures(t *testing.T) {
	t.Run("connection cut mid-stream", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			conn, buf, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			chunk := `data: {"choices":[{"delta":{"content":"Hel"}}]}` + "\n\n"
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(chunk), chunk)
			_ = buf.Flush() // and close without the last chunk
		}))
		defer srv.Close()
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
		if rec.ErrorKind != loadgen.ErrStreamTruncated || len(rec.Chunks) != 1 {
			t.Fatalf("kind %q (%s), %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
		}
	})
	t.Run("unparsable chunk", func(t *testing.T) {
		srv := sseServer(t, []byte("data: {\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json}\n\n"+done), false)
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
		if rec.ErrorKind != loadgen.ErrProtocol || !strings.Contains(rec.Error, "event 2") || len(rec.Chunks) != 1 {
			t.Fatalf("kind %q (%s), %d chunks", rec.ErrorKind, rec.Error, len(rec.Chunks))
		}
	})
	t.Run("event: error", func(t *testing.T) {
		srv := sseServer(t, []byte("event: error\ndata: overloaded\n\n"), false)
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
		if rec.ErrorKind != loadgen.ErrStreamError || !strings.Contains(rec.Error, "overloaded") {
			t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
		}
	})
	t.Run("finish without [DONE] is complete", func(t *testing.T) {
		srv := sseServer(t, []byte(`data: {"choices":[{"delta":{"content":"a"},"finish_reason":"stop"}]}`+"\n\n"), false)
		rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
		if !rec.OK() || rec.FinishReason != "stop" {
			t.Fatalf("kind %q (%s) finish %q", rec.ErrorKind, rec.Error, rec.FinishReason)
		}
	})
	t.Run("[DONE] without blank line", func(t *testing.T) {
		srv := sseServer(t, []byte(`data: {"choices":[{"delta":{"content":"a"}}]}`+"\n\ndata: [DONE]\n"), false)
		if rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt); !rec.OK() {
			t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
		}
	})
}

// After [DONE] a server may keep the stream open; the client must not
// wait for it, and End is the [DONE] instant.
func TestServerHoldsStreamAfterDone(t *testing.T) {
	stop := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, `data: {"choices":[{"delta":{"content":"a"}}]}`+"\n\n"+done)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-stop:
		}
	}))
	defer srv.Close()
	defer close(stop)
	start := time.Now()
	rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
	if !rec.OK() {
		t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
	}
	if el := time.Since(start); el > drainAfterDone+time.Second {
		t.Errorf("Do took %v", el)
	}
	if rec.End-rec.Chunks[0].At > 20*time.Millisecond {
		t.Errorf("End %v is not the [DONE] instant (chunk at %v)", rec.End, rec.Chunks[0].At)
	}
}

// Reading to the end after [DONE] lets the next request reuse the
// connection, keeping connection setup out of TTFT.
func TestConnectionReuse(t *testing.T) {
	var conns atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(readVector(t, "openai_canonical.txt"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}})
	for i := 0; i < 5; i++ {
		if rec := do(t, c, testPrompt); !rec.OK() {
			t.Fatalf("request %d: %s %s", i, rec.ErrorKind, rec.Error)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Errorf("%d connections for 5 sequential requests, want 1", n)
	}
}

func TestNonStreaming(t *testing.T) {
	var gotStream atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		gotStream.Store(body["stream"])
		w.Header().Set("Content-Type", "application/json")
		time.Sleep(30 * time.Millisecond) // an answer that takes time: its one chunk is at its end
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"Hello\nthere","reasoning_content":"hm"},"finish_reason":"stop"}],"usage":{"prompt_tokens":7,"completion_tokens":12,"total_tokens":19}}`)
	}))
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Stream: Bool(false)})
	rec := do(t, c, sessionPrompt)
	if !rec.OK() {
		t.Fatalf("%s %s", rec.ErrorKind, rec.Error)
	}
	if gotStream.Load() != false {
		t.Errorf("stream sent as %v", gotStream.Load())
	}
	if len(rec.Chunks) != 1 || rec.Chunks[0].Tokens != 12 || rec.Chunks[0].At != rec.End || rec.FirstAnswer != rec.End {
		t.Errorf("chunks %+v, FirstAnswer %v, End %v", rec.Chunks, rec.FirstAnswer, rec.End)
	}
	if rec.InputTokens != 7 || rec.OutputTokens != 12 || rec.FinishReason != "stop" || rec.Text != "Hello\nthere" {
		t.Errorf("in %d out %d finish %q text %q", rec.InputTokens, rec.OutputTokens, rec.FinishReason, rec.Text)
	}
	if !rec.Unstreamed {
		t.Error("a --stream=false answer is not marked Unstreamed")
	}
	if rec.End-rec.Sent < 30*time.Millisecond {
		t.Errorf("End-Sent = %v, want ≥ the server's 30ms", rec.End-rec.Sent)
	}

	// A server that ignores "stream": true and answers in JSON: a
	// complete answer, but not a stream, and the record says so.
	c = newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}})
	rec = do(t, c, testPrompt)
	if !rec.OK() || len(rec.Chunks) != 1 || rec.OutputTokens != 12 || !rec.Unstreamed {
		t.Errorf("JSON answer to a stream request: %s %s, %d chunks, unstreamed %v", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.Unstreamed)
	}
	n := 0
	rec.EachICL(func(time.Duration) { n++ })
	rec.EachITL(func(time.Duration, int) { n++ })
	if n != 0 {
		t.Errorf("%d inter-chunk samples from a JSON body", n)
	}
	// And one that streams although "stream": false was sent.
	sse := sseServer(t, readVector(t, "trtllm_r1.txt"), true)
	c = newClient(t, Config{Endpoint: transport.Endpoint{URL: sse.URL}, Stream: Bool(false)})
	if rec := do(t, c, testPrompt); !rec.OK() || len(rec.Chunks) != 2 || rec.OutputTokens != 2 || rec.Unstreamed {
		t.Errorf("SSE answer to a non-stream request: %s %s, %d chunks, unstreamed %v", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.Unstreamed)
	}
	rec = do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: sse.URL}}), testPrompt)
	if rec.Unstreamed {
		t.Error("a stream marked Unstreamed")
	}
}

// A 200 whose body is neither an event stream nor JSON (a proxy's HTML
// page, a login wall) is a protocol error naming the content type, not a
// truncated stream.
func TestWrongContentType(t *testing.T) {
	for _, tt := range []struct {
		ct     string
		stream bool
		want   string
	}{
		{"text/html; charset=utf-8", true, `HTTP 200 with Content-Type "text/html; charset=utf-8", not an event stream`},
		{"text/plain", true, `Content-Type "text/plain", not an event stream`},
		{"text/html", false, `Content-Type "text/html", not JSON`},
	} {
		t.Run(tt.ct, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.ct)
				_, _ = io.WriteString(w, "<html><body>Sign in</body></html>\n")
			}))
			defer srv.Close()
			rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Stream: Bool(tt.stream)}), testPrompt)
			if rec.ErrorKind != loadgen.ErrProtocol || !strings.Contains(rec.Error, tt.want) || rec.Status != 200 {
				t.Fatalf("kind %q status %d Error %q, want %q", rec.ErrorKind, rec.Status, rec.Error, tt.want)
			}
			checkInstants(t, rec)
		})
	}
	// "+json" media types are JSON.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/vnd.api+json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}]}`)
	}))
	defer srv.Close()
	if rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt); !rec.OK() || !rec.Unstreamed {
		t.Errorf("+json answer: %s %s, unstreamed %v", rec.ErrorKind, rec.Error, rec.Unstreamed)
	}
}

// Answer text is kept only for a prompt whose session builds its next
// turn from it.
func TestKeepText(t *testing.T) {
	srv := sseServer(t, readVector(t, "vllm_v5_reasoning.txt"), true)
	rec := do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), sessionPrompt)
	if rec.Text != " done." { // the answer, not the reasoning
		t.Errorf("Text %q", rec.Text)
	}
	srv = sseServer(t, append(readVector(t, "vllm_v2.txt"), done...), false)
	rec = do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), sessionPrompt)
	if rec.Text != "我是阿里云开发的一款" {
		t.Errorf("Text %q", rec.Text)
	}
	rec = do(t, newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}}), testPrompt)
	if rec.Text != "" {
		t.Errorf("Text kept for a prompt without FollowUp: %q", rec.Text)
	}
}

func TestTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(readVector(t, "openai_canonical.txt"))
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		cfg  Config
		kind loadgen.ErrorKind
	}{
		{"CA file", Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{CAFile: caFile}}}, loadgen.ErrNone},
		{"insecure", Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Insecure: true}}}, loadgen.ErrNone},
		{"untrusted", Config{Endpoint: transport.Endpoint{URL: srv.URL}}, loadgen.ErrConnect},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := do(t, newClient(t, tt.cfg), testPrompt)
			if rec.ErrorKind != tt.kind {
				t.Fatalf("kind %q (%s), want %q", rec.ErrorKind, rec.Error, tt.kind)
			}
			if tt.kind == loadgen.ErrNone && len(rec.Chunks) != 1 {
				t.Errorf("%d chunks", len(rec.Chunks))
			}
		})
	}
	notPEM := filepath.Join(t.TempDir(), "x.pem")
	_ = os.WriteFile(notPEM, []byte("not a certificate"), 0o600)
	if _, err := New(Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{CAFile: notPEM}}}); err == nil || !strings.Contains(err.Error(), "no PEM") {
		t.Errorf("New with a non-PEM CA file: %v", err)
	}
}

// Many streams at once through one client: the race detector checks the
// pooled readers, and every record must be complete and its own.
func TestConcurrentStreams(t *testing.T) {
	srv := sseServer(t, readVector(t, "sglang_s3.txt"), true)
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}})
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rec := do(t, c, sessionPrompt)
			if !rec.OK() || len(rec.Chunks) != 2 || rec.OutputTokens != 4 || rec.Text != "Hi there" {
				errs <- fmt.Sprintf("%s %s, %d chunks, %d tokens, %q", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.OutputTokens, rec.Text)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// A prompt naming a model (Prompt.Model, or Params["model"] as trace
// sources set it) is sent to it instead of the run's, in the plain body and
// the map body alike, with its extra headers; a prompt naming none gets
// the run's model and no extra header.
func TestPromptModelAndHeaders(t *testing.T) {
	type seen struct{ model, tenant string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Model string `json:"model"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		got <- seen{body.Model, r.Header.Get("X-Gateway-Inference-Fairness-Id")}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"choices":[{"message":{"content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":2,"completion_tokens":1}}`)
	}))
	defer srv.Close()
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "base", Stream: new(false)})
	tenant := map[string]string{"x-gateway-inference-fairness-id": "tenant-a"}
	msgs := testPrompt.Messages
	for _, tt := range []struct {
		name string
		p    *prompts.Prompt
		want seen
	}{
		{"Model, plain body", &prompts.Prompt{Messages: msgs, Model: "lora-a", Headers: tenant}, seen{"lora-a", "tenant-a"}},
		{"Params model, map body", &prompts.Prompt{Messages: msgs, Params: map[string]any{"model": "lora-b", "temperature": 0}}, seen{"lora-b", ""}},
		{"Model over Params", &prompts.Prompt{Messages: msgs, Model: "lora-a", Params: map[string]any{"model": "lora-b"}}, seen{"lora-a", ""}},
		{"none", &prompts.Prompt{Messages: msgs}, seen{"base", ""}},
	} {
		rec := do(t, c, tt.p)
		if !rec.OK() {
			t.Fatalf("%s: %s %s", tt.name, rec.ErrorKind, rec.Error)
		}
		if s := <-got; s != tt.want {
			t.Errorf("%s: server saw %+v, want %+v", tt.name, s, tt.want)
		}
	}
}
