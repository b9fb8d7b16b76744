package openai

import (
	"context"
	"io"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// truthSessions are agent sessions whose calls name themselves to the
// simulator (X-Request-Id session/call), so each record pairs with the
// server's own: a root, a tool round trip after it, a subagent launched
// beside it, and a join of both.
type truthSessions struct{ n, i int }

func (s *truthSessions) Next() (*prompts.Prompt, error) {
	if s.i >= s.n {
		return nil, io.EOF
	}
	id := "s" + strconv.Itoa(s.i)
	s.i++
	call := func(cid string, turn int, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: cid, After: after, Prompt: &prompts.Prompt{
			ID: id + "/" + cid, Session: id, Turn: turn, Call: cid, Class: "agent", MaxTokens: 5,
			Messages: []prompts.Message{{Role: "user", Content: "call " + id + " " + cid}},
			Headers:  map[string]string{"X-Request-Id": id + "/" + cid}}}
	}
	g := &prompts.Graph{ID: id, Calls: []prompts.Call{
		call("a", 0),
		call("b", 1, prompts.Edge{From: 0, On: prompts.OnEnd, Delay: 30 * time.Millisecond, Tool: true}),
		call("c", 0, prompts.Edge{From: 0, On: prompts.OnStart, Delay: 5 * time.Millisecond}),
		call("d", 2, prompts.Edge{From: 1, On: prompts.OnEnd}, prompts.Edge{From: 2, On: prompts.OnEnd}),
	}}
	return &prompts.Prompt{ID: id, Session: id, Graph: g}, nil
}

// Session durations against the simulator's truth: each session's
// duration as the generator reports it (first call's intended start to
// last call's end) beside the server's (first call's arrival to last
// call's end), and each call's record beside the server's. A wall-clock
// test, paired with the server's records: the median error must stay
// within 2 ms.
func TestSessionDurationMatchesServerTruth(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Mode, cfg.FixedTTFT, cfg.FixedITL = sim.ModeFixed, 20*time.Millisecond, 2*time.Millisecond
	srv := simtest.Start(t, cfg)
	c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 5})
	const sessions = 12
	r, err := loadgen.NewRunner(c, &truthSessions{n: sessions}, loadgen.Options{
		Stages:  []loadgen.Stage{{Name: "main", Rate: 20, Duration: time.Second}},
		Timeout: testTimeout})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan *loadgen.Record, 64)
	done := make(chan []*loadgen.Record)
	go func() {
		var recs []*loadgen.Record
		for rec := range out {
			recs = append(recs, rec)
		}
		done <- recs
	}()
	info, err := r.Run(context.Background(), out)
	if err != nil {
		t.Fatal(err)
	}
	recs := <-done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	truth := map[string]sim.Truth{}
	for _, tr := range srv.Truth() {
		truth[tr.ID] = tr
	}
	abs := func(d time.Duration) time.Duration { return max(d, -d) }
	var durErr, callErr []time.Duration
	figures := 0
	for _, rec := range recs {
		if !rec.OK() {
			t.Fatalf("session %s call %s: %s %s", rec.Session, rec.Call, rec.ErrorKind, rec.Error)
		}
		tr, ok := truth[rec.Session+"/"+rec.Call]
		if !ok {
			t.Fatalf("no server record for %s/%s", rec.Session, rec.Call)
		}
		// The call as the server saw it: sent → end beside arrival → end.
		callErr = append(callErr, abs((rec.End-rec.Sent)-tr.End.Sub(tr.Arrived)))
		f := rec.SessionDone
		if f == nil {
			continue
		}
		figures++
		var first, last time.Time
		for _, cid := range []string{"a", "b", "c", "d"} {
			ct := truth[f.Session+"/"+cid]
			if first.IsZero() || ct.Arrived.Before(first) {
				first = ct.Arrived
			}
			if ct.End.After(last) {
				last = ct.End
			}
		}
		d, ok := f.Duration()
		if !ok || !f.Complete() || f.OK != 4 {
			t.Fatalf("session %s: figures %+v", f.Session, f)
		}
		durErr = append(durErr, abs(d-last.Sub(first)))
		// The session's start on the server's clock: the run's epoch plus
		// the first call's intended start.
		durErr = append(durErr, abs(info.Started.Add(f.Start).Sub(first)))
	}
	if figures != sessions || len(callErr) != 4*sessions {
		t.Fatalf("%d sessions with figures and %d calls, want %d and %d", figures, len(callErr), sessions, 4*sessions)
	}
	median := func(ds []time.Duration) time.Duration {
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	if m := median(durErr); m > 2*time.Millisecond {
		t.Errorf("median session duration/start error %v against the server's truth, want ≤ 2ms (all: %v)", m, durErr)
	}
	if m := median(callErr); m > 2*time.Millisecond {
		t.Errorf("median call duration error %v against the server's truth, want ≤ 2ms", m)
	}
	t.Logf("median session error %v, max %v; median call error %v", median(durErr), durErr[len(durErr)-1], median(callErr))
}
