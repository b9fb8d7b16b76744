package prompts

import (
	"io"
	"strconv"
	"strings"
	"time"
)

// Source is a deterministic stream of prompts. Next returns io.EOF when a
// finite source (a trace) is exhausted; other sources never end. A Source
// is used from one goroutine; the prompts it returns (and their FollowUp
// functions) may be used from any.
type Source interface {
	Next() (*Prompt, error)
}

// Source returns the stream of prompts for seed: the same mix and seed give
// the same prompts, byte for byte, on any machine. Each class draws from
// its own stream keyed by its name, so a class's prompts do not change
// when other classes are added or reweighted (only which class comes
// next does).
func (m *Mix) Source(seed int64) Source {
	s := &mixSource{m: m, seed: seed, pick: newRNG(seed, fnv64("tailgate/pick"))}
	s.cs = make([]classState, len(m.classes))
	for i, c := range m.classes {
		cs := &s.cs[i]
		cs.c = c
		cs.r = newRNG(seed, c.key)
		if n := c.records(); n > 0 && c.order != OrderRandom {
			cs.order = make([]int, n)
			for j := range cs.order {
				cs.order[j] = j
			}
			cs.pos = n // draw a permutation first
		}
		if c.prefix != nil && c.prefix.prefixes > 0 {
			cs.prefixes = make([]string, c.prefix.prefixes)
			for g := range cs.prefixes {
				cs.prefixes[g] = m.corp.fresh(newRNG(seed, c.key, fnv64("prefix"), uint64(g)), c.prefix.tokens)
			}
		}
	}
	return s
}

type mixSource struct {
	m    *Mix
	seed int64
	pick *rng
	cs   []classState
}

type classState struct {
	c        *class
	r        *rng
	n        int   // prompts drawn (trace: rows sent)
	order    []int // dataset permutation
	pos      int
	prefix   string // current shared prefix (prompts_per_prefix)
	prefixes []string
	idBuf    []byte
}

func (s *mixSource) Next() (*Prompt, error) {
	if s.m.trace {
		return s.nextTrace()
	}
	i := 0
	if len(s.cs) > 1 {
		u := s.pick.float64()
		for i < len(s.m.cum)-1 && u >= s.m.cum[i] {
			i++
		}
	}
	cs := &s.cs[i]
	p := cs.next(s)
	cs.n++
	return p, nil
}

// id is "<class>-<n>".
func (cs *classState) id() string {
	b := append(cs.idBuf[:0], cs.c.name...)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(cs.n), 10)
	cs.idBuf = b
	return string(b)
}

// maxTokens chooses the output length: the request's own, else the class
// setting, else the dataset's reference answer, else 0 (client default).
func (cs *classState) maxTokens(own, ref int) int {
	switch {
	case own > 0:
		return own
	case cs.c.maxTokens != nil:
		return int(cs.c.maxTokens.sample(cs.r))
	}
	return ref
}

func (cs *classState) next(s *mixSource) *Prompt { return cs.c.st.draw(cs, s) }

// synth draws a synthetic class's prompt or session.
func (cs *classState) synth(s *mixSource) *Prompt {
	if cs.c.sess != nil {
		return cs.syntheticSession(s)
	}
	return cs.synthetic(s)
}

// dataset draws a dataset class's prompt or session.
func (cs *classState) dataset(s *mixSource) *Prompt {
	c := cs.c
	it := &c.items[cs.pick()]
	if c.sess != nil {
		return cs.datasetSession(s, it)
	}
	ref := 0
	if len(it.refTokens) > 0 {
		ref = it.refTokens[0]
	}
	return &Prompt{
		ID: cs.id(), Class: c.name, Messages: it.messages, Text: it.text,
		MaxTokens: cs.maxTokens(it.maxTokens, ref), InputTokens: it.tokens + s.m.templateTokens,
		Params: it.params,
	}
}

// records is the number of records a dataset class draws from: its
// items, or the sessions of a session dataset (weka).
func (c *class) records() int {
	if c.st.sessions && !c.st.trace {
		return len(c.sessions)
	}
	return len(c.items)
}

// pick chooses the next dataset item in the class's order.
func (cs *classState) pick() int {
	switch cs.c.order {
	case OrderRandom:
		return cs.r.intn(cs.c.records())
	case OrderShuffle:
		if cs.pos == len(cs.order) {
			cs.r.perm(cs.order)
			cs.pos = 0
		}
	default:
		if cs.pos == len(cs.order) {
			cs.pos = 0
		}
	}
	i := cs.order[cs.pos]
	cs.pos++
	return i
}

// sharedPrefix is the system prefix of the class's current prompt.
func (cs *classState) sharedPrefix(s *mixSource) string {
	p := cs.c.prefix
	if p.prefixes > 0 {
		return cs.prefixes[cs.r.intn(len(cs.prefixes))]
	}
	if cs.n%p.perPrefix == 0 {
		g := uint64(cs.n / p.perPrefix)
		cs.prefix = s.m.corp.fresh(newRNG(s.seed, cs.c.key, fnv64("prefix"), g), p.tokens)
	}
	return cs.prefix
}

func (cs *classState) synthetic(s *mixSource) *Prompt {
	c := cs.c
	n := int(c.input.sample(cs.r))
	p := &Prompt{ID: cs.id(), Class: c.name, InputTokens: n, Params: c.params}
	p.MaxTokens = cs.maxTokens(0, 0)
	if c.prefix != nil {
		prefix := cs.sharedPrefix(s)
		body := s.m.corp.fresh(cs.r, max(1, n-s.m.templateTokens))
		p.Messages = []Message{{Role: "system", Content: prefix}, {Role: "user", Content: body}}
		p.InputTokens = n + c.prefix.tokens
		return p
	}
	p.Text = s.m.corp.fresh(cs.r, max(1, n-s.m.templateTokens))
	return p
}

func (s *mixSource) nextTrace() (*Prompt, error) {
	best := -1
	for i := range s.cs {
		cs := &s.cs[i]
		if cs.n >= len(cs.c.at) {
			continue
		}
		if best < 0 || cs.c.at[cs.n] < s.cs[best].c.at[s.cs[best].n] {
			best = i
		}
	}
	if best < 0 {
		return nil, io.EOF
	}
	cs := &s.cs[best]
	var p *Prompt
	if cs.c.st.sessions {
		p = cs.traceSession(s)
	} else {
		p = cs.traceRow(s)
	}
	cs.n++
	return p, nil
}

func (cs *classState) traceRow(s *mixSource) *Prompt {
	c := cs.c
	row := &c.rows[cs.n]
	p := &Prompt{
		ID: cs.id(), Class: c.name, MaxTokens: row.out, InputTokens: row.in,
		Params: c.params, At: c.at[cs.n],
	}
	n := max(1, row.in-s.m.templateTokens)
	if len(row.hashes) == 0 {
		p.Text = s.m.corp.fresh(cs.r, n)
		return p
	}
	// Mooncake: block k of the prompt is the text of hash_ids[k], so
	// requests that share leading ids share that prefix exactly; blocks
	// past the listed ids are fresh.
	bt := c.blockTokens
	corp := s.m.corp
	nblocks := (n + bt - 1) / bt
	spans := make([]textSpan, nblocks)
	size := 0
	for k := range spans {
		if k < len(row.hashes) {
			spans[k] = corp.blockSpan(s.seed^int64(c.key), row.hashes[k], bt)
		} else {
			spans[k] = corp.span(cs.r, bt)
		}
		size += corp.size(spans[k], min(bt, n-k*bt))
	}
	var b strings.Builder
	b.Grow(size)
	for k := range spans {
		corp.write(&b, spans[k], min(bt, n-k*bt))
	}
	p.Text = b.String()
	return p
}

// Sessions.

// session is everything about one conversation fixed when its first turn
// is drawn, so follow-ups consume no shared randomness and may be built on
// any goroutine, in any order, with the same result.
type session struct {
	id         string
	class      string
	system     []Message
	turns      []string
	turnTokens []int
	maxTokens  []int
	think      []time.Duration
	base       int // system tokens plus the template overhead
	params     map[string]any
	tok        Tokenizer
}

func (cs *classState) syntheticSession(s *mixSource) *Prompt {
	c := cs.c
	nt := int(c.sess.turns.sample(cs.r))
	ss := &session{id: cs.id(), class: c.name, params: c.params, tok: s.m.tok, base: s.m.templateTokens}
	if c.prefix != nil {
		ss.system = []Message{{Role: "system", Content: cs.sharedPrefix(s)}}
		ss.base += c.prefix.tokens
	}
	ss.turns = make([]string, nt)
	ss.turnTokens = make([]int, nt)
	ss.maxTokens = make([]int, nt)
	ss.think = make([]time.Duration, nt)
	for k := 0; k < nt; k++ {
		n := int(c.input.sample(cs.r))
		ss.turnTokens[k] = n
		ss.turns[k] = s.m.corp.fresh(cs.r, n)
		ss.maxTokens[k] = cs.maxTokens(0, 0)
		if k > 0 {
			ss.think[k] = time.Duration(c.sess.think.sample(cs.r))
		}
	}
	return ss.turn(0, ss.system, ss.base)
}

func (cs *classState) datasetSession(s *mixSource, it *item) *Prompt {
	c := cs.c
	nt := len(it.turns)
	ss := &session{
		id: cs.id(), class: c.name, system: it.system, turns: it.turns, turnTokens: it.turnTokens,
		params: it.params, tok: s.m.tok, base: it.systemTokens + s.m.templateTokens,
		maxTokens: make([]int, nt), think: make([]time.Duration, nt),
	}
	for k := 0; k < nt; k++ {
		own := 0
		if k == 0 {
			own = it.maxTokens
		}
		ss.maxTokens[k] = cs.maxTokens(own, it.refTokens[k])
		if k > 0 {
			ss.think[k] = time.Duration(c.sess.think.sample(cs.r))
		}
	}
	return ss.turn(0, ss.system, ss.base)
}

// turn builds turn k after history (which it does not modify) whose
// tokens are histTokens.
func (ss *session) turn(k int, history []Message, histTokens int) *Prompt {
	msgs := make([]Message, len(history), len(history)+1)
	copy(msgs, history)
	msgs = append(msgs, Message{Role: "user", Content: ss.turns[k]})
	tokens := histTokens + ss.turnTokens[k]
	p := &Prompt{
		ID: ss.id + "-t" + strconv.Itoa(k), Class: ss.class, Messages: msgs,
		MaxTokens: ss.maxTokens[k], InputTokens: tokens, Params: ss.params,
		Session: ss.id, Turn: k, Think: ss.think[k],
	}
	if k+1 < len(ss.turns) {
		p.FollowUp = func(answer string) *Prompt {
			h := make([]Message, len(msgs), len(msgs)+1)
			copy(h, msgs)
			h = append(h, Message{Role: "assistant", Content: answer})
			return ss.turn(k+1, h, tokens+ss.tok.Count(answer))
		}
	}
	return p
}
