package loadgen

import (
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// dueTimes says when each request is due: its intended start, as an
// offset from the run's epoch. The runner asks once per prompt, in the
// source's order. Three kinds: rateSchedule (an arrival process over
// stages), traceArrivals (each prompt's own At) and the closed loop's (the send).
type dueTimes interface {
	// Next returns the intended start of p, the source's next prompt, or
	// ok=false when the schedule is over.
	Next(p *prompts.Prompt) (at time.Duration, ok bool)
}

// traceArrivals replays a trace: each prompt is due at its own At.
type traceArrivals struct{}

// Next implements dueTimes.
func (traceArrivals) Next(p *prompts.Prompt) (time.Duration, bool) { return p.At, true }

// closedArrivals are the closed loop's: a request is due when its worker
// sends it, so intended start = send and schedule lag is zero.
type closedArrivals struct{ epoch time.Time }

func (c closedArrivals) Next(*prompts.Prompt) (time.Duration, bool) { return time.Since(c.epoch), true }

// arrivals is the schedule opts describe for a run starting at epoch.
func (o Options) arrivals(epoch time.Time) (dueTimes, error) {
	switch {
	case o.Closed:
		return closedArrivals{epoch}, nil
	case o.Trace:
		return traceArrivals{}, nil
	}
	return newRateSchedule(o.Stages, o.Arrival, o.shape(), o.Seed)
}
