package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

func runMix(t *testing.T, c loadgen.Client, mix *prompts.Mix, opts loadgen.Options) []*loadgen.Record {
	t.Helper()
	r, err := loadgen.NewRunner(c, mix.Source(mix.Seed()), opts)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 4096)
	var recs []*loadgen.Record
	done := make(chan struct{})
	go func() {
		for rec := range out {
			recs = append(recs, rec)
		}
		close(done)
	}()
	if _, err := r.Run(context.Background(), out); err != nil {
		t.Fatal(err)
	}
	<-done
	return recs
}

// Trace replay: every request of the sample Azure trace (time-scaled) is
// due at its trace timestamp and sent at it. In a synctest bubble, where
// time moves only when every goroutine waits, so a send is late only if the
// runner schedules it late, not because another process had the CPU (the
// wall-clock send lag is bench/'s BenchmarkScheduleLag).
func TestTraceReplaySendsOnTimestamps(t *testing.T) {
	mix, err := prompts.LoadMix("../testdata/mixes/trace-azure.yaml", prompts.LoadOptions{TimeScale: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{}
	src := mix.Source(mix.Seed())
	for {
		p, err := src.Next()
		if err != nil {
			break
		}
		want[p.ID] = p.At
	}
	synctest.Test(t, func(t *testing.T) {
		c := &echoClient{seen: map[string][]prompts.Message{}}
		recs := runMix(t, c, mix, loadgen.Options{Trace: true, Stages: []loadgen.Stage{{Name: "trace", Duration: mix.Span() + time.Second}}})
		if len(recs) != len(want) || len(recs) != mix.Len() {
			t.Fatalf("%d requests sent, the trace has %d", len(recs), len(want))
		}
		for _, r := range recs {
			if r.Intended != want[r.ID] {
				t.Fatalf("%s due at %v, trace says %v", r.ID, r.Intended, want[r.ID])
			}
			if r.Sent != r.Intended {
				t.Errorf("%s sent at %v, due at %v", r.ID, r.Sent, r.Intended)
			}
		}
		t.Logf("%d trace requests over %v, each sent at its timestamp", len(recs), mix.Span())
	})
}

// echoClient answers every request with a text naming it, so the next turn
// can be checked to carry exactly that answer.
type echoClient struct {
	mu   sync.Mutex
	seen map[string][]prompts.Message // by prompt ID
}

func (e *echoClient) Do(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	rec.Sent = rec.Now()
	e.mu.Lock()
	e.seen[p.ID] = p.Chat()
	e.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // the answer's duration: the behaviour under test (fake time in a synctest bubble)
	rec.Chunks = append(rec.Chunks, loadgen.Chunk{At: rec.Now(), Tokens: 1})
	rec.OutputTokens, rec.Text, rec.End = 1, "answer to "+p.ID, rec.Now()
}

// Multi-turn sessions through the engine: each turn is sent after the
// previous answer plus the think time, carries every earlier turn with the
// answers the server gave, and TTFT is reported per turn index.
func TestSessionsCarryHistory(t *testing.T) {
	dir := t.TempDir()
	mixFile := filepath.Join(dir, "s.yaml")
	os.WriteFile(mixFile, []byte(`kind: Mix
name: s
seed: 3
classes:
  - name: conv
    source: {type: synthetic, input_tokens: 20}
    sessions: {turns: 3, think_time: 50ms}
    max_tokens: 8
`), 0o644)
	mix, err := prompts.LoadMix(mixFile, prompts.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// In a synctest bubble: the sessions' timing is the runner's alone,
	// however busy the machine.
	synctest.Test(t, func(t *testing.T) { testSessionsCarryHistory(t, mix) })
}

func testSessionsCarryHistory(t *testing.T, mix *prompts.Mix) {
	c := &echoClient{seen: map[string][]prompts.Message{}}
	recs := runMix(t, c, mix, loadgen.Options{Arrival: loadgen.ArrivalConstant,
		Stages: []loadgen.Stage{{Rate: 10, Duration: 600 * time.Millisecond}}})
	bySession := map[string]map[int]*loadgen.Record{}
	for _, r := range recs {
		if bySession[r.Session] == nil {
			bySession[r.Session] = map[int]*loadgen.Record{}
		}
		bySession[r.Session][r.Turn] = r
	}
	if len(bySession) != 6 {
		t.Fatalf("%d sessions, want 6 (10/s for 0.6 s)", len(bySession))
	}
	complete := 0
	m := measure.NewMetrics()
	for _, r := range recs {
		m.Add(r)
	}
	for id, turns := range bySession {
		// A turn due after the run's end is not sent: the session that
		// starts at 500 ms (turns due ~552 and ~604 ms) stops at two.
		want := 3
		if turns[0].Intended > 450*time.Millisecond {
			want = 2
		}
		if len(turns) != want {
			t.Fatalf("session %s (start %v): %d turns sent, want %d", id, turns[0].Intended, len(turns), want)
		}
		if want == 3 {
			complete++
		}
		for k := 1; k < len(turns); k++ {
			prev, cur := turns[k-1], turns[k]
			if d := cur.Intended - prev.End; d != 50*time.Millisecond {
				t.Errorf("session %s turn %d due %v after the previous answer, want the 50ms think time", id, k, d)
			}
			msgs := c.seen[cur.ID]
			var answers []string
			for _, msg := range msgs {
				if msg.Role == "assistant" {
					answers = append(answers, msg.Content)
				}
			}
			if len(answers) != k || answers[k-1] != "answer to "+prev.ID {
				t.Errorf("session %s turn %d carries answers %q, want %d ending with the answer to %s", id, k, answers, k, prev.ID)
			}
			if users := len(msgs) - len(answers); users < k+1 {
				t.Errorf("session %s turn %d: %d user messages, want the %d turns so far", id, k, users, k+1)
			}
			if !strings.HasPrefix(msgs[len(msgs)-1].Role, "user") {
				t.Errorf("session %s turn %d does not end with the new user turn", id, k)
			}
		}
	}
	s := m.Summary(loadgen.Info{}, schema.SummaryMeta{})
	for k, want := range map[string]int64{"0": 6, "1": 6, "2": int64(complete)} {
		if s.Turns[k].Count != want {
			t.Errorf("ttft_by_turn_ms[%s] count %d, want %d", k, s.Turns[k].Count, want)
		}
	}
}

// The simulator's prompt_tokens equal what the mix asked for, request by
// request, for every class of the production mix (chat dataset, RAG with a
// shared prefix, synthetic long generation, ShareGPT sessions): both count
// with the mix's tokenizer. (The simulator once counted one token per 4
// bytes: 54% above the request.)
func TestSimulatorPromptTokensMatchMix(t *testing.T) {
	mix, err := prompts.LoadMix("../testdata/mixes/production.yaml", prompts.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.TruthLimit = time.Millisecond, -1
	srv := simtest.Start(t, cfg)
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	recs := runMix(t, c, mix, loadgen.Options{Closed: true, Requests: 80,
		Stages: []loadgen.Stage{{Concurrency: 16, Duration: time.Minute}}})
	classes := map[string]int{}
	for _, r := range recs {
		if !r.OK() {
			t.Fatalf("%s failed: %s %s", r.ID, r.ErrorKind, r.Error)
		}
		classes[r.Class]++
		if r.InputTokens != r.RequestedInputTokens {
			t.Errorf("%s (%s): server counted %d prompt tokens, the mix asked for %d", r.ID, r.Class, r.InputTokens, r.RequestedInputTokens)
		}
	}
	t.Logf("%d requests by class: %v", len(recs), classes)
	if len(classes) < 3 {
		t.Errorf("classes %v: want most of the mix's four", classes)
	}
}
