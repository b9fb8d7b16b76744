package pipeline

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// A run against the simulator with two data-parallel engines, engine 1
// restarted mid-run (drained, its counters back to zero). The server's
// token and queue figures in summary.json's telemetry are exactly what the
// simulator saw: nothing was lost to the restart, and the sum over the
// engines, which fell at the restart, is not mistaken for a server reset.
//
// In a synctest bubble over pipes: the restart comes exactly after the 40th
// request, however slow the machine (on the wall clock a busy CI machine
// once let the run end first).
func TestTwoEnginesOneRestartedSummaryTelemetry(t *testing.T) {
	synctest.Test(t, testTwoEnginesOneRestarted)
}

func testTwoEnginesOneRestarted(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Engines, cfg.Slots = 2, 1 // one slot each: bursts of the Poisson arrivals queue
	cfg.PrefillBase, cfg.PrefillPerToken = time.Millisecond, 0
	cfg.DecodeBase, cfg.DecodePerSeq = 2*time.Millisecond, 0
	srv := simtest.StartPipe(t, cfg)
	client, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Dial: srv.Dial}},
		Model: cfg.Model, MaxTokens: 6})
	if err != nil {
		t.Fatal(err)
	}
	dir := results.Dir(t.TempDir())
	sp := Spec{Client: client, Out: dir,
		Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c", Text: "count the engines please"}},
		Options: loadgen.Options{Arrival: loadgen.ArrivalPoisson, Seed: 3, Stages: []loadgen.Stage{
			{Name: "idle", Rate: 0, Duration: 300 * time.Millisecond}, // the first scrape before any request
			{Name: "load", Rate: 40, Duration: 1500 * time.Millisecond},
		}},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 100 * time.Millisecond, Dial: srv.Dial},
	}
	ctx := context.Background()
	// Engine 1 restarts 1 s into the load (once the server has seen 40
	// requests, however slow the run was to start): it has about 20
	// requests behind it, more than it can take in the 0.5 s left, so its
	// fall shows at whichever scrape comes next.
	restarted := make(chan time.Time, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		srv.Await(wctx, func() bool { return len(srv.Truth()) >= 40 })
		if err := srv.RestartEngine(ctx, 1); err != nil {
			t.Errorf("restart: %v", err)
		}
		restarted <- time.Now()
	}()
	res, err := Run(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	if at := <-restarted; at.After(res.Info.Started.Add(res.Info.Elapsed)) {
		t.Fatalf("engine 1 restarted after the run ended (%v)", at)
	}

	// What the simulator saw: every request, its prompt and output tokens,
	// and its time in the queue.
	var n, prompt, output int
	var queueS float64
	for _, tr := range srv.Truth() {
		if tr.Status != 200 || tr.End.IsZero() {
			t.Fatalf("request %s: status %d, end %v", tr.ID, tr.Status, tr.End)
		}
		n++
		prompt += tr.PromptTokens
		output += tr.OutputTokens
		queueS += tr.Admitted.Sub(tr.Arrived).Seconds()
	}
	if n < 50 || int64(n) != res.Summary.Requests.OK {
		t.Fatalf("simulator saw %d requests, client %d ok", n, res.Summary.Requests.OK)
	}

	raw, err := os.ReadFile(dir.Path(results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Telemetry struct {
			PromptTokens     float64 `json:"prompt_tokens"`
			GenerationTokens float64 `json:"generation_tokens"`
			CounterResets    int     `json:"counter_resets"`
			ScrapeErrors     int     `json:"scrape_errors"`
			QueueDelay       struct {
				Count  uint64  `json:"count"`
				MeanMs float64 `json:"mean_ms"`
			} `json:"queue_delay"`
		} `json:"telemetry"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	tel := doc.Telemetry
	t.Logf("simulator: %d requests, %d prompt and %d output tokens, queue mean %.4f ms; summary.json telemetry: %+v",
		n, prompt, output, 1000*queueS/float64(n), tel)
	if tel.GenerationTokens != float64(output) || tel.PromptTokens != float64(prompt) {
		t.Errorf("telemetry tokens %v prompt, %v generation; the simulator saw %d and %d", tel.PromptTokens, tel.GenerationTokens, prompt, output)
	}
	if tel.QueueDelay.Count != uint64(n) || math.Abs(tel.QueueDelay.MeanMs-1000*queueS/float64(n)) > 1e-6 {
		t.Errorf("telemetry queue delay %d requests, mean %v ms; the simulator saw %d, mean %v ms",
			tel.QueueDelay.Count, tel.QueueDelay.MeanMs, n, 1000*queueS/float64(n))
	}
	// Engine 1's queue, TTFT and e2e histograms, its two token counters
	// and its prefix-cache queries fell at the restart (its prefix-cache
	// hits stay 0: these prompts are shorter than a block).
	if tel.CounterResets != 6 || tel.ScrapeErrors != 0 {
		t.Errorf("counter resets %d (want 6: engine 1's six series), scrape errors %d", tel.CounterResets, tel.ScrapeErrors)
	}
}
