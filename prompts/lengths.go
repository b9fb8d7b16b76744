package prompts

// LengthPlan is how a mix plans its requests' token lengths, class by
// class: what summary.json records (planned_lengths) so a report can state
// the planned input and output lengths beside the measured ones. A class
// whose lengths come from its data (a dataset, a trace, a session's
// growing history) has no planned length: the records say what was sent.
type LengthPlan struct {
	Classes []ClassLengths `json:"classes"`
}

// ClassLengths is one class's planned lengths.
type ClassLengths struct {
	Class string `json:"class"`
	// Share is the class's share of the requests (its weight over the
	// mix's total).
	Share float64 `json:"share"`
	// InputTokens is the prompt length drawn, shared prefix included; nil
	// when the class's data sets it.
	InputTokens *LengthDist `json:"input_tokens,omitempty"`
	// MaxTokens is the output bound asked (max_tokens), a cap the server
	// may stop short of; nil when the mix does not set it for the class.
	MaxTokens *LengthDist `json:"max_tokens,omitempty"`
}

// LengthDist is a token-length distribution as the mix gives it: dist is
// fixed (value), uniform (min, max), normal or lognormal (mean, stddev,
// and min and max when the mix bounds it tighter than the defaults).
type LengthDist struct {
	Dist   string   `json:"dist"`
	Value  *float64 `json:"value,omitempty"`
	Mean   *float64 `json:"mean,omitempty"`
	StdDev *float64 `json:"stddev,omitempty"`
	Min    *float64 `json:"min,omitempty"`
	Max    *float64 `json:"max,omitempty"`
}

// planDist is d shifted by add tokens (a shared prefix), as written in
// a LengthPlan.
func planDist(d dist, add float64) *LengthDist {
	f := func(v float64) *float64 { return &v }
	ld := &LengthDist{Dist: d.kind}
	switch d.kind {
	case DistFixed:
		ld.Value = f(d.value + add)
	case DistUniform:
		ld.Min, ld.Max = f(d.min+add), f(d.max+add)
	default:
		ld.Mean, ld.StdDev = f(d.mean+add), f(d.stddev)
		lo, hi := d.unit.bounds(1)
		if d.min != lo {
			ld.Min = f(d.min + add)
		}
		if d.max != hi {
			ld.Max = f(d.max + add)
		}
	}
	return ld
}

// Lengths is the mix's length plan; nil for a trace, whose rows set every
// length.
func (m *Mix) Lengths() *LengthPlan {
	if m.trace {
		return nil
	}
	lp := &LengthPlan{}
	prev := 0.0
	for i, c := range m.classes {
		cl := ClassLengths{Class: c.name, Share: m.cum[i] - prev}
		prev = m.cum[i]
		if c.srcType == SourceSynthetic && c.sess == nil && c.agent == nil && c.gen == nil {
			add := 0.0
			if c.prefix != nil {
				add = float64(c.prefix.tokens)
			}
			cl.InputTokens = planDist(c.input, add)
			if c.maxTokens != nil {
				cl.MaxTokens = planDist(*c.maxTokens, 0)
			}
		}
		lp.Classes = append(lp.Classes, cl)
	}
	return lp
}
