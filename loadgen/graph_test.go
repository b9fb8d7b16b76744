package loadgen

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// failing answers as fakeClient does, except that calls whose id is in
// fail get a server error at once.
type failing struct {
	fakeClient
	fail map[string]bool
}

func (f *failing) Do(ctx context.Context, p *prompts.Prompt, rec *Record) {
	if f.fail[p.Call] {
		rec.Sent = rec.Now()
		rec.Status, rec.ErrorKind, rec.Error = 500, ErrServer, "boom"
		rec.End = rec.Now()
		return
	}
	f.fakeClient.Do(ctx, p, rec)
}

// agentGraph is a session: a root, a tool round trip (b), a subagent
// launched beside the root (c), a join of both (d), a background lane on
// the root's first token (bg) and a last turn after the join (e).
func agentGraph(id string) *prompts.Graph {
	call := func(cid string, turn int, agent string, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: cid, Agent: agent, After: after,
			Prompt: &prompts.Prompt{ID: id + "/" + cid, Session: id, Turn: turn, Call: cid, Class: "agent"}}
	}
	g := &prompts.Graph{ID: id, Trace: "test#" + id, Calls: []prompts.Call{
		call("a", 0, ""),
		call("b", 1, "", prompts.Edge{From: 0, On: prompts.OnEnd, Delay: 100 * time.Millisecond, Tool: true}),
		call("c", 0, "sub", prompts.Edge{From: 0, On: prompts.OnStart, Delay: 10 * time.Millisecond}),
		call("d", 2, "", prompts.Edge{From: 1, On: prompts.OnEnd, Delay: 5 * time.Millisecond},
			prompts.Edge{From: 2, On: prompts.OnEnd}),
		call("bg", 0, "bg", prompts.Edge{From: 0, On: prompts.OnFirstToken}),
		call("e", 3, "", prompts.Edge{From: 3, On: prompts.OnEnd, Delay: 50 * time.Millisecond}),
	}}
	g.Calls[4].Background = true
	return g
}

type graphSource struct {
	n, i int
	at   func(k int) time.Duration
}

func (s *graphSource) Next() (*prompts.Prompt, error) {
	if s.n > 0 && s.i >= s.n {
		return nil, io.EOF
	}
	g := agentGraph("s" + strconv.Itoa(s.i))
	p := &prompts.Prompt{ID: g.ID, Session: g.ID, Graph: g}
	if s.at != nil {
		p.At = s.at(s.i)
	}
	s.i++
	return p, nil
}

// bySession groups records by session and call id.
func bySession(t *testing.T, recs []*Record) map[string]map[string]*Record {
	t.Helper()
	out := map[string]map[string]*Record{}
	for _, r := range recs {
		if out[r.Session] == nil {
			out[r.Session] = map[string]*Record{}
		}
		if out[r.Session][r.Call] != nil {
			t.Fatalf("session %s call %s recorded twice", r.Session, r.Call)
		}
		out[r.Session][r.Call] = r
	}
	return out
}

// checkEdges asserts every sent call's intended start is the latest of
// its edges' predecessor events plus delays, and that it was sent no
// sooner.
func checkEdges(t *testing.T, g *prompts.Graph, calls map[string]*Record) {
	t.Helper()
	for i, c := range g.Calls {
		rec := calls[c.ID]
		if rec == nil {
			t.Fatalf("session %s: call %s has no record", g.ID, c.ID)
		}
		if rec.NotSent || len(c.After) == 0 {
			continue
		}
		want := time.Duration(0)
		for _, e := range c.After {
			p := calls[g.Calls[e.From].ID]
			ev := p.End
			switch e.On {
			case prompts.OnStart:
				ev = p.Sent
			case prompts.OnFirstToken:
				ev = p.FirstToken()
			}
			want = max(want, ev+e.Delay)
		}
		if rec.Intended != want {
			t.Errorf("session %s call %s: intended %v, want %v", g.ID, c.ID, rec.Intended, want)
		}
		if rec.Sent < rec.Intended {
			t.Errorf("session %s call %s sent at %v before it was due at %v", g.ID, c.ID, rec.Sent, rec.Intended)
		}
		if got := rec.After; len(got) != len(g.AfterIDs(i)) {
			t.Errorf("session %s call %s: after %v, want %v", g.ID, c.ID, got, g.AfterIDs(i))
		}
	}
}

func TestGraphOpenLoopHoldsEveryEdge(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
		recs, info := collect(t, context.Background(), c, &graphSource{},
			Options{Stages: []Stage{{Rate: 5, Duration: 2 * time.Second}}})
		sessions := bySession(t, recs)
		if len(sessions) != 10 || len(recs) != 60 || info.Sent != 60 {
			t.Fatalf("%d sessions, %d records, %d sent; want 10, 60, 60", len(sessions), len(recs), info.Sent)
		}
		last := 0
		for id, calls := range sessions {
			checkEdges(t, agentGraph(id), calls)
			k, _ := strconv.Atoi(id[1:])
			start := time.Duration(k) * 200 * time.Millisecond
			// The known delays: a 0–7, c 10–17, bg 5–12 (at a's first
			// token), b 107–114, d 119–126, e 176–183.
			for call, want := range map[string]time.Duration{"a": 0, "c": 10, "bg": 5, "b": 107, "d": 119, "e": 176} {
				if got := calls[call].Sent - start; got != want*time.Millisecond {
					t.Errorf("session %s call %s sent at +%v, want +%vms", id, call, got, want)
				}
			}
			for _, call := range []string{"d", "bg"} {
				if lag := calls[call].ScheduleLag(); lag != 0 {
					t.Errorf("session %s call %s: lag %v, want 0", id, call, lag)
				}
			}
			for _, r := range calls {
				if !r.OK() {
					t.Errorf("session %s call %s: %s %s", id, r.Call, r.ErrorKind, r.Error)
				}
				if r.SessionLast {
					last++
					f := r.SessionDone
					if f == nil || f.Calls != 6 || f.OK != 6 || f.Start != start || f.End != start+183*time.Millisecond ||
						f.ToolWait != 100*time.Millisecond || f.OutputTokens != 18 || f.Trace != "test#"+id {
						t.Errorf("session %s figures %+v", id, f)
					}
				}
			}
		}
		if last != 10 {
			t.Errorf("%d records marked last, want one per session (10)", last)
		}
		s := summarize(recs, info).Sessions
		if s == nil || s.Count != 10 || s.OK != 10 || s.Failed != 0 || s.CancelledCalls != 0 {
			t.Fatalf("summary sessions %+v", s)
		}
		if d := s.DurationMs; d.Count != 10 || !near(d.Min, 183) || !near(d.Max, 183) {
			t.Errorf("session duration %+v, want 10 × 183 ms", d)
		}
		if e := s.Turns["1+"]["e2e"]; e.Count != 30 || !near(e.Min, 7) || !near(e.Max, 7) {
			t.Errorf("later turns' e2e %+v, want 30 × 7 ms", e)
		}
		if f := s.Turns["0"]["ttft"]; f.Count != 30 || !near(f.Min, 5) || !near(f.Max, 5) {
			t.Errorf("first turns' ttft %+v, want 30 × 5 ms", f)
		}
	})
}

// A client that appends its chunks itself, not by AddChunk: the
// first-token child goes at the answer's end, its lateness shown as lag.
func TestGraphFirstTokenWithoutHook(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *Record) {
			rec.Sent = rec.Now()
			time.Sleep(5 * time.Millisecond)
			rec.Chunks = append(rec.Chunks, Chunk{At: rec.Now(), Tokens: 1})
			time.Sleep(2 * time.Millisecond)
			rec.OutputTokens, rec.End = 1, rec.Now()
		})
		recs, _ := collect(t, context.Background(), c, &graphSource{n: 1}, Options{Stages: []Stage{{Rate: 1, Duration: time.Second}}})
		calls := bySession(t, recs)["s0"]
		checkEdges(t, agentGraph("s0"), calls)
		if bg := calls["bg"]; bg.Intended != 5*time.Millisecond || bg.Sent != 7*time.Millisecond {
			t.Errorf("bg due %v sent %v, want due at a's first token (5ms), sent at its end (7ms)", bg.Intended, bg.Sent)
		}
	})
}

func TestGraphFailedPredecessorCancelsDependents(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &failing{fakeClient: fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3},
			fail: map[string]bool{"b": true}}
		recs, info := collect(t, context.Background(), c, &graphSource{n: 1},
			Options{Stages: []Stage{{Rate: 1, Duration: 10 * time.Second}}})
		calls := bySession(t, recs)["s0"]
		checkEdges(t, agentGraph("s0"), calls)
		for call, want := range map[string]ErrorKind{"a": ErrNone, "b": ErrServer, "c": ErrNone, "bg": ErrNone,
			"d": ErrCancelledByDependency, "e": ErrCancelledByDependency} {
			if got := calls[call].ErrorKind; got != want {
				t.Errorf("call %s: %q, want %q", call, got, want)
			}
		}
		if !calls["d"].NotSent || calls["d"].Intended != calls["b"].End || info.Sent != 4 {
			t.Errorf("d: %+v; sent %d, want 4", calls["d"], info.Sent)
		}
		if ErrCancelledByDependency.Counted() {
			t.Error("cancelled_by_dependency counted as a server error")
		}
		s := summarize(recs, info)
		if s.Requests.Errors != 1 || s.Sessions.Failed != 1 || s.Sessions.CancelledCalls != 2 || !near(s.Sessions.DurationMs.Max, 107) {
			t.Errorf("errors %d, sessions %+v; want 1 error, 1 failed session, 2 cancelled calls, 107 ms",
				s.Requests.Errors, s.Sessions)
		}
	})
}

func TestGraphClosedLoopRunsSessionTrees(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
		recs, info := collect(t, context.Background(), c, &graphSource{},
			Options{Closed: true, Stages: []Stage{{Concurrency: 2, Duration: time.Second}}})
		sessions := bySession(t, recs)
		// Each worker runs 183 ms sessions back to back: five complete;
		// from 915 ms on, each session's b is due after the end, so it is
		// cut once a, c and bg end (17 ms), and the next begins: five more.
		if len(sessions) != 20 {
			t.Fatalf("%d sessions, want 20", len(sessions))
		}
		// Subagents take no slot: two calls of each tree run at once (a
		// 0–7 with bg 5–12, then bg with c 10–17).
		if m := c.maxSeen.Load(); m != 4 {
			t.Errorf("max in flight %d, want 4 (two trees of two)", m)
		}
		s := summarize(recs, info).Sessions
		if s.Count != 20 || s.OK != 10 || s.Cut != 10 || s.DurationMs.Count != 10 || !near(s.DurationMs.Max, 183) {
			t.Errorf("sessions %+v", s)
		}
		for id, calls := range sessions {
			checkEdges(t, agentGraph(id), calls)
		}
	})
}

func TestGraphInterruptSettlesWaitingCalls(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel) // b waits 100 ms of tool time then
		t0 := time.Now()
		recs, info := collect(t, ctx, c, &graphSource{n: 1}, Options{Stages: []Stage{{Rate: 1, Duration: time.Hour}}})
		if el := time.Since(t0); el > 60*time.Millisecond || !info.Interrupted {
			t.Errorf("run took %v after an interrupt at 50ms (interrupted %v)", el, info.Interrupted)
		}
		calls := bySession(t, recs)["s0"]
		for _, id := range []string{"b", "d", "e"} {
			if r := calls[id]; r == nil || r.ErrorKind != ErrCancelled || !r.NotSent {
				t.Errorf("call %s: %+v, want cancelled, not sent", id, r)
			}
		}
	})
}

func TestGraphInvalidIsAnError(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		g := agentGraph("bad")
		g.Calls[1].After[0].From = 5 // points forward
		src := &Repeat{Prompt: prompts.Prompt{ID: "bad", Graph: g}}
		r, err := NewRunner(&fakeClient{tokens: 1}, src, Options{Stages: []Stage{{Rate: 1, Duration: time.Second}}})
		if err != nil {
			t.Fatal(err)
		}
		out := make(chan *Record, 16)
		go func() {
			for range out {
			}
		}()
		if _, err := r.Run(context.Background(), out); err == nil || !strings.Contains(err.Error(), `session "bad": call "b"`) {
			t.Errorf("err %v, want one naming the session and the call", err)
		}
	})
}

func TestGraphCallsDueAfterTheEndAreNotDue(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		c := &fakeClient{ttft: 5 * time.Millisecond, tokens: 1}
		recs, info := collect(t, context.Background(), c, &graphSource{n: 1},
			Options{Stages: []Stage{{Rate: 1, Duration: 50 * time.Millisecond}}})
		calls := bySession(t, recs)["s0"]
		for _, id := range []string{"b", "d", "e"} {
			if r := calls[id]; r.ErrorKind != ErrNotDue || !r.NotSent {
				t.Errorf("call %s: %s, want not_due, not sent", id, r.ErrorKind)
			}
		}
		// Past the schedule, as an arrival past it: not cut, not sent.
		if info.CutAtEnd != 0 || info.Sent != 3 {
			t.Errorf("cut %d sent %d, want 0 and 3", info.CutAtEnd, info.Sent)
		}
	})
}

func TestGraphTraceClockAndShards(t *testing.T) {
	t.Parallel()
	run := func(sh Shard) ([]*Record, Info) {
		var recs []*Record
		var info Info
		synctest.Test(t, func(t *testing.T) {
			c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
			src := &graphSource{n: 7, at: func(k int) time.Duration { return time.Duration(k*k) * 30 * time.Millisecond }}
			recs, info = collect(t, context.Background(), c, src,
				Options{Trace: true, Shard: sh, Stages: []Stage{{Duration: 10 * time.Second}}})
		})
		return recs, info
	}
	whole, wi := run(Shard{})
	all := bySession(t, whole)
	if len(all) != 7 {
		t.Fatalf("%d sessions, want 7", len(all))
	}
	for id, calls := range all {
		k, _ := strconv.Atoi(id[1:])
		if calls["a"].Intended != time.Duration(k*k)*30*time.Millisecond {
			t.Errorf("session %s starts at %v, not its trace offset", id, calls["a"].Intended)
		}
	}
	want := metricsOf(whole)
	merged := NewMeasured()
	seen := map[string]int{}
	for i := 0; i < 2; i++ {
		part, _ := run(Shard{Index: i, Count: 2})
		for id, calls := range bySession(t, part) {
			seen[id]++
			for cid, r := range calls {
				w := all[id][cid]
				if r.Intended != w.Intended || r.End != w.End {
					t.Errorf("shard %d session %s call %s: %v–%v, unsharded %v–%v", i, id, cid, r.Intended, r.End, w.Intended, w.End)
				}
			}
		}
		// Each shard's histograms.json, read back, then merged.
		st, err := metricsOf(part).State()
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var back schema.MetricsState
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		pm, err := MeasuredFromState(&back)
		if err != nil {
			t.Fatal(err)
		}
		merged.Merge(pm, 0)
	}
	for id := range all {
		if seen[id] != 1 {
			t.Errorf("session %s in %d shards, want exactly 1", id, seen[id])
		}
	}
	ws, ms := want.Summary(wi, schema.SummaryMeta{}).Sessions, merged.Summary(wi, schema.SummaryMeta{}).Sessions
	if ws.Count != 7 || ws.Count != ms.Count || ws.OK != ms.OK || ws.DurationMs != ms.DurationMs ||
		ws.Turns["1+"]["e2e"] != ms.Turns["1+"]["e2e"] || ws.Turns["0"]["ttft"] != ms.Turns["0"]["ttft"] {
		t.Errorf("merged sessions %+v, unsharded %+v", ms, ws)
	}
	// Read back from requests.jsonl: the same roll-up.
	back := NewMeasured()
	for _, r := range whole {
		var rr Record
		if err := rr.UnmarshalJSON(r.AppendJSON(nil, false)); err != nil {
			t.Fatal(err)
		}
		back.Add(&rr)
	}
	if bs := back.Summary(wi, schema.SummaryMeta{}).Sessions; bs.Count != ws.Count || bs.DurationMs != ws.DurationMs {
		t.Errorf("read back: sessions %+v, live %+v", bs, ws)
	}
}

// near: an HDR figure (3 significant digits) of want ms.
func near(got, want float64) bool { return got >= want*0.999 && got <= want*1.001 }

func metricsOf(recs []*Record) Measured {
	m := NewMeasured()
	for _, r := range recs {
		m.Add(r)
	}
	return m
}

// A request count ends sending, not the sessions already started: with
// --requests 3 every one of the three sessions runs to its end, open and
// closed loop, however long their tool gaps.
func TestGraphRequestCapLetsStartedSessionsFinish(t *testing.T) {
	t.Parallel()
	for _, o := range []Options{
		{Closed: true, Requests: 3, Stages: []Stage{{Concurrency: 2, Duration: time.Hour}}},
		{Requests: 3, Stages: []Stage{{Rate: 100, Duration: time.Hour}}},
	} {
		synctest.Test(t, func(t *testing.T) {
			c := &fakeClient{ttft: 5 * time.Millisecond, itl: time.Millisecond, tokens: 3}
			recs, info := collect(t, context.Background(), c, &graphSource{}, o)
			s := summarize(recs, info).Sessions
			if s == nil || s.Count != 3 || s.OK != 3 || s.Cut != 0 {
				t.Fatalf("closed %v: sessions %+v, want 3 complete", o.Closed, s)
			}
			for id, calls := range bySession(t, recs) {
				checkEdges(t, agentGraph(id), calls)
				for cid, r := range calls {
					if r.NotSent {
						t.Errorf("closed %v: session %s call %s not sent (%s)", o.Closed, id, cid, r.ErrorKind)
					}
				}
			}
		})
	}
}
