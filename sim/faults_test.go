package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func TestFaults(t *testing.T) {
	const maxTokens = 10 // mid-stream faults fire after 5 content chunks
	const stallFor = 150 * time.Millisecond
	modes := map[Mode]Config{ModeBatch: fastBatch(), ModeFixed: fixedCfg(2*time.Millisecond, 2*time.Millisecond)}
	for mode, cfg := range modes {
		cfg.StallFor = stallFor
		// Each request on a server of its own on synctest's fake clock
		// (over in-memory connections): its timing is exact.
		run := func(t *testing.T, kind string, stream bool, timeout time.Duration) (res result, tr Truth) {
			synctest.Test(t, func(t *testing.T) {
				s, c, url := startPipeSim(t, cfg)
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				defer cancel()
				id := fmt.Sprintf("%s-%s-%v", mode, kind, stream)
				res = do(ctx, c, url, "/v1/chat/completions", chatBody("hello", maxTokens, stream, true),
					map[string]string{"X-Sim-Fault": kind, "X-Request-Id": id})
				waitIdle(t, s)
				tr = truthByID(t, s, id)
				if k, _, _ := strings.Cut(kind, "="); tr.Fault != FaultKind(k) {
					t.Errorf("truth fault %q", tr.Fault)
				}
			})
			return res, tr
		}
		done := func(res result) bool {
			return len(res.events) > 0 && res.events[len(res.events)-1].data == "[DONE]"
		}
		t.Run(string(mode), func(t *testing.T) {
			t.Run("stall", func(t *testing.T) {
				res, tr := run(t, "stall", true, 5*time.Second)
				ce := contentEvents(t, res.events)
				if len(ce) != maxTokens || !done(res) {
					t.Fatalf("%d content events, done %v", len(ce), done(res))
				}
				if d := ce[0].at.Sub(res.sent); d < stallFor {
					t.Errorf("TTFT %v, want ≥ %v", d, stallFor)
				}
				// The role chunk is not held back.
				if d := res.events[0].at.Sub(res.sent); d != 0 {
					t.Errorf("role chunk after %v", d)
				}
				if tr.Outcome != "ok" {
					t.Errorf("outcome %q", tr.Outcome)
				}
			})
			t.Run("stall with duration", func(t *testing.T) {
				res, _ := run(t, "stall=300ms", true, 5*time.Second)
				if ce := contentEvents(t, res.events); ce[0].at.Sub(res.sent) < 300*time.Millisecond {
					t.Errorf("TTFT %v, want ≥ 300ms", ce[0].at.Sub(res.sent))
				}
			})
			t.Run("stall_mid", func(t *testing.T) {
				res, tr := run(t, "stall_mid", true, 5*time.Second)
				ce := contentEvents(t, res.events)
				if len(ce) != maxTokens || !done(res) {
					t.Fatalf("%d content events, done %v", len(ce), done(res))
				}
				for k := 1; k < len(ce); k++ {
					gap := tr.Chunks[k].At.Sub(tr.Chunks[k-1].At)
					if k == maxTokens/2 && gap < stallFor {
						t.Errorf("gap before chunk %d is %v, want ≥ %v", k, gap, stallFor)
					}
					if k != maxTokens/2 && gap > stallFor/2 {
						t.Errorf("gap before chunk %d is %v, want short", k, gap)
					}
				}
			})
			for _, st := range []struct {
				kind   string
				status int
			}{{"http_429", 429}, {"http_503", 503}} {
				t.Run(st.kind, func(t *testing.T) {
					res, tr := run(t, st.kind, true, 5*time.Second)
					var e struct {
						Error struct {
							Code int `json:"code"`
						} `json:"error"`
					}
					if res.status != st.status || res.header.Get("Retry-After") != "1" ||
						json.Unmarshal(res.body, &e) != nil || e.Error.Code != st.status {
						t.Errorf("status %d body %s", res.status, res.body)
					}
					if tr.Status != st.status || tr.Outcome != "fault" || len(tr.Chunks) != 0 {
						t.Errorf("truth %+v", tr)
					}
				})
			}
			t.Run("truncate", func(t *testing.T) {
				res, tr := run(t, "truncate", true, 5*time.Second)
				if !errors.Is(res.readErr, io.ErrUnexpectedEOF) {
					t.Errorf("read error %v, want unexpected EOF", res.readErr)
				}
				if ce := contentEvents(t, res.events); len(ce) != maxTokens/2 {
					t.Errorf("%d content events before the cut, want %d", len(ce), maxTokens/2)
				}
				if done(res) || strings.Contains(fmt.Sprint(res.events), "usage") {
					t.Errorf("truncated stream has an end: %v", res.events)
				}
				if tr.Outcome != "fault" || len(tr.Chunks) != maxTokens/2 || tr.End.IsZero() {
					t.Errorf("truth outcome %q chunks %d", tr.Outcome, len(tr.Chunks))
				}
			})
			t.Run("truncate non-streaming", func(t *testing.T) {
				res, _ := run(t, "truncate", false, 5*time.Second)
				if !errors.Is(res.readErr, io.ErrUnexpectedEOF) || json.Valid(res.body) {
					t.Errorf("read error %v body %q", res.readErr, res.body)
				}
			})
			t.Run("malformed", func(t *testing.T) {
				res, tr := run(t, "malformed", true, 5*time.Second)
				bad := 0
				for i, e := range res.events {
					if e.data != "[DONE]" && !json.Valid([]byte(e.data)) {
						bad++
						if n := len(contentEvents(t, res.events[:i])); n != maxTokens/2 {
							t.Errorf("malformed event after %d content events", n)
						}
					}
				}
				if bad != 1 || !done(res) || len(contentEvents(t, res.events)) != maxTokens {
					t.Errorf("%d malformed events, done %v: %v", bad, done(res), res.events)
				}
				if tr.Outcome != "fault" {
					t.Errorf("outcome %q", tr.Outcome)
				}
			})
			t.Run("error_in_stream", func(t *testing.T) {
				res, tr := run(t, "error_in_stream", true, 5*time.Second)
				n := len(res.events)
				if n < 2 || !done(res) || res.status != 200 {
					t.Fatalf("status %d events %v", res.status, res.events)
				}
				ch := parseChunk(t, res.events[n-2].data)
				if ch.Error == nil || ch.Error.Code != 500 || ch.Error.Message == "" {
					t.Errorf("error event %s", res.events[n-2].data)
				}
				if ce := contentEvents(t, res.events); len(ce) != maxTokens/2 {
					t.Errorf("%d content events before the error", len(ce))
				}
				if tr.Outcome != "fault" {
					t.Errorf("outcome %q", tr.Outcome)
				}
			})
			t.Run("error_in_stream non-streaming", func(t *testing.T) {
				if res, _ := run(t, "error_in_stream", false, 5*time.Second); res.status != 500 {
					t.Errorf("status %d", res.status)
				}
			})
			t.Run("empty", func(t *testing.T) {
				res, tr := run(t, "empty", true, 5*time.Second)
				if ce := contentEvents(t, res.events); len(ce) != 0 || !done(res) || res.status != 200 {
					t.Errorf("status %d, %d content events, done %v: %v", res.status, len(ce), done(res), res.events)
				}
				if !strings.Contains(fmt.Sprint(res.events), `"completion_tokens":0`) {
					t.Errorf("usage does not say 0 completion tokens: %v", res.events)
				}
				if tr.Outcome != "ok" || tr.CompletionTokens != 0 || len(tr.Chunks) != 0 {
					t.Errorf("truth outcome %q, %d completion tokens, %d chunks", tr.Outcome, tr.CompletionTokens, len(tr.Chunks))
				}
			})
			t.Run("empty non-streaming", func(t *testing.T) {
				res, _ := run(t, "empty", false, 5*time.Second)
				if res.status != 200 || !strings.Contains(string(res.body), `"completion_tokens":0`) || !strings.Contains(string(res.body), `"content":""`) {
					t.Errorf("status %d body %s", res.status, res.body)
				}
			})
			t.Run("hang", func(t *testing.T) {
				res, tr := run(t, "hang", true, 200*time.Millisecond)
				if !errors.Is(res.err, context.DeadlineExceeded) {
					t.Errorf("err %v, want the client's deadline", res.err)
				}
				if el := tr.End.Sub(tr.Arrived); el != 200*time.Millisecond {
					t.Errorf("hang handler took %v to notice the client left at 200ms", el)
				}
				if tr.Status != 0 || tr.End.IsZero() || !tr.Headers.IsZero() {
					t.Errorf("truth %+v", tr)
				}
			})
		})
	}
}

// StallAll holds every stream, running and new, for the duration. Server
// and clients run on synctest's fake clock (over in-memory connections), so
// every instant is exact.
func TestStallAll(t *testing.T) {
	const stall = 300 * time.Millisecond
	modes := map[Mode]Config{ModeFixed: fixedCfg(5*time.Millisecond, 10*time.Millisecond), ModeBatch: fastBatch()}
	for mode, cfg := range modes {
		t.Run(string(mode), func(t *testing.T) {
			if mode == ModeBatch {
				cfg.DecodeBase = 10 * time.Millisecond
			}
			synctest.Test(t, func(t *testing.T) {
				s, c, url := startPipeSim(t, cfg)
				var wg sync.WaitGroup
				results := make([]result, 5)
				start := time.Now()
				for i := 0; i < 4; i++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						results[i] = do(context.Background(), c, url, "/v1/chat/completions", chatBody("x", 50, true, false), nil)
					}()
				}
				// Mid-stream: 4 or 5 of the 50 chunks out.
				time.Sleep(52 * time.Millisecond)
				stallAt := time.Now()
				s.StallAll(stall)
				if !s.Stalled() {
					t.Error("Stalled() false during a stall")
				}
				time.Sleep(100 * time.Millisecond) // the late request arrives 100 ms into the stall
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[4] = do(context.Background(), c, url, "/v1/chat/completions", chatBody("x", 5, true, false), nil)
				}()
				wg.Wait()
				stallEnd := stallAt.Add(stall)
				for i, res := range results[:4] {
					ce := contentEvents(t, res.events)
					if len(ce) != 50 {
						t.Fatalf("stream %d: %d chunks", i, len(ce))
					}
					maxGap := time.Duration(0)
					for k := 1; k < len(ce); k++ {
						maxGap = max(maxGap, ce[k].at.Sub(ce[k-1].at))
						if ce[k].at.After(stallAt) && ce[k].at.Before(stallEnd) {
							t.Errorf("stream %d: chunk %d at +%v, inside the stall [+%v, +%v]", i, k,
								ce[k].at.Sub(start), stallAt.Sub(start), stallEnd.Sub(start))
						}
					}
					// The chunk due next comes the stall's length late.
					if maxGap < stall || maxGap > stall+cfg.FixedITL+cfg.DecodeBase+cfg.PrefillBase {
						t.Errorf("stream %d: largest gap %v, want the stall %v and at most a step more", i, maxGap, stall)
					}
				}
				late := results[4]
				if len(late.events) == 0 {
					t.Fatal("late request got nothing")
				}
				if late.events[0].at.Before(stallEnd) {
					t.Errorf("request arriving during the stall got its first event %v before the stall ended",
						stallEnd.Sub(late.events[0].at))
				}
			})
		})
	}
}

// Config.StallAt freezes the server once, StallAt after the first request.
func TestStallAt(t *testing.T) {
	cfg := fixedCfg(0, 10*time.Millisecond)
	cfg.StallAt = 100 * time.Millisecond
	cfg.StallFor = 200 * time.Millisecond
	synctest.Test(t, func(t *testing.T) { // a fake clock: the instants are exact
		_, c, url := startPipeSim(t, cfg)
		res := do(context.Background(), c, url, "/v1/chat/completions", chatBody("x", 40, true, false), nil)
		ce := contentEvents(t, res.events)
		var maxGap time.Duration
		var at time.Duration
		for k := 1; k < len(ce); k++ {
			if g := ce[k].at.Sub(ce[k-1].at); g > maxGap {
				maxGap, at = g, ce[k-1].at.Sub(res.sent)
			}
		}
		// The chunk due at +100 ms or the one after it comes 200 ms late.
		if maxGap < 200*time.Millisecond || maxGap > 210*time.Millisecond || at < 90*time.Millisecond || at > 100*time.Millisecond {
			t.Errorf("largest gap %v starting at +%v, want 200–210ms at +90–100ms", maxGap, at)
		}
		// Only once.
		res = do(context.Background(), c, url, "/v1/chat/completions", chatBody("x", 40, true, false), nil)
		if el := res.events[len(res.events)-1].at.Sub(res.sent); el != 390*time.Millisecond {
			t.Errorf("second request took %v, want 39 × 10 ms: stalled again?", el)
		}
	})
}

func TestGateShift(t *testing.T) {
	// The gate is timer logic alone: a fake clock makes every instant exact.
	synctest.Test(t, func(t *testing.T) {
		g := newGate(time.Now())
		// No stall: returns at due.
		due := time.Now().Add(20 * time.Millisecond)
		eff, ok := g.sleepUntil(due, nil, nil, nil)
		if !ok || !eff.Equal(due) || !time.Now().Equal(due) {
			t.Errorf("plain sleep: eff %v due %v, now %v", eff, due, time.Now())
		}
		// A stall opening during the wait pushes the deadline by its length.
		start := time.Now()
		due = start.Add(50 * time.Millisecond)
		time.AfterFunc(10*time.Millisecond, func() { g.stall(100 * time.Millisecond) })
		eff, ok = g.sleepUntil(due, nil, nil, nil)
		if el := time.Since(start); !ok || el != 150*time.Millisecond {
			t.Errorf("shifted sleep took %v, want 150ms", el)
		}
		if d := eff.Sub(due); d != 100*time.Millisecond {
			t.Errorf("effective due shifted by %v, want 100ms", d)
		}
		// A past due inside an open stall waits for the stall's end.
		g.stall(50 * time.Millisecond)
		start = time.Now()
		g.sleepUntil(start.Add(-time.Second), nil, nil, nil)
		if el := time.Since(start); el != 50*time.Millisecond {
			t.Errorf("past due during a stall returned after %v, want 50ms", el)
		}
		// stop ends the wait.
		stop := make(chan struct{})
		close(stop)
		if _, ok := g.sleepUntil(time.Now().Add(time.Hour), stop, nil, nil); ok {
			t.Error("stop did not end the wait")
		}
	})
}

func TestMetrics(t *testing.T) {
	cfg := fastBatch()
	cfg.Model = "metric-model"
	cfg.Tokenizer = TokenizerBytes4 // 40 bytes: 10 tokens
	r := startSim(t, cfg)
	// Utilization over every interval between scrapes, however short, so
	// that no scrape waits out minUtilWindow (TestUtilizationWindow has it).
	r.busy.mu.Lock()
	r.busy.window = time.Nanosecond
	r.busy.mu.Unlock()
	c := testClient(t)
	m := scrape(t, c, r.URL)
	if v, ok := metricValue(t, m, "DCGM_FI_DEV_FB_USED", ""); !ok || v != cfg.WeightsMiB {
		t.Errorf("idle FB_USED %v, want weights %v", v, cfg.WeightsMiB)
	}
	if v, _ := metricValue(t, scrape(t, c, r.URL), "DCGM_FI_DEV_GPU_UTIL", ""); v != 0 {
		t.Errorf("idle GPU util %v", v)
	}

	var wg sync.WaitGroup
	stop := make(chan struct{})
	var busyFB float64
	wg.Add(1)
	go func() { // scrape mid-run: 100 steps of 2 ms left for it
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := r.Await(ctx, func() bool { return r.running() == 5 }); err != nil {
			t.Errorf("waiting for 5 running: %v", err)
			return
		}
		busyFB, _ = metricValue(t, scrape(t, c, r.URL), "DCGM_FI_DEV_FB_USED", "")
		<-stop
	}()
	var inner sync.WaitGroup
	for i := 0; i < 5; i++ {
		inner.Add(1)
		go func() {
			defer inner.Done()
			do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody(strings.Repeat("z", 40), 100, true, false), nil)
		}()
	}
	inner.Wait()
	close(stop)
	wg.Wait()
	waitIdle(t, r.Server)
	if want := cfg.WeightsMiB + 5*110*float64(cfg.KVBytesPerToken)/(1<<20); busyFB != want {
		t.Errorf("FB_USED mid-run %v, want %v", busyFB, want)
	}

	m = scrape(t, c, r.URL)
	lbl := `model_name="metric-model"`
	for _, name := range []string{"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
		"vllm:request_queue_time_seconds_bucket", "vllm:time_to_first_token_seconds_bucket",
		"vllm:e2e_request_latency_seconds_bucket", "vllm:inter_token_latency_seconds_bucket",
		"vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:request_success_total"} {
		if _, ok := metricValue(t, m, name, lbl); !ok {
			t.Errorf("no %s{%s}", name, lbl)
		}
	}
	for _, name := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"} {
		if _, ok := metricValue(t, m, name, `gpu="0"`); !ok {
			t.Errorf("no %s", name)
		}
	}
	check := func(name, lbl string, want float64) {
		if v, _ := metricValue(t, m, name, lbl); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	check("vllm:prompt_tokens_total", "", 5*10)
	check("vllm:generation_tokens_total", "", 5*100)
	check("vllm:request_success_total", `finished_reason="length"`, 5)
	check("vllm:time_to_first_token_seconds_count", "", 5)
	check("vllm:e2e_request_latency_seconds_count", "", 5)
	check("vllm:inter_token_latency_seconds_count", "", 5*99)
	check("vllm:num_requests_running", "", 0)
	check("vllm:kv_cache_usage_perc", "", 0)
	if v, _ := metricValue(t, m, "DCGM_FI_DEV_GPU_UTIL", ""); v <= 0 || v > 100 {
		t.Errorf("GPU util %v after a busy spell", v)
	}
	if !strings.Contains(m, "# TYPE vllm:time_to_first_token_seconds histogram") {
		t.Error("TTFT is not a histogram")
	}
}

// Utilization is the busy share of the time since the previous reading,
// over at least minUtilWindow: a reading sooner repeats the last value.
func TestUtilizationWindow(t *testing.T) {
	t0 := time.Unix(1000, 0)
	b := newBusyMeter(t0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	if u := b.utilization(at(50 * time.Millisecond)); u != 0 {
		t.Errorf("before the first window: %v, want the initial 0", u)
	}
	b.add(30 * time.Millisecond) // an engine step
	if u := b.utilization(at(100 * time.Millisecond)); u != 0.3 {
		t.Errorf("first window: %v, want 0.3", u)
	}
	b.begin(at(150 * time.Millisecond)) // a fixed-mode request, still running
	if u := b.utilization(at(180 * time.Millisecond)); u != 0.3 {
		t.Errorf("80 ms after the last reading: %v, want the last value 0.3", u)
	}
	if u := b.utilization(at(200 * time.Millisecond)); u != 0.5 {
		t.Errorf("second window: %v, want 0.5", u)
	}
	b.end(at(250 * time.Millisecond))
	if u := b.utilization(at(400 * time.Millisecond)); u != 0.25 {
		t.Errorf("third window: %v, want 0.25", u)
	}
}

// Close ends everything in flight, hanging requests included, and leaves no
// goroutine behind.
func TestCloseNoLeak(t *testing.T) {
	for _, mode := range []Mode{ModeBatch, ModeFixed} {
		t.Run(string(mode), func(t *testing.T) {
			before := runtime.NumGoroutine()
			cfg := fastBatch()
			if mode == ModeFixed {
				cfg = fixedCfg(time.Millisecond, 5*time.Millisecond)
			}
			r, err := Start(cfg, "")
			if err != nil {
				t.Fatal(err)
			}
			tr := testClientNoCleanup()
			var wg sync.WaitGroup
			for _, f := range []string{"hang", "none", "stall"} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					do(context.Background(), tr, r.URL, "/v1/chat/completions", chatBody("x", 5000, true, false),
						map[string]string{"X-Sim-Fault": f})
				}()
			}
			// Close comes once each is where it would hang on: hanging,
			// stalled after its headers, streaming.
			waitFor(t, r.Server, "3 under way", func() bool {
				n := 0
				for _, tr := range r.Truth() {
					switch {
					case tr.Fault == FaultHang && tr.Outcome == "fault",
						tr.Fault == FaultStall && !tr.Headers.IsZero(),
						tr.Fault == FaultNone && len(tr.Chunks) > 0:
						n++
					}
				}
				return n == 3
			})
			closed := make(chan error, 1)
			go func() { closed <- r.Close() }()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("Close: %v", err)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Close did not return")
			}
			wg.Wait()
			tr.CloseIdleConnections()
			deadline := time.Now().Add(3 * time.Second)
			for runtime.NumGoroutine() > before {
				if time.Now().After(deadline) {
					buf := make([]byte, 1<<16)
					t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
				}
				// A goroutine's exit has no event to wait on (goleak
				// polls the same way).
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// A client that stops reading leaves its handler blocked in Write; Close
// must still return at once. On synctest's fake clock, over an unbuffered
// in-memory connection: the handler blocks in its first Write.
func TestCloseWithStuckClient(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := DefaultConfig()
		cfg.Mode = ModeFixed // zero delay: writes at once
		r, ln := startPipe(t, cfg)
		conn, err := ln.Dial(context.Background(), "", "")
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		body := `{"messages":[{"role":"user","content":"x"}],"max_tokens":10000000,"stream":true}`
		go fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		synctest.Wait() // every goroutine blocked: the handler in Write, the client not reading
		if r.InFlight() != 1 {
			t.Fatalf("%d requests in flight, want the stuck one", r.InFlight())
		}
		start := time.Now()
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		if el := time.Since(start); el != 0 {
			t.Errorf("Close took %v", el)
		}
		if err := r.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	})
}
