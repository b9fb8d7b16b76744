package prompts

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Source types of a class.
const (
	SourceJSONL     = "jsonl"
	SourceShareGPT  = "sharegpt"
	SourceSynthetic = "synthetic"
	// SourceAzure, SourceBurstGPT and SourceMooncake are in trace.go.
)

// Orders in which a dataset class draws its records.
const (
	OrderShuffle    = "shuffle"    // a fresh seeded permutation each pass (default)
	OrderSequential = "sequential" // file order, cycling
	OrderRandom     = "random"     // independent draws, with replacement
)

// LoadOptions are the command-line settings that override a mix file.
type LoadOptions struct {
	// Seed, when non-zero, replaces the mix file's seed (whose default is 0).
	Seed int64
	// TimeScale, when non-zero, replaces the mix file's time_scale: trace
	// arrival offsets are multiplied by it (0.5 replays twice as fast).
	TimeScale float64
	// Tokenizer is used when the mix file names none; nil means
	// cl100k_base.
	Tokenizer Tokenizer
	// Horizon, when non-zero, is how long the run lasts: a Mooncake trace
	// is read only up to the rows that fall within it plus TraceLookAhead,
	// not parsed whole (its identity then hashes the part read).
	Horizon time.Duration
}

// TraceLookAhead is how far past LoadOptions.Horizon (in run time) a
// trace is read: rows a little out of order still arrive on time, and the
// schedule's end is not cut short by a row just past it.
const TraceLookAhead = 30 * time.Second

// Mix is a loaded, validated mix: what to send, class by class. It is
// immutable and safe to share; each Source drawn from it has its own state.
type Mix struct {
	file           string
	name           string
	description    string
	seed           int64
	tok            Tokenizer
	templateTokens int
	timeScale      float64
	horizon        time.Duration // LoadOptions.Horizon
	classes        []*class
	trace          bool
	corp           *corpus
	cum            []float64 // class choice thresholds on [0, 1)
}

// class is one named class of a mix.
type class struct {
	name    string
	key     uint64 // stream key: fnv64 of the name
	line    int
	weight  float64
	srcType string
	st      *sourceType
	path    string
	sha256  string
	// stopNs, if > 0, is how much of a trace from its first row to read
	// (mooncake): a run of a known length needs only its start.
	stopNs int64
	// readBytes > 0: reading stopped there, before the end; sha256 is of
	// those bytes, and fileSize and modTime say which file they began.
	readBytes int64
	fileSize  int64
	modTime   time.Time
	order     string
	limit     int
	maxTokens *dist // nil: the request's own, the dataset's reference, or 0
	params    map[string]any
	skipped   int               // records read but unusable (too few turns, zero lengths, filtered)
	model     string            // burstgpt filter
	sendModel string            // the class's model: key, also params["model"]
	headers   map[string]string // the class's headers: key
	// acceptEmpty: an answer with no output token is a success for this
	// class (accept_empty: true), for workloads that expect empty replies.
	acceptEmpty bool

	// synthetic
	input  dist
	prefix *prefixSpec
	// datasets
	items []item
	// traces
	rows        []traceRow
	at          []time.Duration // rows[i]'s scaled offset from the trace start
	blockTokens int
	from, until time.Duration // window of trace time; until 0 = end
	// multi-turn
	sess *sessionSpec
	// session sources
	agent    *agentSpec
	sessions []*gsession
	gen      *agentGen // synthetic agent source

	pathNode, srcNode yamlwalk.Pos // for errors found while loading
}

// prefixSpec is the shared-prefix option of a synthetic class: a system
// message of tokens tokens shared by perPrefix consecutive prompts, or by
// prompts drawing one of prefixes fixed prefixes at random.
type prefixSpec struct {
	tokens    int
	perPrefix int
	prefixes  int
}

// sessionSpec makes a class multi-turn.
type sessionSpec struct {
	turns    *dist // synthetic: turns per session
	maxTurns int   // datasets: cap on turns taken from a conversation (0 = all)
	think    dist  // pause between an answer and the next turn
}

// item is one usable dataset record.
type item struct {
	line int
	// one-shot prompt
	messages []Message
	text     string
	tokens   int
	// session
	system       []Message
	systemTokens int
	turns        []string
	turnTokens   []int
	// refTokens is the reference answer length per turn (ShareGPT, or
	// assistant messages in chat JSONL), the default for max_tokens.
	refTokens []int
	maxTokens int
	params    map[string]any
}

// LoadMix reads and validates a mix file and everything it references,
// before any prompt is drawn. Every problem in the mix file is reported at
// once, as Errors of *Error values naming file, line and field; the data
// files are read only when the mix file has none.
func LoadMix(path string, opts LoadOptions) (*Mix, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &Error{File: path, Err: err}
	}
	m, err := parseMix(path, data, opts)
	if err != nil {
		return nil, err
	}
	if err := m.load(filepath.Dir(path)); err != nil {
		return nil, err
	}
	return m, nil
}

// LoadPromptsFile loads a bare prompts file as a one-class mix named after
// the file (its base name without extension). The format is told by
// content: a JSON array or objects with "conversations" are ShareGPT,
// objects with "messages" or "prompt" are chat JSONL, objects with
// "timestamp" and "input_length" a Mooncake trace; a CSV with
// ContextTokens is an Azure trace, one with "Request tokens" BurstGPT.
func LoadPromptsFile(path string, opts LoadOptions) (*Mix, error) {
	typ, err := detectFormat(path)
	if err != nil {
		return nil, err
	}
	tok := opts.Tokenizer
	if tok == nil {
		if tok, err = NewTokenizer(DefaultEncoding); err != nil {
			return nil, err
		}
	} else if err := checkTokenizer(tok); err != nil {
		return nil, &Error{File: path, Field: "tokenizer", Err: err}
	}
	name := className(path)
	c := &class{
		name: name, key: fnv64(name), weight: 1, srcType: typ, st: lookupSource(typ), path: path, order: OrderShuffle,
		pathNode: yamlwalk.Pos{File: path}, srcNode: yamlwalk.Pos{File: path},
	}
	if typ == SourceMooncake {
		c.blockTokens = 512
	}
	m := &Mix{
		file: path, name: name, seed: opts.Seed, tok: tok, timeScale: 1, horizon: opts.Horizon,
		classes: []*class{c}, trace: isTraceType(typ),
	}
	if opts.TimeScale != 0 {
		if err := checkTimeScale(opts.TimeScale); err != nil {
			return nil, &Error{File: path, Field: "time scale", Err: err}
		}
		m.timeScale = opts.TimeScale
	}
	if err := m.load(""); err != nil {
		return nil, err
	}
	return m, nil
}

func checkTimeScale(f float64) error {
	if !(f > 0 && f <= 1e6) {
		return fmt.Errorf("%v: want a number in (0, 1e6]", f)
	}
	return nil
}

// className makes a class name from a file name.
func className(path string) string {
	base := filepath.Base(path)
	base = strings.TrimSuffix(base, filepath.Ext(base))
	b := []byte(base)
	for i, c := range b {
		if !nameByte(c) {
			b[i] = '_'
		}
	}
	if len(b) == 0 || len(b) > 64 {
		return "prompts"
	}
	return string(b)
}

func nameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// Classes are the class names in mix-file order.
func (m *Mix) Classes() []string {
	out := make([]string, len(m.classes))
	for i, c := range m.classes {
		out[i] = c.name
	}
	return out
}

// AcceptEmpty names the classes whose answers may carry no output token
// (accept_empty: true); nil when none.
func (m *Mix) AcceptEmpty() []string {
	var out []string
	for _, c := range m.classes {
		if c.acceptEmpty {
			out = append(out, c.name)
		}
	}
	return out
}

// IsTrace reports whether the mix replays traces: its prompts carry At
// and the engine sends each at its At; a Source then ends with io.EOF.
func (m *Mix) IsTrace() bool { return m.trace }

// Seed is the effective seed: LoadOptions.Seed, else the file's seed.
// The engine's stream is m.Source(m.Seed()).
func (m *Mix) Seed() int64 { return m.seed }

// Tokenizer is the tokenizer the mix sizes prompts with; the engine may
// use it to count output tokens when a server gives no usage.
func (m *Mix) Tokenizer() Tokenizer { return m.tok }

// TimeScale is the factor applied to trace arrival offsets.
func (m *Mix) TimeScale() float64 { return m.timeScale }

// Name is the mix's name (the file's name: field, or the file stem).
func (m *Mix) Name() string { return m.name }

// Len is the number of prompts a Source yields before io.EOF for a trace
// mix (a session trace's prompts are sessions), or -1 for an endless one.
func (m *Mix) Len() int {
	if !m.trace {
		return -1
	}
	n := 0
	for _, c := range m.classes {
		n += len(c.at)
	}
	return n
}

// Span is the At of a trace's last request (0 for an endless mix): how
// long the replay's arrivals last.
func (m *Mix) Span() time.Duration {
	var span time.Duration
	for _, c := range m.classes {
		if n := len(c.at); n > 0 && c.at[n-1] > span {
			span = c.at[n-1]
		}
	}
	return span
}

// HasSessions reports whether any class is multi-turn, so the engine
// knows to keep answer text for the follow-up turns.
func (m *Mix) HasSessions() bool {
	for _, c := range m.classes {
		if c.sess != nil {
			return true
		}
	}
	return false
}

// HasGraphs reports whether any class yields agent sessions: prompts with
// Graph set, whose calls the engine runs by their edges.
func (m *Mix) HasGraphs() bool {
	for _, c := range m.classes {
		if c.st.sessions {
			return true
		}
	}
	return false
}

func (m *Mix) allGraphs() bool {
	for _, c := range m.classes {
		if !c.st.sessions {
			return false
		}
	}
	return true
}

// Models are the models the mix names, from its classes' model: keys and
// params, sorted and each once: what the preflight checks the server
// serves. A trace's models: table adds its names when loaded.
func (m *Mix) Models() []string {
	seen := map[string]bool{}
	var out []string
	for _, c := range m.classes {
		if s, ok := c.params["model"].(string); ok && s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// WithHeaders is src with each prompt given its class's headers: key, the
// later turns of a session included. Headers are per class, so they are
// set here, after the source drew the prompt, not by each source.
func (m *Mix) WithHeaders(src Source) Source {
	h := map[string]map[string]string{}
	for _, c := range m.classes {
		if len(c.headers) > 0 {
			h[c.name] = c.headers
		}
	}
	if len(h) == 0 {
		return src
	}
	return headerSource{src: src, byClass: h}
}

type headerSource struct {
	src     Source
	byClass map[string]map[string]string
}

func (s headerSource) Next() (*Prompt, error) {
	p, err := s.src.Next()
	if p != nil {
		s.stamp(p)
	}
	return p, err
}

func (s headerSource) stamp(p *Prompt) {
	if h, ok := s.byClass[p.Class]; ok && p.Headers == nil {
		p.Headers = h
	}
	if p.Graph != nil {
		for _, c := range p.Graph.Calls {
			if c.Prompt.Class == "" {
				c.Prompt.Class = p.Class
			}
			s.stamp(c.Prompt)
		}
	}
	if next := p.FollowUp; next != nil {
		p.FollowUp = func(answer string) *Prompt {
			q := next(answer)
			if q != nil {
				s.stamp(q)
			}
			return q
		}
	}
}
