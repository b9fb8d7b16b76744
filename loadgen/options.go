package loadgen

import (
	"context"
	"fmt"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxInFlight = 10000
	DefaultTimeout     = 2 * time.Minute
	DefaultGrace       = 30 * time.Second
	// maxRatePerS bounds an open-loop rate. One process sends a few
	// thousand requests a second per core; far above that every request
	// would be dropped, one record each, filling the disk with records of
	// requests never sent, so such a rate is a mistake or a job for
	// --shard.
	maxRatePerS = 100000
)

// Options configure a run. The zero value of a field means its default.
type Options struct {
	// Stages is the load profile. Open loop uses Stage.Rate, closed loop
	// Stage.Concurrency.
	Stages []Stage
	// Closed selects the closed loop: each of Concurrency workers sends its
	// next request when the previous one ends, so intended start = send.
	Closed bool
	// Arrival is the open-loop process (ArrivalConstant, ArrivalPoisson,
	// ArrivalGamma, ArrivalUniform), Burstiness the gamma shape and Jitter
	// the uniform spread (0–1: gaps within ±Jitter of the mean gap).
	// Empty means constant; commands pass ResolveArrival's choice, which
	// is DefaultArrival when the user names none.
	Arrival    Arrival
	Burstiness float64
	Jitter     float64
	Seed       uint64
	// Trace takes intended starts from Prompt.At instead of an arrival
	// process (trace replay); the run ends at the last stage's end or when
	// the source is exhausted.
	Trace bool
	// MaxInFlight caps concurrent requests in open loop (default 10000). A
	// request due while the cap is reached is sent late, its lateness
	// counted in its latency; one still waiting when the run ends is
	// recorded as ErrDropped.
	MaxInFlight int
	// Requests stops the run after this many requests are sent (0: none).
	Requests int
	// WarmupRequests and WarmupDuration mark the first requests (by count
	// or by intended start) as warm-up: sent, recorded, left out of figures.
	WarmupRequests int
	WarmupDuration time.Duration
	// AcceptEmpty makes an answer with no output token a success, for
	// workloads that expect empty replies; AcceptEmptyClasses does so for
	// the classes named (a mix's accept_empty: true). Otherwise such an
	// answer is ErrEmptyAnswer, unless the server said it stopped at its
	// end-of-sequence token (Record.settleAnswer).
	AcceptEmpty        bool
	AcceptEmptyClasses []string
	// Timeout bounds each request (default 2m).
	Timeout time.Duration
	// Grace is how long requests still in flight when the schedule ends
	// may take to finish, as k6's gracefulStop: 0 means DefaultGrace (30s),
	// a negative value none (they are cut the moment the schedule ends).
	// The schedule ends at the last stage's end, or sooner when Requests
	// are sent or the source runs out. A request still in flight when the
	// grace runs out is cancelled and recorded as ErrCutAtEnd: the
	// generator cut it, the server did not fail it. A request's own
	// Timeout still applies within the grace; a Grace at least Timeout
	// lets every request run to its timeout.
	Grace time.Duration
	// Shard splits the schedule across processes (see Shard); the zero
	// value runs all of it.
	Shard Shard
	// StartAt, if set, is the wall-clock instant the schedule starts (its
	// epoch), so shards on several machines start together: Run waits
	// for it. A run that begins after it keeps it as the epoch — requests
	// already due go out at once, their lateness counted from their
	// intended starts — and Info.LateStart says by how much.
	StartAt time.Time
	// Preconnect, if set, is called before the epoch (and before waiting
	// for StartAt) to open the client's connections, saying how many it
	// opened; the time it takes is reported apart (Info.PreconnectTime),
	// never in a request's latency.
	Preconnect func(ctx context.Context) (conns int, err error)
	// PreconnectConns is how many connections Preconnect opens; the pool
	// is opened that much longer before StartAt (see preconnectLead).
	PreconnectConns int
}

// optionsError says which option makes a run impossible or pointless and
// why. It is always the caller's mistake (a usage error), found before
// anything is sent.
type optionsError struct {
	Option string // "stages", "stage 2 (ramp)", "warm-up", "arrival", …
	Msg    string
}

func (e *optionsError) Error() string { return "loadgen: " + e.Option + ": " + e.Msg }

// Validate reports the first option that makes the run impossible, or
// one that would measure nothing: no stages, a stage without duration or
// concurrency, open-loop rates that are all zero (--stages 0@2s), a
// warm-up as long as the whole schedule or the request count.
func (o Options) Validate() error {
	bad := func(opt, format string, a ...any) error {
		return &optionsError{Option: opt, Msg: fmt.Sprintf(format, a...)}
	}
	if len(o.Stages) == 0 {
		return bad("stages", "none: give a rate or concurrency and a duration")
	}
	for i, s := range o.Stages {
		name := fmt.Sprintf("stage %d (%s)", i+1, s.Name)
		if s.Duration <= 0 {
			return bad(name, "duration %v must be positive", s.Duration)
		}
		if o.Closed && s.Concurrency < 1 {
			return bad(name, "closed loop needs concurrency ≥ 1, not %d", s.Concurrency)
		}
	}
	switch {
	case o.MaxInFlight < 0:
		return bad("max in flight", "%d is negative", o.MaxInFlight)
	case o.Requests < 0:
		return bad("requests", "%d is negative", o.Requests)
	case o.WarmupRequests < 0 || o.WarmupDuration < 0:
		return bad("warm-up", "must not be negative")
	case o.Timeout < 0:
		return bad("timeout", "%v is negative", o.Timeout)
	}
	if err := o.Shard.Validate(); err != nil {
		return bad("shard", "%v", err)
	}
	total := TotalDuration(o.Stages)
	if o.WarmupDuration >= total {
		return bad("warm-up", "%v is not shorter than the %v schedule: nothing would be measured", o.WarmupDuration, total)
	}
	if o.Requests > 0 && o.WarmupRequests >= o.Requests {
		return bad("warm-up", "%d requests of %d: nothing would be measured", o.WarmupRequests, o.Requests)
	}
	if o.Closed || o.Trace {
		return nil
	}
	for i, s := range o.Stages {
		if s.Rate > maxRatePerS {
			return &field.Error{Field: "Shard", Hint: "split the load across processes with {} I/N",
				Err: bad(fmt.Sprintf("stage %d (%s)", i+1, s.Name), "rate %g/s is above %d/s, more than one load generator can send", s.Rate, maxRatePerS)}
		}
	}
	if _, err := newRateSchedule(o.Stages, o.Arrival, o.shape(), o.Seed); err != nil {
		return bad("arrival", "%v", err)
	}
	switch {
	case expectedArrivals(o.Stages, 0, total) == 0:
		return bad("stages", "every stage's rate is 0: nothing would be sent")
	case expectedArrivals(o.Stages, o.WarmupDuration, total) == 0:
		return bad("stages", "every rate after the %v warm-up is 0: nothing would be measured", o.WarmupDuration)
	}
	return nil
}

// shape is the arrival process's shape parameter for newRateSchedule.
func (o Options) shape() float64 {
	if o.Arrival == ArrivalUniform {
		return o.Jitter
	}
	return o.Burstiness
}
