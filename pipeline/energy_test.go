package pipeline

import (
	"context"
	"encoding/json"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// Energy per token against a server whose energy is known: the simulated
// board draws nothing idle and 300 W busy, and its /metrics is wrapped to
// record every energy counter it serves. The run's energy is the increase
// between the first and the last sample it counted (telemetry.jsonl says
// which, and when they were taken): the joules, the tokens of the same
// window, the joules per token and the cost per million tokens at a given
// GPU-hour price agree with what the server served within 1%.
func TestEnergyAgainstTheSimulatorsCounter(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.GPUIdleWatts, cfg.GPUMaxWatts = 0, 300
	srv := simtest.Start(t, cfg)
	served := &servedEnergy{h: srv.Handler()}
	metrics := httptest.NewServer(served)
	t.Cleanup(metrics.Close)
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: cfg.Model, MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	var recs []*loadgen.Record
	keep := Func(func(r *loadgen.Record) { recs = append(recs, r) })
	dir := results.Dir(t.TempDir())
	before := srv.EnergyJoules()
	res, err := Run(context.Background(), Spec{Client: c, Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c", Text: "hi"}},
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: 20, Duration: 3 * time.Second}}, Arrival: loadgen.ArrivalConstant,
			Timeout: 10 * time.Second},
		Telemetry:      &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: metrics.URL + "/metrics"}}, Interval: 200 * time.Millisecond},
		GPUHourCostUSD: 2.5, Validity: slo.Unbounded(), Out: dir}, keep)
	if err != nil {
		t.Fatal(err)
	}
	whole := srv.EnergyJoules() - before
	e := res.Summary.Energy["main"]
	if e == nil {
		t.Fatalf("no energy: %q", res.Summary.EnergyUnavailable)
	}
	// The samples that carry an energy reading: the stage's window runs
	// from the first of them (the stage starts with the run) to the last
	// one counted before the stage's final snapshot.
	var first, last *telemetry.Sample
	for _, s := range readSamples(t, dir.Path(results.TelemetryFile)) {
		if s.Server == nil || len(s.Server.GPUs) == 0 || s.Server.GPUs[0].EnergyJoules == nil {
			continue
		}
		if first == nil {
			first = &s
		}
		if math.Abs(s.Elapsed.Seconds()-e.ToS) <= 1e-6 {
			last = &s
		}
	}
	if first == nil || last == nil || math.Abs(e.FromS-first.Elapsed.Seconds()) > 1e-6 {
		t.Fatalf("window %.6f–%.6f s: no samples with an energy reading at its bounds in %s", e.FromS, e.ToS, results.TelemetryFile)
	}
	// What the server served at those two samples, in the order served.
	i, j := served.index(*first.Server.GPUs[0].EnergyJoules), served.index(*last.Server.GPUs[0].EnergyJoules)
	if i < 0 || j <= i {
		t.Fatalf("the first and last energy readings (%.3f, %.3f J) are not two values the server served in order (%d, %d of %d)",
			*first.Server.GPUs[0].EnergyJoules, *last.Server.GPUs[0].EnergyJoules, i, j, served.len())
	}
	truth := served.at(j) - served.at(i)
	if e.Source != telemetry.EnergyCounter || e.GPUs != 1 || truth <= 0 || math.Abs(e.Joules/truth-1) > 0.01 || e.Joules > whole*1.01 {
		t.Fatalf("energy %+v, the served counter rose %.1f J over the window (%.1f J over the whole run)", e.EnergyWindow, truth, whole)
	}
	// The tokens whose chunks arrived in the window, counted as the
	// pipeline counts them: in whole buckets, from the runner's epoch
	// placed on the sampler's clock.
	zero := first.At.Add(-first.Elapsed)
	from := time.Duration(e.FromS*float64(time.Second)) - res.Info.Started.Sub(zero)
	to := time.Duration(e.ToS*float64(time.Second)) - res.Info.Started.Sub(zero)
	lo, hi := from/workBucket*workBucket, (to+workBucket-1)/workBucket*workBucket
	var tokens int64
	for _, r := range recs {
		if !r.OK() {
			continue
		}
		for _, ch := range r.Chunks {
			if ch.At >= lo && ch.At < hi && ch.Tokens > 0 {
				tokens += int64(ch.Tokens)
			}
		}
	}
	if tokens == 0 || math.Abs(float64(e.OutputTokens)/float64(tokens)-1) > 0.01 {
		t.Errorf("%d tokens in the window, %d streamed in it", e.OutputTokens, tokens)
	}
	if e.JoulesPerOutputToken == nil || math.Abs(*e.JoulesPerOutputToken/(truth/float64(tokens))-1) > 0.02 {
		t.Errorf("%v J/token, want %.4f", e.JoulesPerOutputToken, truth/float64(tokens))
	}
	hours := (last.Elapsed - first.Elapsed).Hours()
	want := 2.5 * hours / float64(tokens) * 1e6
	if e.CostPerMillionOutputTokensUSD == nil || math.Abs(*e.CostPerMillionOutputTokensUSD/want-1) > 0.02 {
		t.Errorf("cost %v $/M tokens, want %.4f", e.CostPerMillionOutputTokensUSD, want)
	}
	// Without an energy source the figures are absent, and the summary
	// says why.
	res, err = Run(context.Background(), Spec{Client: okClient, Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c"}},
		Options:   loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: 20, Duration: time.Second}}},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/nothing"}}, Interval: 200 * time.Millisecond},
		Validity:  slo.Unbounded()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Energy != nil || res.Summary.EnergyUnavailable == "" {
		t.Errorf("no energy source: %+v %q", res.Summary.Energy, res.Summary.EnergyUnavailable)
	}
}

// servedEnergy serves the simulator's handler and records, in order, each
// DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION value (in J) that /metrics served.
type servedEnergy struct {
	h  http.Handler
	mu sync.Mutex
	j  []float64
}

func (s *servedEnergy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Uncompressed, so the body can be read here as it is passed on.
	r.Header.Del("Accept-Encoding")
	rec := httptest.NewRecorder()
	s.h.ServeHTTP(rec, r)
	for line := range strings.Lines(rec.Body.String()) {
		if !strings.HasPrefix(line, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			s.mu.Lock()
			s.j = append(s.j, v/1000)
			s.mu.Unlock()
		}
	}
	maps.Copy(w.Header(), rec.Header())
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// index is where value v (in J, as the scraper read it) was served, the
// first such value; -1 if never.
func (s *servedEnergy) index(v float64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.IndexFunc(s.j, func(x float64) bool { return math.Abs(x-v) <= 1e-9*max(math.Abs(x), 1) })
}

func (s *servedEnergy) at(i int) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.j[i]
}

func (s *servedEnergy) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.j)
}

// readSamples reads a telemetry.jsonl.
func readSamples(t *testing.T, path string) []telemetry.Sample {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []telemetry.Sample
	for line := range strings.Lines(string(b)) {
		var s telemetry.Sample
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, s)
	}
	return out
}
