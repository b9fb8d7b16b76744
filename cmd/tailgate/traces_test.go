package main

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// Every sample trace format replays through run against the simulator on
// the fake clock with its dependencies held exactly: each call is due at
// the latest of its edges' predecessor events (start, first token, end)
// plus the edge's delay, and sent then, to the microsecond; a join waits
// for every edge; a background lane gates nothing outside itself; and every answer takes
// the simulator's own fixed times, each record paired with the server's
// own (sim.Truth); with failures, a failed call's dependents are
// cancelled_by_dependency and never reach the server. The edges come from the same mix drawn
// again through prompts, not from the records.
func TestTraceFormatsReplayExactly(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	const ttft, itl = 30 * time.Millisecond, 2 * time.Millisecond
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = ttft, itl
	cfg.Adapters = []string{"big", "small", "default"}
	faulted := cfg
	faulted.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 4}}
	for _, c := range []struct {
		name, mix string
		cfg       sim.Config
		args      []string
	}{
		{"weka", "trace-weka", cfg, []string{"--concurrency", "2", "--requests", "4"}},
		{"dynamo", "trace-dynamo", cfg, nil},
		{"otel", "trace-otel", cfg, nil},
		{"agent", "agent", cfg, []string{"--concurrency", "3", "--requests", "6"}},
		// Every fourth request fails: its dependents never reach the server.
		{"agent with failures", "agent", faulted, []string{"--concurrency", "3", "--requests", "6", "--max-error-rate", "1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			inBubble(t, map[string]sim.Config{"sim": c.cfg}, func(t *testing.T, sims map[string]*simtest.Server, bctx context.Context) {
				mix, _ := filepath.Abs("../../testdata/mixes/" + c.mix + ".yaml")
				dir := t.TempDir()
				args := append([]string{"run", "--target", sims["sim"].URL, "--model", "sim-llama-8b", "--mix", mix, "--duration", "10m",
					"--metrics-url", "off", "--nvml", "off", "--self-check", "warn", "--no-progress", "--out", dir}, c.args...)
				code, stdout, stderr := tgCmdCtx(bctx, args...)
				if code != 0 && len(c.cfg.Faults) == 0 {
					t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
				}
				// The server's own record of each request, by X-Request-Id.
				truth := map[string]sim.Truth{}
				for _, tr := range sims["sim"].Truth() {
					truth[tr.ID] = tr
				}
				recs := map[string]map[string]int{} // session → call → index
				all := readJSONL(t, dir)
				for i, r := range all {
					if recs[r.Session] == nil {
						recs[r.Session] = map[string]int{}
					}
					recs[r.Session][r.Call] = i
				}
				m, err := prompts.LoadMix(mix, prompts.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				src := m.Source(m.Seed())
				checked, joins, bg, cancelled := 0, 0, 0, 0
				var offset time.Time // the server's clock at the run's epoch
				served := func(r loadgen.Record) (sim.Truth, bool) {
					tr, ok := truth[r.ID]
					if !ok {
						tr, ok = truth[strconv.FormatInt(r.Seq, 10)]
					}
					return tr, ok
				}
				for len(recs) > 0 {
					p, err := src.Next()
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil || p.Graph == nil {
						t.Fatalf("drawing %s again: %v", c.mix, err)
					}
					g := p.Graph
					calls, ok := recs[g.ID]
					if !ok {
						break // past what the run drew
					}
					delete(recs, g.ID)
					for _, call := range g.Calls {
						i, ok := calls[call.ID]
						if !ok {
							t.Errorf("session %s call %s has no record", g.ID, call.ID)
							continue
						}
						r := all[i]
						tr, reached := served(r)
						if r.ErrorKind == loadgen.ErrCancelledByDependency {
							cancelled++
							if reached {
								t.Errorf("session %s call %s is cancelled by a dependency, yet reached the server", g.ID, call.ID)
							}
							failedPred := false
							for _, e := range call.After {
								k := all[calls[g.Calls[e.From].ID]].ErrorKind
								failedPred = failedPred || k == loadgen.ErrServer || k == loadgen.ErrCancelledByDependency
							}
							if !failedPred {
								t.Errorf("session %s call %s cancelled, but no call it waits for failed", g.ID, call.ID)
							}
							continue
						}
						if r.ErrorKind != "" {
							if len(c.cfg.Faults) == 0 || r.ErrorKind != loadgen.ErrServer {
								t.Errorf("session %s call %s: %s %s", g.ID, call.ID, r.ErrorKind, r.Error)
							}
							continue
						}
						if !reached {
							t.Errorf("session %s call %s: the server has no record of it", g.ID, call.ID)
							continue
						}
						// Pair the record with the server's: the same instants.
						if offset.IsZero() {
							offset = tr.Arrived.Add(-r.Sent)
						}
						if !withinMicro(tr.Arrived.Sub(offset), r.Sent) || !withinMicro(tr.End.Sub(offset), r.End) {
							t.Errorf("session %s call %s: sent %v ended %v; the server saw %v to %v", g.ID, call.ID, r.Sent, r.End, tr.Arrived.Sub(offset), tr.End.Sub(offset))
						}
						if r.Sent != r.Intended {
							t.Errorf("session %s call %s sent %v after its intended start", g.ID, call.ID, r.Sent-r.Intended)
						}
						if ft := r.FirstToken(); ft-r.Sent != ttft {
							t.Errorf("session %s call %s: first token %v after the send, the simulator's %v", g.ID, call.ID, ft-r.Sent, ttft)
						}
						if call.Background {
							bg++
						}
						if len(call.After) == 0 {
							continue
						}
						var want time.Duration
						for _, e := range call.After {
							pr := all[calls[g.Calls[e.From].ID]]
							if pc := g.Calls[e.From]; pc.Background && pc.Agent != call.Agent {
								t.Errorf("session %s call %s waits for background call %s", g.ID, call.ID, g.Calls[e.From].ID)
							}
							ev := pr.End
							switch e.On {
							case prompts.OnStart:
								ev = pr.Sent
							case prompts.OnFirstToken:
								ev = pr.FirstToken()
							}
							want = max(want, ev+e.Delay)
						}
						if len(call.After) > 1 {
							joins++
						}
						if !withinMicro(r.Intended, want) {
							t.Errorf("session %s call %s (after %v) due at %v, want %v", g.ID, call.ID, r.After, r.Intended, want)
						}
						checked++
					}
				}
				if len(recs) > 0 {
					t.Errorf("%d sessions of the run were not drawn again: %v", len(recs), recs)
				}
				if checked == 0 {
					t.Fatal("no dependent call checked")
				}
				if len(c.cfg.Faults) > 0 && cancelled == 0 {
					t.Error("no call was cancelled by a failed dependency")
				}
				t.Logf("%s: %d dependent calls checked, %d joins, %d background calls, %d cancelled by a dependency", c.name, checked, joins, bg, cancelled)
			})
		})
	}
}

// withinMicro: records keep microseconds, the server's clock nanoseconds.
func withinMicro(a, b time.Duration) bool { return a-b <= time.Microsecond && b-a <= time.Microsecond }
