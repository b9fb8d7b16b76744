package prompts

import (
	"fmt"
	"time"
)

// A session graph is an agent session as a trace recorded it: a set of
// calls, each with its content already built (deterministic from the
// trace and the seed), and edges that say what each call waits for. The
// engine runs the graph; nothing in it depends on the answers, so a
// replay sends the same bytes whatever the server says.

// EdgeOn is the predecessor event an edge waits for.
type EdgeOn uint8

const (
	// OnEnd waits for the predecessor's answer to end (a tool round trip,
	// a next turn, a join on a subagent's result).
	OnEnd EdgeOn = iota
	// OnStart waits for the predecessor to be sent (a subagent launched
	// beside its parent's call).
	OnStart
	// OnFirstToken waits for the predecessor's first output token.
	OnFirstToken
)

var edgeOnNames = [...]string{OnEnd: "end", OnStart: "start", OnFirstToken: "first_token"}

func (o EdgeOn) String() string {
	if int(o) < len(edgeOnNames) {
		return edgeOnNames[o]
	}
	return fmt.Sprintf("EdgeOn(%d)", uint8(o))
}

// Edge is one dependency of a call: it is due Delay after call From's
// event On. A call with several edges is a join: due at the latest of
// them, once every one is met.
type Edge struct {
	From  int // index of the predecessor in Graph.Calls; always below the call's own
	On    EdgeOn
	Delay time.Duration // think time or a tool's recorded duration, already capped
	// Tool marks a delay that is a tool call's duration (reported as tool
	// wait) rather than a person's or an agent's think time.
	Tool bool
}

// Call is one LLM call of a session.
type Call struct {
	// ID names the call within its session (a trace's request id, or its
	// position, "3" or "3.1" for a subagent's second call); records carry
	// it as "call".
	ID string
	// Prompt is the content, MaxTokens the recorded output. Its Session is
	// the graph's ID and its Turn the call's turn index in its lane (0 for
	// a session's first call, the same numbering in a subagent's lane).
	Prompt *Prompt
	// After lists the edges; none makes the call a root, due Offset after
	// the session's intended start.
	After  []Edge
	Offset time.Duration
	// Agent names the lane the call belongs to ("" for the main agent, a
	// subagent's id otherwise); Background marks a lane launched with
	// async_launched, which nobody joins.
	Agent      string
	Background bool
	// Warmup marks a call sent to warm a lane (a random-start lane's first
	// turn) and excluded from figures.
	Warmup bool
}

// Graph is one session. Calls are in an order where every edge points
// back (From below the call's index), so a single pass resolves them.
type Graph struct {
	ID    string // unique in the run: the session id records carry
	Trace string // where it came from (a file and its trace id), for sessions.jsonl
	Calls []Call
	// PromisedPrefixTokens is the prompt tokens that, by the trace's hash
	// ids, repeat a block an earlier call of the session (or, for a global
	// scope, of the trace) already sent: the cache hit a perfect prefix
	// cache would give. 0 when the trace has no hash ids.
	PromisedPrefixTokens int
	// PromptTokens is the sum of the calls' InputTokens, the denominator
	// of the promised hit rate.
	PromptTokens int
	// HashIDs says the trace gave hash ids, so PromisedPrefixTokens is a
	// promise (0 included) rather than unknown.
	HashIDs bool
}

// Validate checks what the engine relies on: at least one call, every
// call with a prompt, every edge pointing back, and at least one root.
func (g *Graph) Validate() error {
	if len(g.Calls) == 0 {
		return fmt.Errorf("session %q: no calls", g.ID)
	}
	seen := make(map[string]bool, len(g.Calls))
	for i, c := range g.Calls {
		if c.Prompt == nil {
			return fmt.Errorf("session %q: call %q has no prompt", g.ID, c.ID)
		}
		if seen[c.ID] {
			return fmt.Errorf("session %q: call id %q twice", g.ID, c.ID)
		}
		seen[c.ID] = true
		for _, e := range c.After {
			if e.From < 0 || e.From >= i {
				return fmt.Errorf("session %q: call %q waits for call #%d, which is not before it", g.ID, c.ID, e.From)
			}
			if e.Delay < 0 {
				return fmt.Errorf("session %q: call %q: negative delay %v", g.ID, c.ID, e.Delay)
			}
		}
	}
	if len(g.Calls[0].After) != 0 {
		return fmt.Errorf("session %q: first call %q waits for another", g.ID, g.Calls[0].ID)
	}
	return nil
}

// AfterIDs is the ids of the calls call i waits for, as records carry
// them in "after".
func (g *Graph) AfterIDs(i int) []string {
	a := g.Calls[i].After
	if len(a) == 0 {
		return nil
	}
	ids := make([]string, len(a))
	for j, e := range a {
		ids[j] = g.Calls[e.From].ID
	}
	return ids
}
