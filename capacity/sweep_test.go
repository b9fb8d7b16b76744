package capacity

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// The simulator of the sweep tests, and the SLO-max derived from its
// batching model (sim/doc.go).
//
// Prefill costs nothing (PrefillBase = PrefillPerToken = 0) and the 64
// slots and the KV cache never bind, so a step with n running sequences
// lasts s(n) = D0 + d·n, D0 = 2 ms, d = 0.5 ms, and every running sequence
// gets one token per step. A request of N = 16 tokens gets its first at
// the end of the step that admits it and one more each step after, so
// TPOT = (E2E − TTFT)/(N − 1) is the mean step over its last 15 steps,
// ≈ s(n). The objective TPOT ≤ X = 10 ms for 95% of requests holds while
// n ≤ n* = (X − D0)/d = 16.
//
// Closed loop, c workers: each request runs N steps, then its worker's next
// request arrives while the next step has begun and waits about one step,
// so n ≈ c·N/(N+1) and c* lies between 16 (n = c) and 17 (n = 16/17·c):
// derived SLO-max c16.
//
// Open loop, constant arrivals λ: by Little's law n = λ·N·s (each request
// runs N steps), so s = D0 + d·λ·N·s, s = D0 / (1 − λ·N·d), and s ≤ X
// while λ ≤ (1 − D0/X) / (N·d) = 0.8 / (16 × 0.5 ms) = 100 req/s: derived
// SLO-max 100 req/s (saturation, s → ∞, at 1/(N·d) = 125 req/s).
//
// The knee: E2E ≈ N·s, so open loop E2E = N·D0/(1 − λ·N·d), whose
// elasticity against throughput λ is λ·N·d/(1 − λ·N·d): above 1 from
// λ = 1/(2·N·d) = 62.5 req/s (where E2E has doubled from unloaded). The
// knee is the lower level of the first pair of levels run whose slope
// passes 1, so the level at or below 62.5 req/s next to one above it.
// Closed loop E2E = N·(D0 + d·c) and throughput c/E2E give elasticity
// d·c/D0 (the share of the step that grows with c over the fixed part):
// above 1 from c = D0/d = 4, the bottom of the range.
const (
	outTokens   = 16
	derivedRate = 100.0
	derivedConc = 16.0
	// derivedKneeRate is 1/(2·N·d).
	derivedKneeRate = 62.5
)

func simConfig() sim.Config {
	c := sim.DefaultConfig()
	c.PrefillBase, c.PrefillPerToken = 0, 0
	c.DecodeBase, c.DecodePerSeq = 2*time.Millisecond, 500*time.Microsecond
	c.TruthLimit = -1
	return c
}

const tpotSLO = `kind: SLO
name: sweep-test
owner: capacity
objectives:
  - {name: tpot, metric: tpot, threshold: 10ms, target: 95%}
  - {name: errors, metric: error_rate, threshold: 1%}
`

func sweepConfig(t *testing.T, srv *simtest.Server, search Search) Config {
	t.Helper()
	spec, err := slo.ParseSpec("slo.yaml", []byte(tpotSLO))
	if err != nil {
		t.Fatal(err)
	}
	c := simClient(t, srv, outTokens)
	return Config{Client: c, SLO: spec, Search: search, Arrival: loadgen.ArrivalConstant, Seed: 1,
		Source: func() loadgen.Source {
			return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hello there"}}
		},
		Warmup: 500 * time.Millisecond, MinDuration: time.Second, MaxDuration: 15 * time.Second,
		Timeout: 10 * time.Second, Grace: 2 * time.Second,
		// The test machine is shared: a late send is the machine's, and
		// intended-start timing charges it to the level anyway.
		Validity:  warnOnly(),
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 250 * time.Millisecond, Dial: srv.Dial},
		Out:       results.Dir(filepath.Join(t.TempDir(), "sweep")), CurrentRate: 40,
		Growth: &Growth{PerMonth: 0.08, Text: "8%/month"}}
}

// simClient is an OpenAI client of srv, over its pipes when it has them
// (simtest.StartPipe).
func simClient(t *testing.T, srv *simtest.Server, maxTokens int) *openai.Client {
	t.Helper()
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL, Transport: transport.Config{Dial: srv.Dial}}, Model: "sim-llama-8b", MaxTokens: maxTokens})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol*want {
		t.Errorf("%s: found %g, derived %g: more than %.0f%% off", what, got, want, 100*tol)
	} else {
		t.Logf("%s: found %g, derived %g (%+.1f%%)", what, got, want, 100*(got/want-1))
	}
}

func warnOnly() *slo.Validity {
	v := slo.DefaultValidity()
	v.DistortionWarns = true
	return &v
}
