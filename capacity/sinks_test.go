package capacity

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

type countingSink struct{ adds, closes int }

func (s *countingSink) Name() string                  { return "counting" }
func (s *countingSink) Add(rec *loadgen.Record) error { s.adds++; return nil }
func (s *countingSink) Close() error                  { s.closes++; return nil }

// A sweep's sinks get every record of every level, as the level's own
// requests.jsonl does, and are closed once per level.
func TestSweepFeedsSinks(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	spec, err := slo.ParseSpec("slo.yaml", []byte(tpotSLO))
	if err != nil {
		t.Fatal(err)
	}
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	sink := &countingSink{}
	out := results.Dir(filepath.Join(t.TempDir(), "sweep"))
	res, err := Run(context.Background(), Config{Client: c, SLO: spec, Search: Search{Levels: []Level{{Rate: 20}, {Rate: 40}}},
		Arrival: loadgen.ArrivalConstant, Seed: 1,
		Source: func() loadgen.Source { return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hi"}} },
		Warmup: time.Millisecond, MinDuration: 300 * time.Millisecond, MaxDuration: time.Second, Timeout: 2 * time.Second,
		Grace: 200 * time.Millisecond, Validity: warnOnly(), Out: out, Sinks: []pipeline.Sink{sink}})
	if err != nil {
		t.Fatal(err)
	}
	lines := 0
	for _, l := range res.Levels {
		f, err := os.Open(filepath.Join(string(out), l.Dir, results.RecordsFileName(results.CompressNone)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines++
		}
		f.Close()
	}
	if lines == 0 || sink.adds != lines {
		t.Errorf("sink got %d records, the levels' requests.jsonl hold %d", sink.adds, lines)
	}
	if sink.closes != len(res.Levels) {
		t.Errorf("sink closed %d times over %d levels", sink.closes, len(res.Levels))
	}
}
