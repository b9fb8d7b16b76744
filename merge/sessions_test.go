package merge

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// sessions yields two-call sessions: b 10 ms after a's answer.
type sessions struct{ n int }

func (s *sessions) Next() (*prompts.Prompt, error) {
	id := fmt.Sprint("s", s.n)
	s.n++
	call := func(c string, turn int, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: c, After: after, Prompt: &prompts.Prompt{ID: id + c, Session: id, Turn: turn, Call: c, Text: "x"}}
	}
	return &prompts.Prompt{ID: id, Session: id, Graph: &prompts.Graph{ID: id, Calls: []prompts.Call{call("a", 0),
		call("b", 1, prompts.Edge{From: 0, On: prompts.OnEnd, Delay: 10 * time.Millisecond, Tool: true})}}}, nil
}

// Shards split by session; the merged summary's session figures are
// those of the merged records, and sessions.jsonl holds every session.
func TestMergeSessions(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	start := time.Now().Add(100 * time.Millisecond)
	var dirs []results.Dir
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		d := results.Dir(filepath.Join(base, fmt.Sprint("s", i)))
		dirs = append(dirs, d)
		wg.Add(1)
		go func() {
			defer wg.Done()
			spec := pipeline.Spec{Client: client, Source: &sessions{}, Out: d, Validity: &lenient,
				Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "s", Rate: 100, Duration: 300 * time.Millisecond}},
					Arrival: loadgen.ArrivalConstant, Shard: loadgen.Shard{Index: i, Count: 2}, StartAt: start}}
			if _, err := pipeline.Run(context.Background(), spec); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	out := results.Dir(filepath.Join(base, "merged"))
	res, err := Merge(dirs, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := res.Summary.Sessions
	if got == nil || got.Count != 30 {
		t.Fatalf("merged sessions %+v, want 30 (100/s over 300 ms)", got)
	}
	m := measure.NewMetrics()
	if _, err := results.ReadRecords(out.RecordsPath(), func(r *loadgen.Record) error { cp := *r; m.Add(&cp); return nil }); err != nil {
		t.Fatal(err)
	}
	want := m.Summary(loadgen.Info{}, schema.SummaryMeta{}).Sessions
	if got.Count != want.Count || got.OK != want.OK || got.Cut != want.Cut || got.DurationMs != want.DurationMs {
		t.Errorf("merged summary sessions %+v, merged records %+v", got, want)
	}
	lines, err := results.ReadSessions(out.Path(results.SessionsFile))
	if err != nil || int64(len(lines)) != got.Count {
		t.Fatalf("merged sessions.jsonl: %d lines (%v), want %d", len(lines), err, got.Count)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		if seen[l.Session] {
			t.Errorf("session %s twice", l.Session)
		}
		seen[l.Session] = true
	}
}
