package prompts

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Mix file fields.
var (
	mixFields     = []string{"kind", "apiVersion", "name", "description", "seed", "tokenizer", "template_tokens", "time_scale", "classes"}
	classFields   = []string{"name", "weight", "source", "max_tokens", "params", "sessions", "model", "headers", "accept_empty"}
	sessionFields = []string{"turns", "max_turns", "think_time"}
	// reservedParams belong to other fields or to the client.
	reservedParams = []string{"messages", "prompt", "max_tokens", "max_completion_tokens", "stream", "stream_options"}
)

// parseMix reads a mix file's YAML into a Mix whose classes are not yet
// loaded. The error lists every problem in the file, each an *Error.
func parseMix(file string, data []byte, opts LoadOptions) (*Mix, error) {
	doc, root := yamlwalk.Parse(file, data)
	r := mixReader{doc: doc}
	m := r.mix(root, opts)
	if err := doc.Err(); err != nil {
		return nil, err
	}
	return m, nil
}

// mixReader reads one mix file, recording every problem in doc. Its
// methods return what they read and whether it was read without error.
type mixReader struct{ doc *yamlwalk.Doc }

func (r mixReader) mix(root yamlwalk.Node, opts LoadOptions) *Mix {
	if !root.Valid() {
		return nil
	}
	top, _ := root.Map()
	if !root.IsMap() {
		return nil
	}
	kn, ok := top.Require("kind")
	if !ok {
		return nil
	}
	if !kn.IsScalar() || kn.Yaml().Tag != "!!str" || kn.Yaml().Value != "Mix" {
		// Not a mix: its other fields would only add noise.
		kn.Errorf("want kind: Mix, got %s", kn.Describe())
		return nil
	}
	top.Only(mixFields...)
	file := r.doc.File()
	m := &Mix{file: file, name: className(file), timeScale: 1, horizon: opts.Horizon}
	if n, ok := top.Get("apiVersion"); ok {
		n.Str()
	}
	if n, ok := top.Get("name"); ok {
		if s, ok := n.Str(); ok {
			m.name = s
		}
	}
	if n, ok := top.Get("description"); ok {
		m.description, _ = n.Str()
	}
	if n, ok := top.Get("seed"); ok {
		m.seed, _ = n.Int(math.MinInt64, math.MaxInt64)
	}
	if opts.Seed != 0 {
		m.seed = opts.Seed
	}
	m.tok = opts.Tokenizer
	if n, ok := top.Get("tokenizer"); ok {
		if name, ok := n.Str(); ok {
			tok, err := NewTokenizer(name)
			if err != nil {
				n.Errorf("%v", err)
			}
			m.tok = tok
		}
	}
	if m.tok == nil {
		var err error
		if m.tok, err = NewTokenizer(DefaultEncoding); err != nil {
			root.Errorf("%v", err)
		}
	} else if err := checkTokenizer(m.tok); err != nil {
		r.doc.Add(&Error{File: file, Field: "tokenizer", Err: err})
	}
	if n, ok := top.Get("template_tokens"); ok {
		v, _ := n.Int(0, 4096)
		m.templateTokens = int(v)
	}
	if n, ok := top.Get("time_scale"); ok {
		if v, ok := n.Float(); ok {
			if err := checkTimeScale(v); err != nil {
				n.Errorf("%v", err)
			}
			m.timeScale = v
		}
	}
	if opts.TimeScale != 0 {
		if err := checkTimeScale(opts.TimeScale); err != nil {
			r.doc.Add(&Error{File: file, Field: "time scale", Err: err})
		}
		m.timeScale = opts.TimeScale
	}
	cn, ok := top.Require("classes")
	if !ok {
		return m
	}
	list, ok := cn.List()
	if !ok {
		return m
	}
	if len(list) == 0 {
		cn.Errorf("no classes")
		return m
	}
	names := map[string]bool{}
	allRead := true
	for _, x := range list {
		c, ok := r.class(x, names)
		if !ok {
			allRead = false
			continue
		}
		if len(m.classes) == 0 {
			m.trace = isTraceType(c.srcType)
		} else if m.trace != isTraceType(c.srcType) {
			r.doc.Add(c.srcNode.Errorf("cannot mix trace classes (%s) with weighted classes in one mix", traceTypes()))
			allRead = false
			continue
		}
		m.classes = append(m.classes, c)
	}
	if allRead && !m.trace {
		total := 0.0
		for _, c := range m.classes {
			total += c.weight
		}
		if !(total > 0) || math.IsInf(total, 0) {
			cn.Errorf("class weights sum to %v; want a positive sum", total)
		}
	}
	return m
}

// class reads one class; names are the class names read so far.
func (r mixReader) class(x yamlwalk.Node, names map[string]bool) (*class, bool) {
	start := r.doc.Count()
	f, _ := x.Map(classFields...)
	if !x.IsMap() {
		return nil, false
	}
	c := &class{line: x.Line(), weight: 1, order: OrderShuffle}
	if nn, ok := f.Require("name"); ok {
		if s, ok := nn.Str(); ok {
			c.name = s
			switch {
			case s == "" || len(s) > 64:
				nn.Errorf("want 1 to 64 characters")
			case !validClassName(s):
				nn.Errorf("%q: use letters, digits, '_', '-' and '.' only", s)
			case names[s]:
				nn.Errorf("duplicate class name %q", s)
			}
			names[s] = true
		}
	}
	c.key = fnv64(c.name)

	if sn, ok := f.Require("source"); ok {
		r.source(c, sn)
	}
	trace := isTraceType(c.srcType)

	if n, ok := f.Get("weight"); ok {
		if trace {
			n.Errorf("trace classes take no weight: the trace's timestamps set the arrivals")
		} else if w, ok := n.Float(); ok {
			switch {
			case w < 0:
				n.Errorf("must not be negative")
			case w > 1e12:
				n.Errorf("too large (at most 1e12)")
			}
			c.weight = w
		}
	}
	if n, ok := f.Get("max_tokens"); ok {
		if trace {
			n.Errorf("trace classes take output lengths from the trace")
		} else if c.srcType == SourceAgent {
			n.Errorf("agent sources take output_tokens in source:")
		} else if d, ok := r.dist(n, unitTokens, 1); ok {
			c.maxTokens = &d
		}
	}
	if n, ok := f.Get("params"); ok {
		c.params = r.params(n)
	}
	if n, ok := f.Get("model"); ok {
		r.classModel(c, n)
	}
	if n, ok := f.Get("headers"); ok {
		c.headers = r.headers(n)
	}
	if n, ok := f.Get("accept_empty"); ok {
		c.acceptEmpty, _ = n.Bool()
	}
	if n, ok := f.Get("sessions"); ok {
		if trace {
			n.Errorf("trace classes cannot be sessions")
		} else {
			c.sess = r.sessions(n, c.srcType)
		}
	}
	return c, r.doc.Count() == start
}

func validClassName(s string) bool {
	for i := 0; i < len(s); i++ {
		if !nameByte(s[i]) {
			return false
		}
	}
	return true
}

func (r mixReader) source(c *class, x yamlwalk.Node) {
	c.srcNode = x.Pos()
	f, _ := x.Map()
	if !x.IsMap() {
		return
	}
	tn, ok := f.Require("type")
	if !ok {
		return
	}
	if c.srcType, ok = tn.Str(); !ok {
		return
	}
	c.st = lookupSource(c.srcType)
	if c.st == nil {
		// The other fields depend on the type.
		tn.Errorf("unknown source type %q (want %s)", c.srcType, sourceNames())
		return
	}
	f.Only(c.st.fields...)
	if c.st.path {
		if pn, ok := f.Require("path"); ok {
			if c.path, ok = pn.Str(); ok && c.path == "" {
				pn.Errorf("empty")
			}
			c.pathNode = pn.Pos()
		}
	}
	if n, ok := f.Get("limit"); ok {
		v, _ := n.Int(1, math.MaxInt32)
		c.limit = int(v)
	}
	if n, ok := f.Get("order"); ok {
		if c.order, ok = n.Str(); ok {
			switch c.order {
			case OrderShuffle, OrderSequential, OrderRandom:
			default:
				n.Errorf("unknown order %q (want shuffle, sequential or random)", c.order)
			}
		}
	}
	for _, w := range []struct {
		key string
		dst *time.Duration
	}{{"from", &c.from}, {"until", &c.until}} {
		if n, ok := f.Get(w.key); ok {
			*w.dst, _ = n.Duration()
		}
	}
	if c.until != 0 && c.until <= c.from {
		n, _ := f.Get("until")
		n.Errorf("until %v is not after from %v", c.until, c.from)
	}
	if n, ok := f.Get("model"); ok {
		c.model, _ = n.Str()
	}
	if c.srcType == SourceMooncake {
		c.blockTokens = 512
		if n, ok := f.Get("block_tokens"); ok {
			if v, ok := n.Int(1, 1<<16); ok {
				c.blockTokens = int(v)
			}
		}
	}
	if c.st.sessions {
		r.agentSource(c, f)
	}
	if c.srcType == SourceAgent {
		r.agentGen(c, f)
	}
	if c.srcType == SourceSynthetic {
		if in, ok := f.Require("input_tokens"); ok {
			c.input, _ = r.dist(in, unitTokens, 1)
		}
		if n, ok := f.Get("shared_prefix"); ok {
			c.prefix = r.prefix(n)
		}
	}
}

func (r mixReader) prefix(x yamlwalk.Node) *prefixSpec {
	f, _ := x.Map("tokens", "prompts_per_prefix", "prefixes")
	if !x.IsMap() {
		return nil
	}
	p := &prefixSpec{}
	if tn, ok := f.Require("tokens"); ok {
		v, _ := tn.Int(1, tokenLimit/2)
		p.tokens = int(v)
	}
	pp, hasPer := f.Get("prompts_per_prefix")
	px, hasFixed := f.Get("prefixes")
	switch {
	case hasPer && hasFixed:
		px.Errorf("give prompts_per_prefix or prefixes, not both")
	case hasPer:
		v, _ := pp.Int(1, math.MaxInt32)
		p.perPrefix = int(v)
	case hasFixed:
		if v, ok := px.Int(1, 1<<16); ok {
			if v*int64(p.tokens) > 1<<22 {
				px.Errorf("%d prefixes of %d tokens is too much text to hold (at most 2^22 tokens)", v, p.tokens)
			}
			p.prefixes = int(v)
		}
	default:
		pp.Missing()
	}
	return p
}

func (r mixReader) sessions(x yamlwalk.Node, srcType string) *sessionSpec {
	f, _ := x.Map(sessionFields...)
	if !x.IsMap() {
		return nil
	}
	s := &sessionSpec{think: fixedDist(0, unitDuration)}
	if n, ok := f.Get("turns"); ok {
		if srcType != SourceSynthetic {
			n.Errorf("turns come from the conversations of a %s source; use max_turns to cap them", srcType)
		} else if d, ok := r.dist(n, unitTokens, 1); ok {
			if d.max > 1024 {
				n.Errorf("at most 1024 turns")
			}
			s.turns = &d
		}
	} else if srcType == SourceSynthetic {
		n.Missing()
	}
	if n, ok := f.Get("max_turns"); ok {
		if srcType == SourceSynthetic {
			n.Errorf("synthetic sessions take turns, not max_turns")
		} else {
			v, _ := n.Int(1, 1024)
			s.maxTurns = int(v)
		}
	}
	if n, ok := f.Get("think_time"); ok {
		if d, ok := r.dist(n, unitDuration, 0); ok {
			s.think = d
		}
	}
	return s
}

// classModel reads a class's model: the model or LoRA adapter its
// prompts are sent to. It travels as the "model" parameter, which every
// source copies onto its prompts and Prompt.ModelName reads; a params:
// model naming another is a contradiction.
func (r mixReader) classModel(c *class, n yamlwalk.Node) {
	s, ok := n.Str()
	if !ok {
		return
	}
	if s == "" {
		n.Errorf("want a model name")
		return
	}
	if pm, ok := c.params["model"]; ok && pm != s {
		n.Errorf("model %q, but params names model %v: name it once", s, pm)
		return
	}
	if c.params == nil {
		c.params = map[string]any{}
	}
	c.params["model"] = s
	c.sendModel = s
}

// headers reads a class's extra request headers: names as HTTP allows
// them, string values (a tenant id, a routing hint).
func (r mixReader) headers(x yamlwalk.Node) map[string]string {
	var m map[string]string
	if err := x.Yaml().Decode(&m); err != nil {
		x.Errorf("want a map of header names to strings: %v", err)
		return nil
	}
	for k, v := range m {
		switch {
		case !validHeaderName(k):
			x.Errorf("header %q: a header name is letters, digits and !#$%%&'*+-.^_`|~ only", k)
		case strings.EqualFold(k, "content-type") || strings.EqualFold(k, "content-length") || strings.EqualFold(k, "host"):
			x.Errorf("header %q is the client's to set", k)
		case strings.ContainsAny(v, "\r\n\x00"):
			x.Errorf("header %q: the value holds a line break or NUL", k)
		}
	}
	return m
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(nameByte(c) || strings.IndexByte("!#$%&'*+^`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// params reads a class's request parameters.
func (r mixReader) params(x yamlwalk.Node) map[string]any {
	pm, ok := x.Map()
	if !ok {
		return nil
	}
	for _, k := range reservedParams {
		if pn, ok := pm.Get(k); ok {
			pn.Errorf("not a parameter: set max_tokens on the class; messages, prompt and stream come from the source and client")
		}
	}
	var m map[string]any
	if err := x.Yaml().Decode(&m); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			x.Errorf("%s", te.Errors[0])
		} else {
			x.Errorf("%v", err)
		}
		return nil
	}
	if err := checkJSONable(m); err != nil {
		x.Errorf("%v", err)
		return nil
	}
	return m
}

// checkJSONable rejects values encoding/json cannot write (YAML allows
// non-string keys and timestamps).
func checkJSONable(v any) error {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if err := checkJSONable(e); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
		}
	case []any:
		for _, e := range t {
			if err := checkJSONable(e); err != nil {
				return err
			}
		}
	case nil, string, bool, int, int64, uint64, float64:
	case float32:
	default:
		return fmt.Errorf("unsupported value %v (%T)", v, v)
	}
	if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return fmt.Errorf("not a finite number")
	}
	return nil
}
