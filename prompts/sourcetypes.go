package prompts

import (
	"io"
	"math"
	"slices"
	"strings"
)

// sourceType is one row of the table of source formats: everything the
// mix reader, the loader, the drawing and the canonical form need to know
// about a format. A new format is one file and one row.
type sourceType struct {
	name string
	// fields are the keys its source: map accepts.
	fields []string
	// path: the source reads a file (or a directory, for session traces).
	path bool
	// trace: arrivals come from the trace's own clock; a class of it takes
	// no weight and its Source ends.
	trace bool
	// sessions: it yields one *Prompt per agent session, with Graph set.
	sessions bool
	// load reads the class's data (nil: nothing to read).
	load func(m *Mix, c *class) error
	// rows parses a request trace into rows (trace formats without
	// sessions); t0 is the first timestamp of rows it filtered out.
	rows func(c *class, r io.Reader) (rows []traceRow, t0 int64, err error)
	// draw builds the next prompt of a weighted class (non-trace).
	draw func(cs *classState, s *mixSource) *Prompt
	// needsCorpus: its prompts are built from the synthetic corpus.
	needsCorpus bool
}

// agentFields are the keys every session-trace source takes beside its own.
var agentTraceFields = []string{"type", "path", "limit", "from", "until", "models", "idle_gap_cap", "cache_bust", "random_start"}

// sourceTypes is the table, in the order error messages list them.
var sourceTypes = []*sourceType{
	{name: SourceJSONL, fields: []string{"type", "path", "limit", "order"}, path: true, load: (*Mix).loadDataset, draw: (*classState).dataset},
	{name: SourceShareGPT, fields: []string{"type", "path", "limit", "order"}, path: true, load: (*Mix).loadDataset, draw: (*classState).dataset},
	{name: SourceSynthetic, fields: []string{"type", "input_tokens", "shared_prefix"}, load: (*Mix).checkSynthetic, draw: (*classState).synth, needsCorpus: true},
	{name: SourceAzure, fields: []string{"type", "path", "limit", "from", "until"}, path: true, trace: true, load: (*Mix).loadTrace, rows: azureRows, needsCorpus: true},
	{name: SourceBurstGPT, fields: []string{"type", "path", "limit", "from", "until", "model"}, path: true, trace: true, load: (*Mix).loadTrace, rows: burstRows, needsCorpus: true},
	{name: SourceMooncake, fields: []string{"type", "path", "limit", "from", "until", "block_tokens"}, path: true, trace: true, load: (*Mix).loadTrace, rows: mooncakeRows, needsCorpus: true},
	// A weka trace records no session start: its sessions are a dataset,
	// drawn in order at --rate or by --concurrency lanes.
	{name: SourceWeka, fields: []string{"type", "path", "limit", "order", "models", "idle_gap_cap", "cache_bust", "random_start", "block_size"}, path: true, sessions: true, load: (*Mix).loadWeka, draw: (*classState).sessionDataset, needsCorpus: true},
	{name: SourceDynamo, fields: append(slices.Clip(agentTraceFields), "block_size"), path: true, trace: true, sessions: true, load: (*Mix).loadDynamo, needsCorpus: true},
	{name: SourceOTel, fields: agentTraceFields, path: true, trace: true, sessions: true, load: (*Mix).loadOTel, needsCorpus: true},
	{name: SourceAgent, fields: agentFields, sessions: true, load: (*Mix).checkAgent, draw: (*classState).agentSession, needsCorpus: true},
}

// lookupSource finds a row of the table by name (nil if none).
func lookupSource(name string) *sourceType {
	for _, st := range sourceTypes {
		if st.name == name {
			return st
		}
	}
	return nil
}

// sourceNames lists the table's names for an error message: "a, b or c".
func sourceNames() string {
	n := len(sourceTypes)
	names := make([]string, n)
	for i, st := range sourceTypes {
		names[i] = st.name
	}
	return strings.Join(names[:n-1], ", ") + " or " + names[n-1]
}

// traceTypes lists the trace formats, for the message that refuses to
// mix them with weighted classes.
func traceTypes() string {
	var names []string
	for _, st := range sourceTypes {
		if st.trace {
			names = append(names, st.name)
		}
	}
	return strings.Join(names, ", ")
}

func isTraceType(t string) bool {
	st := lookupSource(t)
	return st != nil && st.trace
}

func azureRows(c *class, r io.Reader) ([]traceRow, int64, error) {
	rows, err := parseAzureTrace(c.path, r, c.limit)
	return rows, math.MaxInt64, err
}

func burstRows(c *class, r io.Reader) ([]traceRow, int64, error) {
	rows, filtered, t0, err := parseBurstGPT(c.path, r, c.limit, c.model)
	c.skipped += filtered
	return rows, t0, err
}

func mooncakeRows(c *class, r io.Reader) ([]traceRow, int64, error) {
	rows, read, err := readMooncake(c.path, r, c.limit, c.stopNs)
	c.readBytes = read
	return rows, math.MaxInt64, err
}
