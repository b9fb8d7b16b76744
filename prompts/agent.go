package prompts

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Session sources: a trace of agent sessions (weka, dynamo, otel) or the
// synthetic agent source. A trace is read into gsessions, calls with their
// recorded lengths, hash ids and edges; the text of a session's calls is
// built only when the session is drawn, from the trace and the seed.

// Session trace formats (source types).
const (
	SourceWeka   = "weka"
	SourceDynamo = "dynamo"
	SourceOTel   = "otel"
	SourceAgent  = "agent"
)

// DefaultIdleGapCap bounds every recorded delay of a session trace.
const DefaultIdleGapCap = 60 * time.Second

// agentSpec is the options of a session source shared by every format.
type agentSpec struct {
	models      map[string]string // a trace's model → the model to send; "*" for any other
	idleCap     time.Duration
	cacheBust   bool
	randomStart bool
	blockSize   int // 0: the trace's own
}

// gsession is one recorded session, before its content is built.
type gsession struct {
	id      string // the trace's session id
	line    int    // where it starts in the file (record index for JSON)
	startNs int64  // trace clock
	calls   []gcall
	// global: hash ids name blocks across the whole trace, not per session.
	global    bool
	blockSize int
	promised  int // prompt tokens that repeat an earlier block
	prompt    int
}

// gcall is one recorded call.
type gcall struct {
	id         string
	line       int
	startNs    int64 // from the session's start
	endNs      int64
	in, out    int
	hashes     []uint64
	msgs       []Message // recorded content (otel); nil: built from hashes
	model      string
	after      []Edge // delays as recorded, before time_scale and the cap
	offset     time.Duration
	agent      string
	background bool
	turn       int
}

// agentSource reads the options every session source takes.
func (r mixReader) agentSource(c *class, f yamlwalk.Map) {
	a := &agentSpec{idleCap: DefaultIdleGapCap}
	c.agent = a
	if n, ok := f.Get("idle_gap_cap"); ok {
		if d, ok := n.Duration(); ok {
			if d <= 0 {
				n.Errorf("want a positive duration")
			}
			a.idleCap = d
		}
	}
	if n, ok := f.Get("cache_bust"); ok {
		a.cacheBust, _ = n.Bool()
	}
	if n, ok := f.Get("random_start"); ok {
		a.randomStart, _ = n.Bool()
	}
	if n, ok := f.Get("block_size"); ok {
		if v, ok := n.Int(1, 1<<16); ok {
			a.blockSize = int(v)
		}
	}
	if n, ok := f.Get("models"); ok {
		mm, ok := n.Map()
		if !ok {
			return
		}
		a.models = map[string]string{}
		for _, k := range mm.Keys() {
			v, _ := mm.Get(k)
			if s, ok := v.Str(); ok {
				if s == "" {
					v.Errorf("empty model name")
				}
				a.models[k] = s
			}
		}
	}
}

// sendModel maps a recorded model through the models: table: "" (send
// the class's own) when there is no table.
func (a *agentSpec) sendModel(recorded string) (string, bool) {
	if a == nil || a.models == nil {
		return "", true
	}
	if m, ok := a.models[recorded]; ok {
		return m, true
	}
	m, ok := a.models["*"]
	return m, ok
}

// finishSessions checks a class's sessions against its options, sorts
// them by start, keeps the window and the limit, computes their arrival
// offsets and the prefix their hash ids promise.
func (m *Mix) finishSessions(c *class, ss []*gsession) error {
	if len(ss) == 0 {
		return &Error{File: c.path, Err: fmt.Errorf("no sessions in the trace")}
	}
	for _, s := range ss {
		for i := range s.calls {
			if _, ok := c.agent.sendModel(s.calls[i].model); !ok {
				return errAt(c.path, s.calls[i].line, "model", "model %q of session %q is not in the mix's models: table (add it, or a \"*\" entry)", s.calls[i].model, s.id)
			}
		}
		if c.agent.blockSize > 0 {
			s.blockSize = c.agent.blockSize
		}
		g := Graph{ID: s.id}
		for i := range s.calls {
			g.Calls = append(g.Calls, Call{ID: s.calls[i].id, Prompt: &Prompt{}, After: s.calls[i].after})
		}
		if err := g.Validate(); err != nil {
			return errAt(c.path, s.line, "", "%v", err)
		}
	}
	sort.SliceStable(ss, func(i, j int) bool { return ss[i].startNs < ss[j].startNs })
	t0 := ss[0].startNs
	kept := ss[:0]
	for _, s := range ss {
		off := time.Duration(s.startNs - t0)
		if off < c.from || (c.until > 0 && off >= c.until) {
			continue
		}
		kept = append(kept, s)
		if c.limit > 0 && len(kept) == c.limit {
			break
		}
	}
	if len(kept) == 0 {
		return &Error{File: c.path, Err: fmt.Errorf("no sessions in the window")}
	}
	global := map[uint64]bool{}
	for _, s := range kept {
		seen := global
		if !s.global {
			seen = map[uint64]bool{}
		}
		s.promised, s.prompt = promisedPrefix(s, seen)
	}
	c.sessions = kept
	if !c.st.trace {
		return nil
	}
	c.at = make([]time.Duration, len(kept))
	base := t0 + int64(c.from)
	for i, s := range kept {
		c.at[i] = m.scale(time.Duration(s.startNs - base))
	}
	return nil
}

// promisedPrefix counts, call by call, the leading prompt tokens whose
// hash ids a call before it already sent (seen holds those ids).
func promisedPrefix(s *gsession, seen map[uint64]bool) (promised, prompt int) {
	for i := range s.calls {
		cl := &s.calls[i]
		prompt += cl.in
		lead := true
		for k, h := range cl.hashes {
			if lead && seen[h] {
				promised += max(0, min(s.blockSize, cl.in-k*s.blockSize))
			} else {
				lead = false
			}
			seen[h] = true
		}
	}
	return promised, prompt
}

// scale applies the mix's time scale to a recorded duration.
func (m *Mix) scale(d time.Duration) time.Duration {
	if m.timeScale == 1 {
		return d
	}
	return time.Duration(math.Round(float64(d) * m.timeScale))
}

// delay is a recorded delay as replayed: scaled, then capped.
func (m *Mix) delay(a *agentSpec, d time.Duration) time.Duration {
	d = m.scale(max(0, d))
	if a != nil && a.idleCap > 0 && d > a.idleCap {
		d = a.idleCap
	}
	return d
}

// sessionDataset draws the next session of a session dataset (weka): in
// the class's order, cycling, like a dataset's records.
func (cs *classState) sessionDataset(s *mixSource) *Prompt {
	return cs.buildGraph(s, cs.c.sessions[cs.pick()], uint64(cs.n))
}

// traceSession builds the next session of a session trace class.
func (cs *classState) traceSession(s *mixSource) *Prompt {
	c := cs.c
	gs := c.sessions[cs.n]
	p := cs.buildGraph(s, gs, uint64(cs.n))
	p.At = c.at[cs.n]
	return p
}

// buildGraph turns a recorded session into its graph: content from the
// hash ids (or the recorded messages), delays scaled and capped, the
// cache-bust marker and the random start applied. Everything is drawn
// from a stream keyed by the session's index, so sessions do not depend
// on each other.
func (cs *classState) buildGraph(s *mixSource, gs *gsession, idx uint64) *Prompt {
	c, m := cs.c, s.m
	r := newRNG(s.seed, c.key, fnv64("session"), idx)
	marker := ""
	if c.agent != nil && c.agent.cacheBust {
		marker = fmt.Sprintf("[rid:%012x]\n\n", r.uint64()&(1<<48-1))
	}
	calls, warm := gs.calls, false
	if c.agent != nil && c.agent.randomStart {
		calls, warm = randomStart(calls, r)
	}
	gid := cs.id()
	g := &Graph{
		ID: gid, Trace: traceName(c, gs.id), Calls: make([]Call, len(calls)),
		PromisedPrefixTokens: gs.promised, PromptTokens: gs.prompt,
	}
	for i := range gs.calls {
		g.HashIDs = g.HashIDs || len(gs.calls[i].hashes) > 0
	}
	blockSeed := s.seed ^ int64(c.key)
	if !gs.global {
		blockSeed ^= int64(fnv64(gs.id))
	}
	for i := range calls {
		rc := &calls[i]
		p := &Prompt{
			ID: gid + "/" + rc.id, Class: c.name, MaxTokens: rc.out, InputTokens: rc.in,
			Params: c.params, Session: gid, Turn: rc.turn, Call: rc.id,
		}
		if name, _ := c.agent.sendModel(rc.model); name != "" {
			p.Params = mergeParams(c.params, map[string]any{"model": name})
		}
		if rc.msgs != nil {
			p.Messages = withMarker(rc.msgs, marker)
		} else {
			p.Messages = []Message{{Role: "user", Content: marker + blockText(m.corp, r, blockSeed, rc.hashes, gs.blockSize, max(1, rc.in-m.templateTokens))}}
		}
		after := make([]Edge, len(rc.after))
		for j, e := range rc.after {
			e.Delay = m.delay(c.agent, e.Delay)
			after[j] = e
		}
		g.Calls[i] = Call{
			ID: rc.id, Prompt: p, After: after, Offset: m.delay(c.agent, rc.offset),
			Agent: rc.agent, Background: rc.background, Warmup: warm && i == 0,
		}
	}
	for i := range g.Calls {
		g.Calls[i].Prompt.After = g.AfterIDs(i)
	}
	return &Prompt{ID: gid, Class: c.name, Session: gid, Graph: g}
}

// traceName is where a session came from: the file and the trace's
// session id, or the class and the session's index for a synthetic one.
func traceName(c *class, id string) string {
	path := c.path
	if path == "" {
		return c.name + "#" + id
	}
	if i := strings.LastIndexAny(path, `/\`); i >= 0 {
		path = path[i+1:]
	}
	return path + "#" + id
}

// withMarker copies msgs with the marker before the first user message.
func withMarker(msgs []Message, marker string) []Message {
	out := make([]Message, len(msgs))
	copy(out, msgs)
	if marker == "" {
		return out
	}
	for i := range out {
		if out[i].Role == "user" {
			out[i].Content = marker + out[i].Content
			break
		}
	}
	return out
}

// blockText is n tokens of text whose block k is the text of hashes[k]
// (so calls that share leading ids share that prefix exactly) and whose
// blocks past the ids are fresh.
func blockText(corp *corpus, r *rng, seed int64, hashes []uint64, bt, n int) string {
	if bt <= 0 {
		bt = 512
	}
	nblocks := (n + bt - 1) / bt
	spans := make([]textSpan, nblocks)
	size := 0
	for k := range spans {
		if k < len(hashes) {
			spans[k] = corp.blockSpan(seed, int64(hashes[k]), bt)
		} else {
			spans[k] = corp.span(r, bt)
		}
		size += corp.size(spans[k], min(bt, n-k*bt))
	}
	var b strings.Builder
	b.Grow(size)
	for k := range spans {
		corp.write(&b, spans[k], min(bt, n-k*bt))
	}
	return b.String()
}

// randomStart keeps a session's first call as a warm-up and the calls
// recorded from a random turn of the main lane on; an edge to a dropped
// call becomes an edge to the warm-up's end, so the replay starts there
// with the prefix the warm-up left in the cache. A lane too short to
// have a turn between its first and last is replayed whole, unwarmed.
func randomStart(calls []gcall, r *rng) ([]gcall, bool) {
	var main []int
	for i := range calls {
		if calls[i].agent == "" {
			main = append(main, i)
		}
	}
	if len(main) < 3 {
		return calls, false
	}
	k := main[1+r.intn(len(main)-1)]
	from := calls[k].startNs
	newIdx := make([]int, len(calls))
	out := []gcall{calls[0]}
	newIdx[0] = 0
	for i := 1; i < len(calls); i++ {
		newIdx[i] = -1
		if calls[i].startNs < from {
			continue
		}
		cl := calls[i]
		var after []Edge
		warm := false
		for _, e := range cl.after {
			if j := newIdx[e.From]; j >= 0 {
				e.From = j
				after = append(after, e)
			} else if !warm {
				warm = true
				after = append(after, Edge{From: 0, On: OnEnd})
			}
		}
		if len(after) == 0 {
			after = []Edge{{From: 0, On: OnEnd}}
		}
		cl.after, cl.offset = after, 0
		newIdx[i] = len(out)
		out = append(out, cl)
	}
	return out, true
}

// laneTurns numbers each call's turn within its lane.
func laneTurns(calls []gcall) {
	n := map[string]int{}
	for i := range calls {
		calls[i].turn = n[calls[i].agent]
		n[calls[i].agent]++
	}
}
