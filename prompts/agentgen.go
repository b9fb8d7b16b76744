package prompts

import (
	"strconv"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// The synthetic agent source: sessions shaped like a coding agent's for
// users without a trace. A main lane of turns, each a call whose prompt is
// the lane's history so far (every earlier prompt and answer, so the lane
// extends one cached prefix) plus a tool result; a tool gap between turns;
// after a turn, with some probability, a fan-out of subagents with fresh
// histories that the next turn joins, or that run in the background.

var agentFields = []string{
	"type", "input_tokens", "turn_tokens", "output_tokens", "turns", "tool_gap",
	"subagent_probability", "subagent_width", "subagent_turns", "background_probability", "join",
	"cache_bust", "idle_gap_cap",
}

type agentGen struct {
	input, turnTokens, output, turns, toolGap dist
	subProb, bgProb                           float64
	subWidth, subTurns                        dist
	join                                      bool
}

func (r mixReader) agentGen(c *class, f yamlwalk.Map) {
	g := &agentGen{join: true, subWidth: fixedDist(1, unitTokens), subTurns: fixedDist(2, unitTokens), toolGap: fixedDist(0, unitDuration)}
	c.gen = g
	for _, d := range []struct {
		key      string
		dst      *dist
		u        unit
		min      float64
		required bool
	}{
		{"input_tokens", &g.input, unitTokens, 1, true},
		{"turn_tokens", &g.turnTokens, unitTokens, 1, true},
		{"output_tokens", &g.output, unitTokens, 1, true},
		{"turns", &g.turns, unitTokens, 1, true},
		{"tool_gap", &g.toolGap, unitDuration, 0, false},
		{"subagent_width", &g.subWidth, unitTokens, 1, false},
		{"subagent_turns", &g.subTurns, unitTokens, 1, false},
	} {
		n, ok := f.Get(d.key)
		if !ok {
			if d.required {
				n.Missing()
			}
			continue
		}
		if v, ok := r.dist(n, d.u, d.min); ok {
			if d.u == unitTokens && d.key != "input_tokens" && d.key != "turn_tokens" && d.key != "output_tokens" && v.max > 256 {
				n.Errorf("at most 256")
			}
			*d.dst = v
		}
	}
	for _, p := range []struct {
		key string
		dst *float64
	}{{"subagent_probability", &g.subProb}, {"background_probability", &g.bgProb}} {
		if n, ok := f.Get(p.key); ok {
			if v, ok := n.Float(); ok {
				if !(v >= 0 && v <= 1) {
					n.Errorf("want a probability in [0, 1]")
				}
				*p.dst = v
			}
		}
	}
	if n, ok := f.Get("join"); ok {
		g.join, _ = n.Bool()
	}
}

// checkAgent bounds the history a session can build.
func (m *Mix) checkAgent(c *class) error {
	g := c.gen
	if g.input.max+g.turns.max*(g.turnTokens.max+g.output.max) > tokenLimit {
		return c.srcNode.Errorf("sessions of up to %v turns exceed %d tokens of history", g.turns.max, tokenLimit)
	}
	return nil
}

// agentLane builds one lane's calls: history grows by each answer and
// the next tool result.
type agentLane struct {
	agent      string
	background bool
	history    []Message
	tokens     int
}

// agentSession draws one synthetic session. Everything is drawn from a
// stream keyed by the session's index, so a session does not depend on
// the others, nor on the order they are sent in.
func (cs *classState) agentSession(s *mixSource) *Prompt {
	c, m, g := cs.c, s.m, cs.c.gen
	idx := cs.n
	r := newRNG(s.seed, c.key, fnv64("agent"), uint64(idx))
	gs := &gsession{id: strconv.Itoa(idx), blockSize: 1}
	corp := m.corp
	var calls []gcall
	var contents [][]Message
	newLane := func(agent string, bg bool) *agentLane {
		n := int(g.input.sample(r))
		return &agentLane{agent: agent, background: bg, history: []Message{{Role: "user", Content: corp.fresh(r, n)}}, tokens: n + m.templateTokens}
	}
	// The cache-bust marker is put before each lane's first message when
	// the graph is built.
	// add appends the lane's next call, waiting on after.
	add := func(l *agentLane, id string, after []Edge) int {
		out := int(g.output.sample(r))
		msgs := make([]Message, len(l.history))
		copy(msgs, l.history)
		calls = append(calls, gcall{id: id, in: l.tokens, out: out, after: after, agent: l.agent, background: l.background})
		contents = append(contents, msgs)
		// The answer as the trace would have recorded it, then the next
		// tool result.
		next := int(g.turnTokens.sample(r))
		l.history = append(l.history, Message{Role: "assistant", Content: corp.fresh(r, out)}, Message{Role: "user", Content: corp.fresh(r, next)})
		l.tokens += out + next
		return len(calls) - 1
	}
	gap := func() time.Duration { return time.Duration(g.toolGap.sample(r)) }
	main := newLane("", false)
	nt := int(g.turns.sample(r))
	prev := add(main, "0", nil)
	for k := 1; k < nt; k++ {
		after := []Edge{{From: prev, On: OnEnd, Delay: gap(), Tool: true}}
		if g.subProb > 0 && r.float64() < g.subProb {
			bg := !g.join || (g.bgProb > 0 && r.float64() < g.bgProb)
			w := int(g.subWidth.sample(r))
			for j := 0; j < w; j++ {
				name := "sub" + strconv.Itoa(k) + "-" + strconv.Itoa(j)
				l := newLane(name, bg)
				last := add(l, name+".0", []Edge{{From: prev, On: OnEnd}})
				st := int(g.subTurns.sample(r))
				for t := 1; t < st; t++ {
					last = add(l, name+"."+strconv.Itoa(t), []Edge{{From: last, On: OnEnd, Delay: gap(), Tool: true}})
				}
				if !bg {
					after = append(after, Edge{From: last, On: OnEnd})
				}
			}
		}
		prev = add(main, strconv.Itoa(k), after)
	}
	for i := range calls {
		calls[i].msgs = contents[i]
	}
	laneTurns(calls)
	gs.calls = calls
	return cs.buildGraph(s, gs, uint64(idx))
}
