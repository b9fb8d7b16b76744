package sim

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"
)

// rawRequest writes one HTTP/1.1 POST on conn.
func rawRequest(conn net.Conn, path, body string) error {
	_, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		path, len(body), body)
	return err
}

// TestCloseAfterResponse: a client that reuses the connection, as HTTP/1.1
// keep-alive allows (no Connection: close was sent, Keep-Alive even
// promises more), reads a complete first response and then finds the
// connection closed: its next request gets EOF or a reset, never a
// response. Without the mode the same connection serves the second request.
func TestCloseAfterResponse(t *testing.T) {
	for _, tc := range []struct {
		mode       CloseMode
		stream     bool
		wantClosed bool
	}{
		{CloseAfterStream, true, true},
		{CloseAfterStream, false, false},
		{CloseAfterAll, false, true},
		{CloseAfterAll, true, true},
		{CloseNever, true, false},
	} {
		t.Run(fmt.Sprintf("close=%q/stream=%v", tc.mode, tc.stream), func(t *testing.T) {
			cfg := fixedCfg(time.Millisecond, time.Millisecond)
			cfg.CloseAfter = tc.mode
			r := startSim(t, cfg)
			conn, err := net.Dial("tcp", r.Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			body := fmt.Sprintf(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"stream":%v}`, tc.stream)
			br := bufio.NewReader(conn)
			if err := rawRequest(conn, "/v1/chat/completions", body); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("first response: %v", err)
			}
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("first body cut: %v (%q)", err, got)
			}
			if resp.StatusCode != 200 || resp.Close || resp.Header.Get("Connection") != "" {
				t.Fatalf("first response: HTTP %d, Close %v, Connection %q: the server must not announce the close",
					resp.StatusCode, resp.Close, resp.Header.Get("Connection"))
			}
			if tc.stream && !strings.HasSuffix(string(got), doneEvent) {
				t.Errorf("stream does not end with [DONE]: %q", got)
			}
			if wantKA := tc.mode != CloseNever; (resp.Header.Get("Keep-Alive") != "") != wantKA {
				t.Errorf("Keep-Alive %q", resp.Header.Get("Keep-Alive"))
			}

			// Reuse the connection, as an HTTP client's idle pool would.
			err = rawRequest(conn, "/v1/chat/completions", body)
			var second *http.Response
			if err == nil {
				second, err = http.ReadResponse(br, nil)
			}
			if !tc.wantClosed {
				if err != nil {
					t.Fatalf("second request on a kept-alive connection: %v", err)
				}
				io.Copy(io.Discard, second.Body)
				second.Body.Close()
				return
			}
			if err == nil {
				t.Fatalf("second request on the reused connection got HTTP %d, want the connection closed", second.StatusCode)
			}
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE) {
				t.Errorf("second request: %v, want EOF or a reset", err)
			}
			waitIdle(t, r.Server)
			tr := r.Truth()
			if len(tr) != 1 || tr[0].ClosedConn.IsZero() || tr[0].ClosedConn.Before(tr[0].Arrived) {
				t.Errorf("truth %+v: want one request with ClosedConn set", tr)
			}
		})
	}
}

// A Go client pool survives the closes only by opening new connections:
// every request on the closing server still succeeds when sent one after
// another with a pause (the transport sees the FIN of an idle connection),
// and the server records one close per response.
func TestCloseAfterStreamGoClient(t *testing.T) {
	cfg := fixedCfg(time.Millisecond, time.Millisecond)
	cfg.CloseAfter = CloseAfterStream
	r := startSim(t, cfg)
	var conns sync.Map
	// The transport closes a pooled connection once its read loop has seen
	// the server's FIN (and marked it broken first), so a request after
	// that Close never takes it.
	closed := make(chan struct{}, 16)
	tr := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		conns.Store(c.LocalAddr().String(), true)
		return &closeSignal{Conn: c, closed: closed}, nil
	}}
	defer tr.CloseIdleConnections()
	c := &http.Client{Transport: tr}
	const n = 5
	for i := 0; i < n; i++ {
		res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 2, true, false), nil)
		if res.err != nil || res.readErr != nil || res.status != 200 {
			t.Fatalf("request %d: %v %v %d", i, res.err, res.readErr, res.status)
		}
		select {
		case <-closed:
		case <-time.After(10 * time.Second):
			t.Fatalf("request %d: the transport never closed its connection after the server's close", i)
		}
	}
	dialled := 0
	conns.Range(func(_, _ any) bool { dialled++; return true })
	if dialled != n {
		t.Errorf("%d connections dialled for %d requests, want one each", dialled, n)
	}
}

// TestLlamaCppMetricsFresh: a fresh server's exposition is byte for byte a
// fresh llama-server's.
func TestLlamaCppMetricsFresh(t *testing.T) {
	want, err := os.ReadFile("testdata/llamacpp-metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	cfg := fastBatch()
	cfg.Metrics = MetricsLlamaCpp
	r := startSim(t, cfg)
	c := testClient(t)
	resp, err := c.Get(r.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != string(want) {
		t.Errorf("fresh /metrics differs from llama-server's:\n got:\n%s\nwant:\n%s", got, want)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
}

// TestLlamaCppMetricsState: the series follow the engine: a mid-run scrape
// sees the running and deferred requests and their KV reservation; after
// the run the counters hold every prompt and generated token and one decode
// per engine step; the throughput gauges reset at each scrape.
func TestLlamaCppMetricsState(t *testing.T) {
	cfg := fastBatch()
	cfg.Slots = 2
	cfg.Metrics = MetricsLlamaCpp
	cfg.Tokenizer = TokenizerBytes4 // 40 bytes: 10 tokens
	r := startSim(t, cfg)
	c := testClient(t)
	const n, prompt, maxTokens = 5, 10, 100 // 100 steps of 2 ms each: ≥ 200 ms per request
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody(strings.Repeat("z", 40), maxTokens, true, false), nil)
		}()
	}
	waitFor(t, r.Server, "two running, three deferred", func() bool { return r.running() == 2 && r.waiting() == 3 })
	mid := scrape(t, c, r.URL)
	wg.Wait()
	waitIdle(t, r.Server)
	end := scrape(t, c, r.URL)
	again := scrape(t, c, r.URL)

	val := func(text, name string) float64 {
		v, ok := metricValue(t, text, "llamacpp:"+name, "")
		if !ok {
			t.Fatalf("no llamacpp:%s in\n%s", name, text)
		}
		return v
	}
	// The scrape and the gauge reads are not one instant: a request may
	// have moved on between them (each lasts ≥ 200 ms, the scrape < 1 ms).
	if p, d := val(mid, "requests_processing"), val(mid, "requests_deferred"); p != 2 || d != 3 {
		t.Errorf("mid-run processing %v deferred %v, want 2 and 3", p, d)
	}
	if kv := val(mid, "kv_cache_tokens"); kv != 2*(prompt+maxTokens) {
		t.Errorf("mid-run kv_cache_tokens %v, want %d", kv, 2*(prompt+maxTokens))
	}
	// Printed to 6 significant digits, as llama.cpp prints a double.
	if ratio, want := val(mid, "kv_cache_usage_ratio"), float64(2*(prompt+maxTokens))/float64(cfg.KVTokens); math.Abs(ratio-want) > want*1e-5 {
		t.Errorf("kv_cache_usage_ratio %v, want %v", ratio, want)
	}
	if v := val(end, "prompt_tokens_total"); v != n*prompt {
		t.Errorf("prompt_tokens_total %v, want %d", v, n*prompt)
	}
	if v := val(end, "tokens_predicted_total"); v != n*maxTokens {
		t.Errorf("tokens_predicted_total %v, want %d", v, n*maxTokens)
	}
	// Two slots: ≥ 3 rounds of 40 steps (5 requests, 2 at a time), fewer
	// if admissions overlap rounds; each step holds 1 or 2 sequences.
	decodes, perDecode := val(end, "n_decode_total"), val(end, "n_busy_slots_per_decode")
	if decodes < n*maxTokens/2 || decodes > n*maxTokens {
		t.Errorf("n_decode_total %v, want %d to %d", decodes, n*maxTokens/2, n*maxTokens)
	}
	if got := perDecode * decodes; got < n*maxTokens-0.5 || got > n*maxTokens+0.5 {
		t.Errorf("busy slots per decode %v × decodes %v = %v, want every token's step (%d)", perDecode, decodes, got, n*maxTokens)
	}
	if v := val(end, "tokens_predicted_seconds_total"); v < decodes*cfg.DecodeBase.Seconds()*0.999 {
		t.Errorf("tokens_predicted_seconds_total %v, want ≥ %v decodes × %v", v, decodes, cfg.DecodeBase)
	}
	if v := val(end, "predicted_tokens_seconds"); v <= 0 {
		t.Errorf("predicted_tokens_seconds %v after generation", v)
	}
	if v := val(again, "predicted_tokens_seconds"); v != 0 {
		t.Errorf("predicted_tokens_seconds %v on the next idle scrape, want 0 (reset by the scrape)", v)
	}
	if p, d := val(end, "requests_processing"), val(end, "requests_deferred"); p != 0 || d != 0 || val(end, "kv_cache_tokens") != 0 {
		t.Errorf("idle: processing %v deferred %v", p, d)
	}
	for _, line := range strings.Split(end, "\n") {
		if line != "" && !strings.HasPrefix(line, "llamacpp:") && !strings.HasPrefix(line, "# HELP llamacpp:") && !strings.HasPrefix(line, "# TYPE llamacpp:") {
			t.Errorf("line %q is not llama.cpp's", line)
		}
	}
}

// TestMetricsFromLoop: a scrape sent just after a chunk waits for the step
// in progress (200 ms) to end; without the mode it is answered at once.
func TestMetricsFromLoop(t *testing.T) {
	for _, fromLoop := range []bool{true, false} {
		t.Run(fmt.Sprintf("fromLoop=%v", fromLoop), func(t *testing.T) {
			cfg := fastBatch()
			cfg.DecodeBase = 200 * time.Millisecond
			cfg.MetricsFromLoop = fromLoop
			cfg.Metrics = MetricsLlamaCpp
			// On synctest's fake clock (server and client over in-memory
			// connections) the step boundaries are exact.
			synctest.Test(t, func(t *testing.T) {
				s, c, url := startPipeSim(t, cfg)
				first := make(chan struct{})
				done := make(chan result, 1)
				go func() { done <- doSignal(context.Background(), c, url, "loop", 3, first) }()
				<-first
				start := time.Now()
				scrape(t, c, url)
				took := time.Since(start)
				<-done
				waitIdle(t, s)
				tr := truthByID(t, s, "loop")
				if len(tr.Chunks) != 3 {
					t.Fatalf("%d chunks", len(tr.Chunks))
				}
				if fromLoop {
					// Answered at the next step boundary: the second chunk's.
					if end := start.Add(took); took != cfg.DecodeBase || !end.Equal(tr.Chunks[1].At) {
						t.Errorf("scrape took %v, ended %v from the next step's end: want it held to the step's end",
							took, end.Sub(tr.Chunks[1].At))
					}
				} else if took != 0 {
					t.Errorf("scrape took %v without the mode, want it at once", took)
				}
			})
		})
	}
}

// TestHTTPThreads: with every HTTP thread streaming, a scrape waits for a
// stream to finish, as on llama-server; with a thread free it does not.
func TestHTTPThreads(t *testing.T) {
	cfg := fixedCfg(0, 50*time.Millisecond)
	cfg.HTTPThreads = 2
	// On synctest's fake clock (server and client over in-memory
	// connections): a scrape's wait is exact.
	synctest.Test(t, func(t *testing.T) {
		s, c, url := startPipeSim(t, cfg)
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < 2; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				do(context.Background(), c, url, "/v1/chat/completions", chatBody("hi", 5, true, false), nil) // 200 ms
			}()
		}
		waitFor(t, s, "two streams in flight", func() bool { return s.InFlight() == 2 })
		scrape(t, c, url)
		took := time.Since(start)
		wg.Wait()
		waitIdle(t, s)
		firstEnd := time.Time{}
		for _, tr := range s.Truth() {
			if firstEnd.IsZero() || tr.End.Before(firstEnd) {
				firstEnd = tr.End
			}
		}
		if end := start.Add(took); end.Before(firstEnd) {
			t.Errorf("scrape answered %v before the first stream ended, with every thread busy", firstEnd.Sub(end))
		}
		t0 := time.Now()
		scrape(t, c, url)
		if d := time.Since(t0); d != 0 {
			t.Errorf("idle scrape took %v", d)
		}
	})
}

// TestEOSNotStreamed: the answer ends at an EOS token that is counted in
// usage but never streamed, as llama.cpp's does; finish_reason is "stop".
func TestEOSNotStreamed(t *testing.T) {
	for _, mode := range []Mode{ModeBatch, ModeFixed} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := fastBatch()
			cfg.Mode = mode
			cfg.EOSNotStreamed = true
			cfg.FinishWithLastChunk = true // ignored: the finish comes after the EOS step
			r := startSim(t, cfg)
			c := testClient(t)
			const maxTokens = 6
			res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", maxTokens, true, true),
				map[string]string{"X-Request-Id": "eos"})
			if res.err != nil || res.readErr != nil || res.status != 200 {
				t.Fatalf("%v %v %d", res.err, res.readErr, res.status)
			}
			streamed, finish, usage := 0, "", -1
			for _, e := range res.events {
				if e.data == "[DONE]" {
					continue
				}
				ch := parseChunk(t, e.data)
				streamed += len(strings.Fields(ch.contentText())) // one word per token
				if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != nil {
					if ch.contentText() != "" {
						t.Errorf("finish on a content chunk: %s", e.data)
					}
					finish = *ch.Choices[0].FinishReason
				}
				if ch.Usage != nil {
					usage = ch.Usage.CompletionTokens
				}
			}
			if streamed != maxTokens-1 || finish != "stop" || usage != streamed+1 {
				t.Errorf("streamed %d tokens, finish %q, usage completion_tokens %d: want %d, stop, %d",
					streamed, finish, usage, maxTokens-1, maxTokens)
			}
			waitIdle(t, r.Server)
			tr := truthByID(t, r.Server, "eos")
			if tr.OutputTokens != maxTokens-1 || tr.CompletionTokens != maxTokens || tr.FinishReason != "stop" {
				t.Errorf("truth output %d completion %d finish %q", tr.OutputTokens, tr.CompletionTokens, tr.FinishReason)
			}

			res = do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", maxTokens, false, false), nil)
			var body struct {
				Choices []struct {
					Message      struct{ Content string }
					FinishReason string `json:"finish_reason"`
				}
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			if err := json.Unmarshal(res.body, &body); err != nil || len(body.Choices) != 1 {
				t.Fatalf("%v: %s", err, res.body)
			}
			if n := len(strings.Fields(body.Choices[0].Message.Content)); n != maxTokens-1 ||
				body.Choices[0].FinishReason != "stop" || body.Usage.CompletionTokens != maxTokens {
				t.Errorf("non-streamed: %d words, finish %q, completion_tokens %d", n, body.Choices[0].FinishReason, body.Usage.CompletionTokens)
			}
		})
	}
}

// TestIgnoreStreamAndHTML: a streaming request answered with one JSON body
// (a server that ignores "stream"), and a 200 text/html page (a login-wall
// proxy), by header and by rule.
func TestIgnoreStreamAndHTML(t *testing.T) {
	cfg := fixedCfg(time.Millisecond, time.Millisecond)
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 4, true, true),
		map[string]string{"X-Sim-Fault": "ignore_stream", "X-Request-Id": "ign"})
	if res.status != 200 || !strings.HasPrefix(res.header.Get("Content-Type"), "application/json") || len(res.events) != 0 {
		t.Fatalf("HTTP %d %q events %d", res.status, res.header.Get("Content-Type"), len(res.events))
	}
	var body struct {
		Object  string
		Choices []struct{ Message struct{ Content string } }
		Usage   struct {
			CompletionTokens int `json:"completion_tokens"`
		}
	}
	if err := json.Unmarshal(res.body, &body); err != nil || body.Object != "chat.completion" ||
		body.Choices[0].Message.Content != " the of and to" || body.Usage.CompletionTokens != 4 {
		t.Errorf("%v: %s", err, res.body)
	}
	waitIdle(t, r.Server)
	if tr := truthByID(t, r.Server, "ign"); tr.Stream || tr.Fault != FaultIgnoreStream || len(tr.Chunks) != 0 {
		t.Errorf("truth %+v", tr)
	}

	if err := r.SetFaults([]FaultRule{{Kind: FaultHTML200, Every: 1}}); err != nil {
		t.Fatal(err)
	}
	res = do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 4, true, false), nil)
	if res.status != 200 || !strings.HasPrefix(res.header.Get("Content-Type"), "text/html") ||
		!strings.HasPrefix(string(res.body), "<!DOCTYPE html>") {
		t.Errorf("HTTP %d %q %q", res.status, res.header.Get("Content-Type"), res.body)
	}
	if _, err := ParseFaultRule("ignore_stream=1/3"); err != nil {
		t.Error(err)
	}
}

// TestProfileLlamaCpp: the profile turns on every llama.cpp behaviour at
// once, and an explicit setting wins over it.
func TestProfileLlamaCpp(t *testing.T) {
	s, err := New(Config{Profile: ProfileLlamaCpp, Slots: 4})
	if err != nil {
		t.Fatal(err)
	}
	got := s.Config()
	s.Close()
	if got.CloseAfter != CloseAfterStream || got.Metrics != MetricsLlamaCpp || got.HTTPThreads != 6 || got.Dialect != DialectLlamaCpp ||
		!got.MetricsFromLoop || !got.EOSNotStreamed {
		t.Errorf("profile config %+v", got)
	}
	s, err = New(Config{Profile: ProfileLlamaCpp, CloseAfter: CloseAfterAll, HTTPThreads: 32})
	if err != nil {
		t.Fatal(err)
	}
	got = s.Config()
	s.Close()
	if got.CloseAfter != CloseAfterAll || got.HTTPThreads != 32 {
		t.Errorf("explicit settings lost under the profile: %+v", got)
	}

	cfg := fastBatch()
	cfg.Profile = ProfileLlamaCpp
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 3, true, true), nil)
	if res.err != nil || res.readErr != nil || res.status != 200 {
		t.Fatalf("%v %v %d", res.err, res.readErr, res.status)
	}
	m := scrape(t, c, r.URL)
	if _, ok := metricValue(t, m, "llamacpp:tokens_predicted_total", ""); !ok || strings.Contains(m, "vllm:") {
		t.Errorf("profile /metrics:\n%s", m)
	}
	waitIdle(t, r.Server)
	tr := r.Truth()[0]
	if tr.ClosedConn.IsZero() || tr.FinishReason != "stop" || tr.CompletionTokens != tr.OutputTokens+1 {
		t.Errorf("profile truth %+v", tr)
	}
}

func TestModeConfigValidation(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Profile: "vllm"}, `profile "vllm"`},
		{Config{CloseAfter: "sometimes"}, `close after "sometimes"`},
		{Config{Metrics: "tgi"}, `metrics flavour "tgi"`},
		{Config{HTTPThreads: -1}, "HTTP threads -1"},
		{Config{Dialect: "tgi"}, `dialect "tgi"`},
		{Config{CloseDelay: -time.Second}, "close delay -1s"},
		{Config{PromptOverheadTokens: -2}, "prompt overhead tokens -2"},
		{Config{Tokenizer: "gpt2"}, `unknown tokenizer "gpt2"`},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want it to say %q", tc.cfg, err, tc.want)
		}
	}
}

// TestCloseDelay: with the close held back, a Go client that sends its next
// request at once reuses the doomed connection and that request fails, every
// time; the kept-alive control does not fail.
func TestCloseDelay(t *testing.T) {
	for _, mode := range []CloseMode{CloseAfterStream, CloseNever} {
		t.Run(fmt.Sprintf("close=%q", mode), func(t *testing.T) {
			cfg := fixedCfg(time.Millisecond, time.Millisecond)
			// Far longer than the client takes to send its next request,
			// even on a loaded machine.
			cfg.CloseAfter, cfg.CloseDelay = mode, 200*time.Millisecond
			r := startSim(t, cfg)
			c := testClient(t)
			failed := 0
			const n = 6
			for i := 0; i < n; i++ {
				res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 2, true, false), nil)
				if res.err != nil {
					failed++
					if msg := res.err.Error(); !strings.Contains(msg, "closed") && !strings.Contains(msg, "reset") && !strings.Contains(msg, "EOF") {
						t.Errorf("request %d: %v, want a closed or reset connection", i, res.err)
					}
				}
			}
			// After a failure the transport dials afresh, so at most every
			// other request can fail.
			want := 0
			if mode != CloseNever {
				want = n / 2
			}
			if failed != want {
				t.Errorf("%d of %d requests failed, want %d", failed, n, want)
			}
		})
	}
}

// keyPath lists every object key of a JSON document in document order, with
// its path ("choices.delta.content"), so two documents of the same shape
// give the same list whatever their values.
func keyPath(t *testing.T, doc string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(doc))
	var out []string
	next := func() json.Token {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("%v in %s", err, doc)
		}
		return tok
	}
	var walk func(prefix string)
	walk = func(prefix string) {
		switch next() {
		case json.Delim('{'):
			for dec.More() {
				path := prefix + next().(string)
				out = append(out, path)
				walk(path + ".")
			}
			next() // }
		case json.Delim('['):
			for dec.More() {
				walk(prefix)
			}
			next() // ]
		}
	}
	walk("")
	return out
}

func captureEvents(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile("testdata/llamacpp-chat-stream.txt")
	if err != nil {
		t.Fatal(err)
	}
	var evs []string
	for _, line := range strings.Split(string(raw), "\n") {
		if d, ok := strings.CutPrefix(line, "data: "); ok {
			evs = append(evs, d)
		}
	}
	return evs
}

// TestLlamaCppDialect: the stream has llama-server's shape, key for key in
// the captured order: no role chunk, content chunks, a finish chunk with an
// empty delta carrying usage and timings without stream_options, [DONE].
// With include_usage, usage and timings move to a "choices":[] chunk, as
// newer llama-server builds send them.
func TestLlamaCppDialect(t *testing.T) {
	capture := captureEvents(t)
	if len(capture) != 6 {
		t.Fatalf("capture has %d events", len(capture))
	}
	cfg := fastBatch()
	cfg.Dialect = DialectLlamaCpp
	r := startSim(t, cfg)
	c := testClient(t)
	res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hello there", 4, true, false),
		map[string]string{"X-Request-Id": "shape"})
	if res.err != nil || res.readErr != nil || res.status != 200 {
		t.Fatalf("%v %v %d", res.err, res.readErr, res.status)
	}
	if len(res.events) != len(capture) {
		t.Fatalf("%d events, the capture has %d:\n%v", len(res.events), len(capture), res.events)
	}
	for i := range capture {
		if capture[i] == "[DONE]" || res.events[i].data == "[DONE]" {
			if capture[i] != res.events[i].data {
				t.Errorf("event %d: %q, capture %q", i, res.events[i].data, capture[i])
			}
			continue
		}
		got, want := keyPath(t, res.events[i].data), keyPath(t, capture[i])
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("event %d keys\n got %v\nwant %v\n(%s)", i, got, want, res.events[i].data)
		}
	}
	var fin struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		}
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
			PromptTokens     int `json:"prompt_tokens"`
		}
		Timings struct {
			PromptN      int     `json:"prompt_n"`
			PredictedN   int     `json:"predicted_n"`
			PredictedMs  float64 `json:"predicted_ms"`
			PredictedPer float64 `json:"predicted_per_token_ms"`
		}
	}
	if err := json.Unmarshal([]byte(res.events[4].data), &fin); err != nil {
		t.Fatal(err)
	}
	// Predicted time runs from the first content chunk to the finish.
	waitIdle(t, r.Server)
	tr := truthByID(t, r.Server, "shape")
	span := float64(tr.Chunks[3].At.Sub(tr.Chunks[0].At)) / float64(time.Millisecond)
	if fin.Choices[0].FinishReason != "length" || fin.Usage.CompletionTokens != 4 || fin.Usage.PromptTokens != 2 ||
		fin.Timings.PromptN != 2 || fin.Timings.PredictedN != 4 ||
		fin.Timings.PredictedMs < span || fin.Timings.PredictedMs > span+50 ||
		math.Abs(fin.Timings.PredictedPer-fin.Timings.PredictedMs/4) > 1e-9 {
		t.Errorf("finish chunk (first to last chunk %.3f ms) %s", span, res.events[4].data)
	}

	res = do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hello there", 4, true, true), nil)
	if n := len(res.events); n != 7 {
		t.Fatalf("with include_usage: %d events, want 4 content, finish, usage, [DONE]", n)
	}
	finKeys := strings.Join(keyPath(t, res.events[4].data), " ")
	if strings.Contains(finKeys, "usage") || strings.Contains(finKeys, "timings") {
		t.Errorf("finish chunk with include_usage carries usage: %s", res.events[4].data)
	}
	u := parseChunk(t, res.events[5].data)
	if len(u.Choices) != 0 || u.Usage == nil || u.Usage.CompletionTokens != 4 || !strings.Contains(res.events[5].data, `"timings":{"prompt_n":2,`) {
		t.Errorf("usage chunk %s", res.events[5].data)
	}
}

// closeSignal is a connection that tells closed when it is first closed.
type closeSignal struct {
	net.Conn
	once   sync.Once
	closed chan<- struct{}
}

func (c *closeSignal) Close() error {
	c.once.Do(func() { c.closed <- struct{}{} })
	return c.Conn.Close()
}
