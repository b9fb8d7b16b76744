package loadgen

import (
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Arrivals says when each request is due: its intended start, as an
// offset from the run's epoch. The runner asks once per prompt, in the
// source's order. Three kinds: OpenLoop (an arrival process over
// stages), Trace (each prompt's own At) and the closed loop's (the send).
type Arrivals interface {
	// Next returns the intended start of p, the source's next prompt, or
	// ok=false when the schedule is over.
	Next(p *prompts.Prompt) (at time.Duration, ok bool)
}

// Trace replays a trace: each prompt is due at its own At.
type Trace struct{}

// Next implements Arrivals.
func (Trace) Next(p *prompts.Prompt) (time.Duration, bool) { return p.At, true }

// closedArrivals are the closed loop's: a request is due when its worker
// sends it, so intended start = send and schedule lag is zero.
type closedArrivals struct{ epoch time.Time }

func (c closedArrivals) Next(*prompts.Prompt) (time.Duration, bool) { return time.Since(c.epoch), true }

// arrivals is the schedule opts describe for a run starting at epoch.
func (o Options) arrivals(epoch time.Time) (Arrivals, error) {
	switch {
	case o.Closed:
		return closedArrivals{epoch}, nil
	case o.Trace:
		return Trace{}, nil
	}
	return NewOpenLoop(o.Stages, o.Arrival, o.shape(), o.Seed)
}
