package prompts

import (
	"math"
	"time"
)

// Mix file fields.
var (
	mixFields    = []string{"kind", "apiVersion", "name", "description", "seed", "tokenizer", "template_tokens", "time_scale", "classes"}
	classFields  = []string{"name", "weight", "source", "max_tokens", "params", "sessions"}
	sourceFields = map[string][]string{
		SourceJSONL:     {"type", "path", "limit", "order"},
		SourceShareGPT:  {"type", "path", "limit", "order"},
		SourceSynthetic: {"type", "input_tokens", "shared_prefix"},
		SourceAzure:     {"type", "path", "limit", "from", "until"},
		SourceBurstGPT:  {"type", "path", "limit", "from", "until", "model"},
		SourceMooncake:  {"type", "path", "limit", "from", "until", "block_tokens"},
	}
	sessionFields = []string{"turns", "max_turns", "think_time"}
	// reservedParams belong to other fields or to the client.
	reservedParams = []string{"messages", "prompt", "max_tokens", "max_completion_tokens", "stream", "stream_options"}
)

// parseMix reads a mix file's YAML into a Mix whose classes are not yet
// loaded.
func parseMix(file string, data []byte, opts LoadOptions) (*Mix, error) {
	root, err := parseYAML(file, data)
	if err != nil {
		return nil, err
	}
	top, err := root.mapping()
	if err != nil {
		return nil, err
	}
	if err := top.only(mixFields...); err != nil {
		return nil, err
	}
	kn, err := top.require("kind")
	if err != nil {
		return nil, err
	}
	if k, err := kn.str(); err != nil || k != "Mix" {
		return nil, kn.errf("want kind: Mix, got %s", kindName(kn.n))
	}
	m := &Mix{file: file, name: className(file), timeScale: 1}
	if n, ok := top.get("apiVersion"); ok {
		if _, err := n.str(); err != nil {
			return nil, err
		}
	}
	if n, ok := top.get("name"); ok {
		if m.name, err = n.str(); err != nil {
			return nil, err
		}
	}
	if n, ok := top.get("description"); ok {
		if m.description, err = n.str(); err != nil {
			return nil, err
		}
	}
	if n, ok := top.get("seed"); ok {
		if m.seed, err = n.int(math.MinInt64, math.MaxInt64); err != nil {
			return nil, err
		}
	}
	if opts.Seed != 0 {
		m.seed = opts.Seed
	}
	m.tok = opts.Tokenizer
	if n, ok := top.get("tokenizer"); ok {
		name, err := n.str()
		if err != nil {
			return nil, err
		}
		if m.tok, err = NewTokenizer(name); err != nil {
			return nil, n.errf("%v", err)
		}
	}
	if m.tok == nil {
		if m.tok, err = NewTokenizer(DefaultEncoding); err != nil {
			return nil, root.errf("%v", err)
		}
	} else if err := checkTokenizer(m.tok); err != nil {
		return nil, &Error{File: file, Field: "tokenizer", Err: err}
	}
	if n, ok := top.get("template_tokens"); ok {
		v, err := n.int(0, 4096)
		if err != nil {
			return nil, err
		}
		m.templateTokens = int(v)
	}
	if n, ok := top.get("time_scale"); ok {
		if m.timeScale, err = n.float(); err != nil {
			return nil, err
		}
		if err := checkTimeScale(m.timeScale); err != nil {
			return nil, n.errf("%v", err)
		}
	}
	if opts.TimeScale != 0 {
		if err := checkTimeScale(opts.TimeScale); err != nil {
			return nil, &Error{File: file, Field: "time scale", Err: err}
		}
		m.timeScale = opts.TimeScale
	}
	cn, err := top.require("classes")
	if err != nil {
		return nil, err
	}
	list, err := cn.seq()
	if err != nil {
		return nil, err
	}
	if len(list) == 0 {
		return nil, cn.errf("no classes")
	}
	names := map[string]bool{}
	for i, x := range list {
		c, err := parseClass(x)
		if err != nil {
			return nil, err
		}
		if names[c.name] {
			n, _ := x.mapping()
			nn, _ := n.get("name")
			return nil, nn.errf("duplicate class name %q", c.name)
		}
		names[c.name] = true
		if i == 0 {
			m.trace = isTraceType(c.srcType)
		} else if m.trace != isTraceType(c.srcType) {
			return nil, c.srcNode.errf("cannot mix trace classes (azure, burstgpt, mooncake) with weighted classes in one mix")
		}
		m.classes = append(m.classes, c)
	}
	if !m.trace {
		total := 0.0
		for _, c := range m.classes {
			total += c.weight
		}
		if !(total > 0) || math.IsInf(total, 0) {
			return nil, cn.errf("class weights sum to %v; want a positive sum", total)
		}
	}
	return m, nil
}

func parseClass(x ynode) (*class, error) {
	f, err := x.mapping()
	if err != nil {
		return nil, err
	}
	if err := f.only(classFields...); err != nil {
		return nil, err
	}
	c := &class{line: x.line(), weight: 1, order: OrderShuffle}
	nn, err := f.require("name")
	if err != nil {
		return nil, err
	}
	if c.name, err = nn.str(); err != nil {
		return nil, err
	}
	if c.name == "" || len(c.name) > 64 {
		return nil, nn.errf("want 1 to 64 characters")
	}
	for i := 0; i < len(c.name); i++ {
		if !nameByte(c.name[i]) {
			return nil, nn.errf("%q: use letters, digits, '_', '-' and '.' only", c.name)
		}
	}
	c.key = fnv64(c.name)

	sn, err := f.require("source")
	if err != nil {
		return nil, err
	}
	if err := parseSource(c, sn); err != nil {
		return nil, err
	}
	trace := isTraceType(c.srcType)

	if n, ok := f.get("weight"); ok {
		if trace {
			return nil, n.errf("trace classes take no weight: the trace's timestamps set the arrivals")
		}
		if c.weight, err = n.float(); err != nil {
			return nil, err
		}
		if c.weight < 0 {
			return nil, n.errf("must not be negative")
		}
		if c.weight > 1e12 {
			return nil, n.errf("too large (at most 1e12)")
		}
	}
	if n, ok := f.get("max_tokens"); ok {
		if trace {
			return nil, n.errf("trace classes take output lengths from the trace")
		}
		d, err := parseDist(n, unitTokens, 1)
		if err != nil {
			return nil, err
		}
		c.maxTokens = &d
	}
	if n, ok := f.get("params"); ok {
		if c.params, err = n.anyMap(); err != nil {
			return nil, err
		}
		pm, _ := n.mapping()
		for _, k := range reservedParams {
			if pn, ok := pm.get(k); ok {
				return nil, pn.errf("not a parameter: set max_tokens on the class; messages, prompt and stream come from the source and client")
			}
		}
	}
	if n, ok := f.get("sessions"); ok {
		if trace {
			return nil, n.errf("trace classes cannot be sessions")
		}
		if c.sess, err = parseSessions(n, c.srcType); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func parseSource(c *class, x ynode) error {
	c.srcNode = x
	f, err := x.mapping()
	if err != nil {
		return err
	}
	tn, err := f.require("type")
	if err != nil {
		return err
	}
	if c.srcType, err = tn.str(); err != nil {
		return err
	}
	allowed, ok := sourceFields[c.srcType]
	if !ok {
		return tn.errf("unknown source type %q (want jsonl, sharegpt, synthetic, azure, burstgpt or mooncake)", c.srcType)
	}
	if err := f.only(allowed...); err != nil {
		return err
	}
	if c.srcType != SourceSynthetic {
		pn, err := f.require("path")
		if err != nil {
			return err
		}
		if c.path, err = pn.str(); err != nil {
			return err
		}
		if c.path == "" {
			return pn.errf("empty")
		}
		c.pathNode = pn
	}
	if n, ok := f.get("limit"); ok {
		v, err := n.int(1, math.MaxInt32)
		if err != nil {
			return err
		}
		c.limit = int(v)
	}
	if n, ok := f.get("order"); ok {
		if c.order, err = n.str(); err != nil {
			return err
		}
		switch c.order {
		case OrderShuffle, OrderSequential, OrderRandom:
		default:
			return n.errf("unknown order %q (want shuffle, sequential or random)", c.order)
		}
	}
	for _, w := range []struct {
		key string
		dst *time.Duration
	}{{"from", &c.from}, {"until", &c.until}} {
		if n, ok := f.get(w.key); ok {
			if *w.dst, err = n.duration(); err != nil {
				return err
			}
			if *w.dst < 0 {
				return n.errf("must not be negative")
			}
		}
	}
	if c.until != 0 && c.until <= c.from {
		n, _ := f.get("until")
		return n.errf("until %v is not after from %v", c.until, c.from)
	}
	if n, ok := f.get("model"); ok {
		if c.model, err = n.str(); err != nil {
			return err
		}
	}
	if c.srcType == SourceMooncake {
		c.blockTokens = 512
		if n, ok := f.get("block_tokens"); ok {
			v, err := n.int(1, 1<<16)
			if err != nil {
				return err
			}
			c.blockTokens = int(v)
		}
	}
	if c.srcType == SourceSynthetic {
		in, err := f.require("input_tokens")
		if err != nil {
			return err
		}
		if c.input, err = parseDist(in, unitTokens, 1); err != nil {
			return err
		}
		if n, ok := f.get("shared_prefix"); ok {
			if c.prefix, err = parsePrefix(n); err != nil {
				return err
			}
		}
	}
	return nil
}

func parsePrefix(x ynode) (*prefixSpec, error) {
	f, err := x.mapping()
	if err != nil {
		return nil, err
	}
	if err := f.only("tokens", "prompts_per_prefix", "prefixes"); err != nil {
		return nil, err
	}
	p := &prefixSpec{}
	tn, err := f.require("tokens")
	if err != nil {
		return nil, err
	}
	v, err := tn.int(1, tokenLimit/2)
	if err != nil {
		return nil, err
	}
	p.tokens = int(v)
	pp, hasPer := f.get("prompts_per_prefix")
	px, hasFixed := f.get("prefixes")
	switch {
	case hasPer && hasFixed:
		return nil, px.errf("give prompts_per_prefix or prefixes, not both")
	case hasPer:
		v, err := pp.int(1, math.MaxInt32)
		if err != nil {
			return nil, err
		}
		p.perPrefix = int(v)
	case hasFixed:
		v, err := px.int(1, 1<<16)
		if err != nil {
			return nil, err
		}
		if v*int64(p.tokens) > 1<<22 {
			return nil, px.errf("%d prefixes of %d tokens is too much text to hold (at most 2^22 tokens)", v, p.tokens)
		}
		p.prefixes = int(v)
	default:
		return nil, missingAt(x.file, x.line(), x.path+".prompts_per_prefix")
	}
	return p, nil
}

func parseSessions(x ynode, srcType string) (*sessionSpec, error) {
	f, err := x.mapping()
	if err != nil {
		return nil, err
	}
	if err := f.only(sessionFields...); err != nil {
		return nil, err
	}
	s := &sessionSpec{think: fixedDist(0, unitDuration)}
	if n, ok := f.get("turns"); ok {
		if srcType != SourceSynthetic {
			return nil, n.errf("turns come from the conversations of a %s source; use max_turns to cap them", srcType)
		}
		d, err := parseDist(n, unitTokens, 1)
		if err != nil {
			return nil, err
		}
		if d.max > 1024 {
			return nil, n.errf("at most 1024 turns")
		}
		s.turns = &d
	} else if srcType == SourceSynthetic {
		return nil, missingAt(x.file, x.line(), x.path+".turns")
	}
	if n, ok := f.get("max_turns"); ok {
		if srcType == SourceSynthetic {
			return nil, n.errf("synthetic sessions take turns, not max_turns")
		}
		v, err := n.int(1, 1024)
		if err != nil {
			return nil, err
		}
		s.maxTurns = int(v)
	}
	if n, ok := f.get("think_time"); ok {
		if s.think, err = parseDist(n, unitDuration, 0); err != nil {
			return nil, err
		}
	}
	return s, nil
}
