package tgi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func serve(t *testing.T, ct, body string, status int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/info" {
			io.WriteString(w, `{"model_id":"meta-llama/Llama-3.1-8B-Instruct","version":"3.1.2"}`)
			return
		}
		w.Header().Set("Content-Type", ct)
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, url string, stream bool) *loadgen.Record {
	t.Helper()
	c, err := tgi.New(tgi.Config{Endpoint: transport.Endpoint{URL: url}, Stream: &stream, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec := loadgen.NewRecord(time.Now())
	c.Do(ctx, &prompts.Prompt{Text: "hi"}, rec)
	rec.Finalize()
	return rec
}

// TestVectors: TGI's /generate_stream events as it sends them, T1 and T2
// (a keep-alive comment, a special end token, details), and T2's error
// stream.
func TestVectors(t *testing.T) {
	for _, tc := range []struct {
		name, body      string
		kind            loadgen.ErrorKind
		chunks, tokens  int
		in              int
		finish, lastTok string
	}{
		{"T1 last event only", `data:{"index":16,"token":{"id":28723,"text":".","logprob":-0.6196289,"special":false},"generated_text":"This is a picture of an anthropomorphic rabbit in a space suit.","details":null}` + "\n\n",
			loadgen.ErrNone, 1, 1, 0, "", ""},
		{"T2 details", `data:{"index":1,"token":{"id":1014,"text":" Deep","logprob":-0.12,"special":false},"generated_text":null,"details":null}

:

data:{"index":2,"token":{"id":6975,"text":" learning","logprob":-0.05,"special":false},"generated_text":null,"details":null}

data:{"index":3,"token":{"id":2,"text":"</s>","logprob":-0.01,"special":true},"generated_text":" Deep learning","details":{"finish_reason":"eos_token","generated_tokens":3,"seed":null,"input_length":7}}

`, loadgen.ErrNone, 2, 3, 7, "eos_token", ""},
		{"T2 error", `data:{"error":"Input validation error: ` + "`inputs`" + ` tokens + ` + "`max_new_tokens`" + ` must be <= 4096","error_type":"validation"}` + "\n\n",
			loadgen.ErrContextLength, 0, 0, 0, "", ""}, // a refusal for length, inside the stream
		{"truncated", `data:{"index":1,"token":{"id":1014,"text":" Deep","logprob":-0.12,"special":false},"generated_text":null,"details":null}` + "\n\n",
			loadgen.ErrStreamTruncated, 1, 1, 0, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, serve(t, "text/event-stream", tc.body, 200).URL, true)
			if rec.ErrorKind != tc.kind || len(rec.Chunks) != tc.chunks || rec.InputTokens != tc.in || rec.FinishReason != tc.finish {
				t.Fatalf("%s %q, %d chunks, in %d, finish %q", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.InputTokens, rec.FinishReason)
			}
			if tc.kind == loadgen.ErrNone && rec.OutputTokens != tc.tokens {
				t.Errorf("%d output tokens, want %d", rec.OutputTokens, tc.tokens)
			}
			// The special end token is owed to the last chunk.
			if tc.name == "T2 details" && (rec.Chunks[0].Tokens != 1 || rec.Chunks[1].Tokens != 2) {
				t.Errorf("chunk tokens %+v", rec.Chunks)
			}
		})
	}
}

func TestUnaryAndErrors(t *testing.T) {
	rec := do(t, serve(t, "application/json", `{"generated_text":" Deep learning","details":{"finish_reason":"length","generated_tokens":2,"input_length":3}}`, 200).URL, false)
	if !rec.OK() || !rec.Unstreamed || rec.OutputTokens != 2 || len(rec.Chunks) != 1 || rec.InputTokens != 3 {
		t.Errorf("unary %+v", rec)
	}
	rec = do(t, serve(t, "application/json", `{"error":"Model is overloaded","error_type":"overloaded"}`, 429).URL, true)
	if rec.ErrorKind != loadgen.ErrRateLimited || !strings.Contains(rec.Error, "overloaded") {
		t.Errorf("429: %s %q", rec.ErrorKind, rec.Error)
	}
	c, _ := tgi.New(tgi.Config{Endpoint: transport.Endpoint{URL: serve(t, "", "", 200).URL}, Model: "other"})
	if err := c.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), `it serves "meta-llama/Llama-3.1-8B-Instruct"`) {
		t.Errorf("preflight: %v", err)
	}
	if m, err := c.DiscoverModel(context.Background()); err != nil || m != "meta-llama/Llama-3.1-8B-Instruct" {
		t.Errorf("discover %q %v", m, err)
	}
}

// Against the simulator's native TGI routes: an answer with exact counts,
// and each fault under its kind.
func TestAgainstSimulator(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	for fault, want := range map[string]loadgen.ErrorKind{"none": loadgen.ErrNone, "http_429": loadgen.ErrRateLimited,
		"http_503": loadgen.ErrServer, "error_in_stream": loadgen.ErrStreamError, "truncate": loadgen.ErrStreamTruncated,
		"malformed": loadgen.ErrProtocol} {
		c, err := tgi.New(tgi.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Headers: []string{"X-Sim-Fault: " + fault}}}, MaxTokens: 6})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Preflight(context.Background()); err != nil {
			t.Fatal(err)
		}
		rec := loadgen.NewRecord(time.Now())
		c.Do(context.Background(), &prompts.Prompt{Text: "hello there"}, rec)
		rec.Finalize()
		if rec.ErrorKind != want || want == loadgen.ErrNone && (len(rec.Chunks) != 6 || rec.OutputTokens != 6 || rec.InputTokens != 2) {
			t.Errorf("%s: %s %q, %d chunks, %d/%d tokens", fault, rec.ErrorKind, rec.Error, len(rec.Chunks), rec.InputTokens, rec.OutputTokens)
		}
	}
}
