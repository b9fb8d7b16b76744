package ollama_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func serve(t *testing.T, body string, status int) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/tags" {
			io.WriteString(w, `{"models":[{"name":"llama3.2:latest","model":"llama3.2:latest"},{"name":"gemma4:4b"}]}`)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func do(t *testing.T, url string) *loadgen.Record {
	t.Helper()
	c, err := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: url}, Model: "llama3.2", MaxTokens: 16})
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

// TestVectors: Ollama's /api/generate and /api/chat lines as it sends
// them, O1 (done_reason on the last line), O2 (the final object with
// metrics), O3 (an error mid-stream), and /api/chat objects built from
// them.
func TestVectors(t *testing.T) {
	o1 := `{"model":"gemma4","created_at":"2025-10-26T17:15:24.097767Z","response":"That","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.109172Z","response":"'","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.121485Z","response":"s","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.132802Z","response":" a","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.143931Z","response":" fantastic","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.155176Z","response":" question","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:15:24.166576Z","response":"!","done":true, "done_reason": "stop"}
`
	o2 := `{"model":"llama3.2","created_at":"2023-08-04T19:22:45.499127Z","response":"","done":true,"context":[1,2,3],"total_duration":10706818083,"load_duration":6338219291,"prompt_eval_count":26,"prompt_eval_duration":130079000,"eval_count":259,"eval_duration":4232710000}` + "\n"
	o3 := `{"model":"gemma4","created_at":"2025-10-26T17:21:21.196249Z","response":" Yes","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:21:21.207235Z","response":".","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:21:21.219166Z","response":"I","done":false}
{"model":"gemma4","created_at":"2025-10-26T17:21:21.231094Z","response":"can","done":false}
{"error":"an error was encountered while running the model"}
`
	chat := `{"model":"llama3.2","created_at":"2025-10-26T17:15:24.09Z","message":{"role":"assistant","content":"","thinking":"Hmm"},"done":false}
{"model":"llama3.2","created_at":"2025-10-26T17:15:24.10Z","message":{"role":"assistant","content":"Hi"},"done":false}
{"model":"llama3.2","created_at":"2025-10-26T17:15:24.11Z","message":{"role":"assistant","content":""},"done":true,"done_reason":"length","prompt_eval_count":26,"eval_count":4}
`
	for _, tc := range []struct {
		name, body    string
		kind          loadgen.ErrorKind
		chunks, out   int
		in            int
		finish        string
		answerIsFirst bool
		// model is the model the server named (the request names llama3.2).
		model string
	}{
		{"O1", o1, loadgen.ErrNone, 7, 7, 0, "stop", true, "gemma4"},
		{"O1 + O2 metrics", strings.Replace(o1, `"done":true, "done_reason": "stop"}`, `"done":false}`, 1) + o2, loadgen.ErrNone, 7, 259, 26, "", true, "gemma4"},
		{"O3", o3, loadgen.ErrStreamError, 4, 0, 0, "", true, "gemma4"},
		{"chat with thinking", chat, loadgen.ErrNone, 2, 4, 26, "length", false, "llama3.2"},
		{"cut", strings.Join(strings.Split(o1, "\n")[:3], "\n"), loadgen.ErrStreamTruncated, 3, 0, 0, "", true, "gemma4"},
		{"cut inside an object", o1[:100], loadgen.ErrStreamTruncated, 1, 0, 0, "", true, "gemma4"},
		{"no model named", `{"response":"x","done":true}` + "\n", loadgen.ErrNone, 1, 1, 0, "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := do(t, serve(t, tc.body, 200).URL)
			if rec.ErrorKind != tc.kind || len(rec.Chunks) != tc.chunks || rec.InputTokens != tc.in || rec.FinishReason != tc.finish {
				t.Fatalf("%s %q, %d chunks, in %d, finish %q", rec.ErrorKind, rec.Error, len(rec.Chunks), rec.InputTokens, rec.FinishReason)
			}
			if rec.ResponseModel != tc.model {
				t.Errorf("response model %q, want %q", rec.ResponseModel, tc.model)
			}
			if tc.kind == loadgen.ErrNone && rec.OutputTokens != tc.out {
				t.Errorf("%d output tokens, want %d", rec.OutputTokens, tc.out)
			}
			if tc.kind == loadgen.ErrNone && (rec.FirstAnswer == rec.Chunks[0].At) != tc.answerIsFirst {
				t.Errorf("first answer %v, first chunk %v", rec.FirstAnswer, rec.Chunks[0].At)
			}
		})
	}
	// O2's timings are the record's server timings; the queue wait is
	// what the total leaves (10706818083 − 6338219291 − 130079000 −
	// 4232710000 ns).
	rec := do(t, serve(t, strings.Replace(o1, `"done":true, "done_reason": "stop"}`, `"done":false}`, 1)+o2, 200).URL)
	want := loadgen.ServerTimings{Total: 10706818083, Load: 6338219291, Prompt: 130079000, Eval: 4232710000}
	if rec.Server == nil || *rec.Server != want {
		t.Fatalf("server timings %+v, want %+v", rec.Server, want)
	}
	if q, ok := rec.Server.Queue(); !ok || q != 5809792 {
		t.Errorf("queue %v %v, want 5.809792ms", q, ok)
	}
}

// TestEOSNotStreamed: Ollama's eval_count counts the end-of-sequence token
// it never streams (done_reason "stop"): the record keeps the count, and
// the chunks share only the tokens streamed, one each.
func TestEOSNotStreamed(t *testing.T) {
	body := `{"message":{"role":"assistant","content":" a"},"done":false}
{"message":{"role":"assistant","content":" b"},"done":false}
{"message":{"role":"assistant","content":" c"},"done":false}
{"message":{"role":"assistant","content":""},"done":true,"done_reason":"stop","eval_count":4,"prompt_eval_count":9}
`
	rec := do(t, serve(t, body, 200).URL)
	if rec.OutputTokens != 4 || len(rec.Chunks) != 3 {
		t.Fatalf("%d output tokens over %d chunks, want 4 over 3", rec.OutputTokens, len(rec.Chunks))
	}
	for i, c := range rec.Chunks {
		if c.Tokens != 1 {
			t.Errorf("chunk %d carries %d tokens, want 1 (the EOS belongs to none)", i, c.Tokens)
		}
	}
}

func TestErrorsAndPreflight(t *testing.T) {
	rec := do(t, serve(t, `{"error":"model \"llama3.2\" not found, try pulling it first"}`, 404).URL)
	if rec.ErrorKind != loadgen.ErrClient || !strings.Contains(rec.Error, "try pulling") {
		t.Errorf("404: %s %q", rec.ErrorKind, rec.Error)
	}
	url := serve(t, "", 200).URL
	for model, ok := range map[string]bool{"llama3.2": true, "gemma4:4b": true, "gemma4": false, "qwen3": false} {
		c, _ := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: url}, Model: model})
		if err := c.Preflight(context.Background()); (err == nil) != ok || err != nil && !strings.Contains(err.Error(), "pull it first") {
			t.Errorf("%s: %v", model, err)
		}
	}
	c, _ := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: url}})
	if m, err := c.DiscoverModel(context.Background()); err != nil || m != "gemma4:4b" {
		t.Errorf("discover %q %v", m, err)
	}
}

// Against the simulator's /api/chat: an answer with exact counts, each
// fault under its kind, and an unknown model.
func TestAgainstSimulator(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	for fault, want := range map[string]loadgen.ErrorKind{"none": loadgen.ErrNone, "http_429": loadgen.ErrRateLimited,
		"http_503": loadgen.ErrServer, "error_in_stream": loadgen.ErrStreamError, "truncate": loadgen.ErrStreamTruncated,
		"malformed": loadgen.ErrProtocol} {
		c, err := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Headers: []string{"X-Sim-Fault: " + fault}}}, Model: srv.Config().Model, MaxTokens: 6})
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
		if want == loadgen.ErrNone && rec.ResponseModel != srv.Config().Model {
			t.Errorf("response model %q, want %q", rec.ResponseModel, srv.Config().Model)
		}
	}
	c, _ := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "qwen3"})
	if err := c.Preflight(context.Background()); err == nil || !strings.Contains(err.Error(), `"qwen3"`) {
		t.Errorf("unknown model: %v", err)
	}
}

// Against the simulator's Ollama profile, what the real server showed:
// eval_count counts an EOS never streamed (done_reason stop), the final
// object carries Ollama's timings (tailgate's E2E never below the total),
// a request beyond the queue gets the busy 503 (rate_limited), and there
// is no /metrics.
func TestAgainstSimulatorOllamaProfile(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Profile, cfg.Slots, cfg.MaxQueue = sim.ProfileOllama, 1, 1
	// The stall holds the two queued requests until the test cancels
	// them: a short stall let the first finish before the second was
	// admitted on a loaded CI machine, so two were never in flight.
	cfg.FixedTTFT, cfg.FixedITL, cfg.StallFor = 5*time.Millisecond, 2*time.Millisecond, time.Minute
	srv := simtest.Start(t, cfg)
	c, err := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: srv.Config().Model, MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	do := func() *loadgen.Record {
		rec := loadgen.NewRecord(time.Now())
		c.Do(context.Background(), &prompts.Prompt{Text: "hello there"}, rec)
		rec.Finalize()
		return rec
	}
	rec := do()
	if rec.ErrorKind != loadgen.ErrNone || rec.FinishReason != "stop" || len(rec.Chunks) != 5 || rec.OutputTokens != 6 {
		t.Fatalf("%s %q: finish %q, %d chunks, %d tokens: want stop, 5 chunks, 6 tokens (the EOS)", rec.ErrorKind, rec.Error, rec.FinishReason, len(rec.Chunks), rec.OutputTokens)
	}
	for i, ch := range rec.Chunks {
		if ch.Tokens != 1 {
			t.Errorf("chunk %d: %d tokens", i, ch.Tokens)
		}
	}
	st := rec.Server
	if st == nil || st.Total == 0 || st.Load == 0 || st.Prompt == 0 || st.Eval == 0 || st.Total > rec.End-rec.Sent {
		t.Errorf("server timings %+v for a request of %v", st, rec.End-rec.Sent)
	}
	// One running, one waiting (the slow stall fault holds both), the
	// third refused. The first request's handler returns a moment after
	// its client has read the answer: until then it counts against the
	// queue.
	waitFor(t, srv, "the first request's handler to return", func() bool { return srv.Pending() == 0 })
	slow, _ := ollama.New(ollama.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Headers: []string{"X-Sim-Fault: stall"}}}, Model: srv.Config().Model, MaxTokens: 6})
	holdCtx, release := context.WithCancel(context.Background())
	defer release()
	held := make(chan *loadgen.Record, 2)
	for range 2 {
		go func() {
			rec := loadgen.NewRecord(time.Now())
			slow.Do(holdCtx, &prompts.Prompt{Text: "hello there"}, rec)
			held <- rec
		}()
	}
	waitFor(t, srv, "two requests held (one running, one queued)", func() bool { return srv.Pending() == 2 })
	if r := do(); r.ErrorKind != loadgen.ErrRateLimited || r.Status != 503 || !strings.Contains(r.Error, "server busy") {
		t.Errorf("third request: %s %d %q, want rate_limited 503 server busy", r.ErrorKind, r.Status, r.Error)
	}
	release()
	for range 2 {
		if r := <-held; r.ErrorKind != loadgen.ErrCancelled {
			t.Errorf("held request: %s %q, want cancelled", r.ErrorKind, r.Error)
		}
	}
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/metrics: %d, want 404", resp.StatusCode)
	}
}

// waitFor blocks until cond holds, woken by the simulator's own events,
// failing the test after a minute.
func waitFor(t *testing.T, srv *simtest.Server, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := srv.Await(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
