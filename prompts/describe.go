package prompts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// canonicalMix is the resolved mix as JSON: what the evidence pack records
// and Hash digests. Data files appear by base name and SHA-256, so the
// hash does not depend on where the files lie.
type canonicalMix struct {
	Schema         string           `json:"schema"`
	Name           string           `json:"name"`
	Seed           int64            `json:"seed"`
	Tokenizer      string           `json:"tokenizer"`
	TemplateTokens int              `json:"template_tokens"`
	TimeScale      float64          `json:"time_scale"`
	Trace          bool             `json:"trace"`
	Classes        []canonicalClass `json:"classes"`
}

type canonicalClass struct {
	Name      string            `json:"name"`
	Weight    float64           `json:"weight,omitempty"`
	Share     float64           `json:"share,omitempty"`
	Source    canonicalSource   `json:"source"`
	MaxTokens string            `json:"max_tokens,omitempty"`
	Params    map[string]any    `json:"params,omitempty"`
	Sessions  *canonicalSession `json:"sessions,omitempty"`
	// AcceptEmpty: answers with no output token are successes.
	AcceptEmpty bool `json:"accept_empty,omitempty"`
}

type canonicalSource struct {
	Type         string `json:"type"`
	File         string `json:"file,omitempty"`
	SHA256       string `json:"sha256,omitempty"`
	Records      int    `json:"records,omitempty"`
	Skipped      int    `json:"skipped,omitempty"`
	Limit        int    `json:"limit,omitempty"`
	Order        string `json:"order,omitempty"`
	InputTokens  string `json:"input_tokens,omitempty"`
	SharedPrefix string `json:"shared_prefix,omitempty"`
	Model        string `json:"model,omitempty"`
	BlockTokens  int    `json:"block_tokens,omitempty"`
	From         string `json:"from,omitempty"`
	Until        string `json:"until,omitempty"`
	SpanMs       int64  `json:"span_ms,omitempty"`
	// ReadBytes, FileSize and ModTime: a trace read only up to a horizon;
	// SHA256 is then of its first ReadBytes bytes.
	ReadBytes int64  `json:"read_bytes,omitempty"`
	FileSize  int64  `json:"file_size,omitempty"`
	ModTime   string `json:"mod_time,omitempty"`
}

type canonicalSession struct {
	Turns     string `json:"turns,omitempty"`
	MaxTurns  int    `json:"max_turns,omitempty"`
	ThinkTime string `json:"think_time"`
}

func (m *Mix) canonical() canonicalMix {
	cm := canonicalMix{
		Schema: "tailgate.mix/v1", Name: m.name, Seed: m.seed, Tokenizer: m.tok.Name(),
		TemplateTokens: m.templateTokens, TimeScale: m.timeScale, Trace: m.trace,
	}
	prev := 0.0
	for i, c := range m.classes {
		cc := canonicalClass{Name: c.name, Params: c.params, AcceptEmpty: c.acceptEmpty}
		if !m.trace {
			cc.Weight = c.weight
			cc.Share = m.cum[i] - prev
			prev = m.cum[i]
		}
		src := canonicalSource{Type: c.srcType, SHA256: c.sha256, Skipped: c.skipped, Limit: c.limit}
		if c.path != "" {
			src.File = filepath.Base(c.path)
		}
		switch {
		case c.srcType == SourceSynthetic:
			src.InputTokens = c.input.String()
			if p := c.prefix; p != nil {
				if p.prefixes > 0 {
					src.SharedPrefix = fmt.Sprintf("%d tokens, %d prefixes", p.tokens, p.prefixes)
				} else {
					src.SharedPrefix = fmt.Sprintf("%d tokens, %d prompts per prefix", p.tokens, p.perPrefix)
				}
			}
		case c.st.path && !c.st.trace:
			src.Records, src.Order = c.records(), c.order
		case c.st.trace:
			src.Records, src.Model, src.BlockTokens = len(c.at), c.model, c.blockTokens
			if c.from > 0 {
				src.From = c.from.String()
			}
			if c.until > 0 {
				src.Until = c.until.String()
			}
			src.SpanMs = c.at[len(c.at)-1].Milliseconds()
			if c.readBytes > 0 {
				src.ReadBytes, src.FileSize, src.ModTime = c.readBytes, c.fileSize, c.modTime.Format(time.RFC3339Nano)
			}
		}
		cc.Source = src
		if c.maxTokens != nil {
			cc.MaxTokens = c.maxTokens.String()
		}
		if s := c.sess; s != nil {
			cs := &canonicalSession{MaxTurns: s.maxTurns, ThinkTime: s.think.String()}
			if s.turns != nil {
				cs.Turns = s.turns.String()
			}
			cc.Sessions = cs
		}
		cm.Classes = append(cm.Classes, cc)
	}
	return cm
}

// Canonical is the resolved mix as JSON (schema tailgate.mix/v1): every
// setting after defaults and overrides, data files by name and SHA-256.
// Two mixes with the same Canonical draw the same prompts for a seed.
func (m *Mix) Canonical() []byte {
	b, err := json.Marshal(m.canonical())
	if err != nil {
		// Params were checked to be JSON-encodable when the mix was loaded.
		panic("prompts: canonical form: " + err.Error())
	}
	return b
}

// Hash is the SHA-256 of Canonical, in hex.
func (m *Mix) Hash() string {
	h := sha256.Sum256(m.Canonical())
	return hex.EncodeToString(h[:])
}

// Describe is a short human-readable account of the mix, one line per
// class, for logs and the terminal.
func (m *Mix) Describe() string {
	cm := m.canonical()
	var b strings.Builder
	fmt.Fprintf(&b, "mix %s: seed %d, tokenizer %s", cm.Name, cm.Seed, cm.Tokenizer)
	if cm.TemplateTokens > 0 {
		fmt.Fprintf(&b, ", template %d tokens", cm.TemplateTokens)
	}
	if m.trace {
		what := "requests"
		if m.HasGraphs() {
			what = "requests or sessions"
			if m.allGraphs() {
				what = "sessions"
			}
		}
		fmt.Fprintf(&b, ", trace replay of %d %s over %v (time scale %g)", m.Len(), what, m.Span(), cm.TimeScale)
	}
	b.WriteByte('\n')
	for _, c := range cm.Classes {
		fmt.Fprintf(&b, "  %-16s", c.Name)
		if !m.trace {
			fmt.Fprintf(&b, " %5.1f%%", 100*c.Share)
		}
		s := c.Source
		fmt.Fprintf(&b, "  %s", s.Type)
		if s.File != "" {
			fmt.Fprintf(&b, " %s (%d records", s.File, s.Records)
			if s.Skipped > 0 {
				fmt.Fprintf(&b, ", %d skipped", s.Skipped)
			}
			if s.ReadBytes > 0 {
				fmt.Fprintf(&b, ", read to the run's end plus %v: %d of %d bytes", TraceLookAhead, s.ReadBytes, s.FileSize)
			}
			b.WriteByte(')')
		}
		if s.InputTokens != "" {
			fmt.Fprintf(&b, " input %s", s.InputTokens)
		}
		if s.SharedPrefix != "" {
			fmt.Fprintf(&b, ", shared prefix %s", s.SharedPrefix)
		}
		if c.MaxTokens != "" {
			fmt.Fprintf(&b, ", max_tokens %s", c.MaxTokens)
		}
		if c.Sessions != nil {
			fmt.Fprintf(&b, ", sessions")
			if c.Sessions.Turns != "" {
				fmt.Fprintf(&b, " of %s turns", c.Sessions.Turns)
			}
			fmt.Fprintf(&b, ", think %s", c.Sessions.ThinkTime)
		}
		b.WriteByte('\n')
	}
	return b.String()
}
