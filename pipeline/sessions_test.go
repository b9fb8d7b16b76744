package pipeline

import (
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
)

// twoTurns yields limit sessions of two calls, the second 20 ms of tool
// time after the first's answer, then runs out.
type twoTurns struct{ n, limit int }

func (s *twoTurns) Next() (*prompts.Prompt, error) {
	if s.n >= s.limit {
		return nil, io.EOF
	}
	id := "s" + strconv.Itoa(s.n)
	s.n++
	call := func(c string, turn int, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: c, After: after, Prompt: &prompts.Prompt{ID: id + c, Session: id, Turn: turn, Call: c, Text: "x"}}
	}
	g := &prompts.Graph{ID: id, Trace: "t", Calls: []prompts.Call{call("a", 0),
		call("b", 1, prompts.Edge{From: 0, On: prompts.OnEnd, Delay: 20 * time.Millisecond, Tool: true})}}
	return &prompts.Prompt{ID: id, Session: id, Graph: g}, nil
}

func TestRunWritesSessions(t *testing.T) {
	dir := results.Dir(t.TempDir())
	// Four sessions, bounded by the source, not the clock: the schedule is
	// far longer than they take, and sending ends with the last session,
	// so a loaded machine cannot leave a call due after the end.
	sp := spec(10, time.Minute)
	sp.Source, sp.Out, sp.Validity = &twoTurns{limit: 4}, dir, warnOnly()
	res, err := Run(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := results.ReadSessions(dir.Path(results.SessionsFile))
	if err != nil || len(lines) != 4 {
		t.Fatalf("sessions.jsonl: %d lines (%v), want 4", len(lines), err)
	}
	for _, l := range lines {
		// Two 30 ms answers and the 20 ms tool wait between them.
		if l.Calls != 2 || l.OK != 2 || l.ToolWaitUs != 20000 || l.OutputTokens != 4 || l.EndUs-l.StartUs < 80000 {
			t.Errorf("session line %+v", l)
		}
	}
	s := res.Summary.Sessions
	if s == nil || s.Count != 4 || s.OK != 4 || s.DurationMs.Count != 4 || s.DurationMs.Min < 80 {
		t.Errorf("summary sessions %+v", s)
	}
	back, err := dir.ReadSummary()
	if err != nil || back.Sessions == nil || back.Sessions.Count != 4 {
		t.Errorf("summary.json sessions %+v (%v)", back.Sessions, err)
	}

	// A run without sessions writes no sessions.jsonl.
	plain := results.Dir(t.TempDir())
	sp = spec(50, 100*time.Millisecond)
	sp.Out, sp.Validity = plain, warnOnly()
	if _, err := Run(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(plain.Path(results.SessionsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run without sessions: %s %v", results.SessionsFile, err)
	}
}
