package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxInFlight = 10000
	DefaultTimeout     = 2 * time.Minute
	DefaultGrace       = 30 * time.Second
	// MaxRatePerS bounds an open-loop rate. One process sends a few
	// thousand requests a second per core; far above that every request
	// would be dropped, one record each (--rate 1e9 wrote 25 GB of them),
	// so such a rate is a mistake or a job for --shard.
	MaxRatePerS = 100000
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
	Arrival    string
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
}

// OptionsError says which option makes a run impossible or pointless and
// why. It is always the caller's mistake (a usage error), found before
// anything is sent.
type OptionsError struct {
	Option string // "stages", "stage 2 (ramp)", "warm-up", "arrival", …
	Msg    string
}

func (e *OptionsError) Error() string { return "loadgen: " + e.Option + ": " + e.Msg }

// Validate reports the first option that makes the run impossible, or
// one that would measure nothing: no stages, a stage without duration or
// concurrency, open-loop rates that are all zero (--stages 0@2s), a
// warm-up as long as the whole schedule or the request count.
func (o Options) Validate() error {
	bad := func(opt, format string, a ...any) error {
		return &OptionsError{Option: opt, Msg: fmt.Sprintf(format, a...)}
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
		if s.Rate > MaxRatePerS {
			return bad(fmt.Sprintf("stage %d (%s)", i+1, s.Name), "rate %g/s is above %d/s, more than one load generator can send: split the load across processes with --shard I/N", s.Rate, MaxRatePerS)
		}
	}
	if _, err := NewOpenLoop(o.Stages, o.Arrival, o.shape(), o.Seed); err != nil {
		return bad("arrival", "%v", err)
	}
	switch {
	case ExpectedArrivals(o.Stages, 0, total) == 0:
		return bad("stages", "every stage's rate is 0: nothing would be sent")
	case ExpectedArrivals(o.Stages, o.WarmupDuration, total) == 0:
		return bad("stages", "every rate after the %v warm-up is 0: nothing would be measured", o.WarmupDuration)
	}
	return nil
}

// shape is the arrival process's shape parameter for NewOpenLoop.
func (o Options) shape() float64 {
	if o.Arrival == ArrivalUniform {
		return o.Jitter
	}
	return o.Burstiness
}

// Window is a span of run time, as offsets from the run's epoch.
type Window struct{ From, To time.Duration }

// Seconds is the window's length (0 when empty).
func (w Window) Seconds() float64 { return max(0, (w.To - w.From).Seconds()) }

// Duration is To − From (negative or 0 when empty).
func (w Window) Duration() time.Duration { return w.To - w.From }

// Info describes a finished run.
type Info struct {
	Started time.Time     // wall clock at the run's epoch
	Elapsed time.Duration // epoch to the last record
	// Interrupted: the caller's context was cancelled (the user's Ctrl-C);
	// requests in flight then were recorded ErrCancelled.
	Interrupted bool
	// Stopped is the reason given to Runner.Stop, nil if it was not called.
	Stopped error
	// Sent, Dropped and CutAtEnd count requests; the records carry the rest.
	Sent, Dropped, CutAtEnd int64
	// Grace is the grace period the run applied (0: none).
	Grace time.Duration
	// Scheduled is the scheduled window: from the end of warm-up (the
	// warm-up duration, or the intended start of the first measured
	// request) to the end of the schedule, or to when sending stopped
	// sooner (request count reached, source exhausted, Stop, interrupt).
	// Offered and sent rates are taken over it.
	Scheduled Window
	// StageScheduled is each stage's share of Scheduled, by stage name.
	StageScheduled map[string]time.Duration
	// CPUUtilization is the process's CPU time over wall time × GOMAXPROCS
	// during the run, 0–1: near 1, the load generator may be the bottleneck.
	CPUUtilization float64
	// Host is the generator's CPU and the machine's load over the sending
	// window (hostload.go): what the self-check names as the cause of
	// late sends.
	Host HostLoad
	// Shard is the part of the schedule this run sent (zero: all).
	Shard Shard
	// LateStart is how long after Options.StartAt the run began (0: on
	// time, or no StartAt).
	LateStart time.Duration
	// Preconnected says Options.Preconnect ran; PreconnectTime is how
	// long it took, before the epoch, and PreconnectErr what failed (the
	// run went on with cold connections).
	Preconnected    bool
	PreconnectConns int
	PreconnectTime  time.Duration
	PreconnectErr   error
	// StartAt is Options.StartAt.
	StartAt time.Time
}

// Runner sends a Source's prompts through a Client on a schedule. See the
// package documentation for the model and for who owns which Record field.
type Runner struct {
	client Client
	src    Source
	opts   Options
	grace  time.Duration

	srcMu sync.Mutex // guards src, seq and followUps
	seq   int64
	// followUps counts a sharded run's session turns after the first
	// (numbered from FollowUpSeqBase).
	followUps int64
	sent      atomic.Int64
	drop      atomic.Int64
	cut       atomic.Int64

	// measuredFrom is the earliest intended start of a measured request
	// (-1: none yet), for the scheduled window after a warm-up by count.
	measuredMu   sync.Mutex
	measuredFrom time.Duration

	stopOnce sync.Once
	stopc    chan struct{} // closed by Stop
	stopErr  error         // set before stopc is closed
}

// errCutAtEnd is the cause the grace timer cancels requests with.
var errCutAtEnd = errors.New("grace period after the schedule's end ran out")

// stopCause marks requests cancelled by Runner.Stop.
type stopCause struct{ err error }

func (s stopCause) Error() string { return "run stopped: " + s.err.Error() }

// NewRunner returns a runner for opts (see Options.Validate); Run starts
// it. A Runner runs once.
func NewRunner(c Client, src Source, opts Options) (*Runner, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.MaxInFlight == 0 {
		opts.MaxInFlight = DefaultMaxInFlight
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	grace := opts.Grace
	switch {
	case grace == 0:
		grace = DefaultGrace
	case grace < 0:
		grace = 0
	}
	return &Runner{client: c, src: src, opts: opts, grace: grace, measuredFrom: -1, stopc: make(chan struct{})}, nil
}

// Stop ends the run early, for reason: nothing is sent after it, requests
// in flight are cancelled at once (ErrCancelled, their Error naming the
// reason) and Info.Stopped is reason. Unlike cancelling Run's context (the
// user's interrupt, Info.Interrupted), it is the caller's own decision,
// e.g. results can no longer be written. Safe from any goroutine, before
// or during Run; the first reason stands. Keep reading Run's out channel
// until it is closed: the cancelled records still arrive on it.
func (r *Runner) Stop(reason error) {
	if reason == nil {
		reason = errors.New("stopped by the caller")
	}
	r.stopOnce.Do(func() {
		r.stopErr = reason
		close(r.stopc)
	})
}

// run is one Run's shared state.
type run struct {
	epoch time.Time
	end   time.Duration // the schedule's length
	out   chan<- *Record
	wg    sync.WaitGroup // requests and pending session turns
	// send ends on interrupt or Stop: nothing new is sent after it.
	send context.Context
	// req ends requests in flight: on interrupt, Stop, or when the grace
	// after the schedule's end runs out (its cause tells which).
	req        context.Context
	cancelReqs context.CancelCauseFunc
	cutTimer   *time.Timer

	endOnce sync.Once
	ended   chan struct{} // closed by endSending; idle closed-loop workers watch it
	sentEnd time.Duration // when sending ended, ≤ end
	// host0 is the machine's counters at the epoch; host the load over
	// the sending window, set by endSending (hostload.go).
	host0 hostReading
	host  HostLoad
}

// Run sends requests until the schedule ends (its stages, the request
// count, or the source), ctx is cancelled or Stop is called, and delivers
// every record, finalized, to out, which it closes. At the schedule's end
// requests in flight may finish within the grace period; on interrupt or
// Stop they are cancelled at once.
func (r *Runner) Run(ctx context.Context, out chan<- *Record) (Info, error) {
	defer close(out)
	var info Info
	info.Shard, info.StartAt = r.opts.Shard, r.opts.StartAt
	if r.opts.Preconnect != nil {
		// Open the pool just before a distant StartAt, not minutes ahead:
		// servers close idle connections (uvicorn after 5 s).
		if lead := time.Until(r.opts.StartAt) - preconnectLead; !r.opts.StartAt.IsZero() && lead > 0 {
			sleep(ctx, lead, r.stopc)
		}
		t0 := time.Now()
		info.PreconnectConns, info.PreconnectErr = r.opts.Preconnect(ctx)
		info.Preconnected, info.PreconnectTime = true, time.Since(t0)
	}
	epoch, late, ok := r.waitStart(ctx)
	if !ok {
		epoch = time.Now()
	}
	rn := &run{epoch: epoch, end: TotalDuration(r.opts.Stages), out: out, ended: make(chan struct{})}
	info.Started, info.Grace, info.LateStart = rn.epoch, r.grace, late
	cpu0 := cpuTime()
	rn.host0 = readHost()

	send, stopSending := context.WithCancelCause(ctx)
	defer stopSending(nil)
	rn.send = send
	// Requests outlive the schedule (the grace), so they do not derive
	// from ctx; an interrupt reaches them through the AfterFunc.
	rn.req, rn.cancelReqs = context.WithCancelCause(context.WithoutCancel(ctx))
	defer rn.cancelReqs(nil)
	defer context.AfterFunc(ctx, func() { rn.cancelReqs(context.Cause(ctx)) })()
	stop := func() {
		cause := stopCause{r.stopErr}
		stopSending(cause)
		rn.cancelReqs(cause)
	}
	select {
	case <-r.stopc: // stopped before it started: send nothing
		stop()
	default:
		ran := make(chan struct{})
		defer close(ran)
		go func() {
			select {
			case <-r.stopc:
				stop()
			case <-ran:
			}
		}()
	}
	rn.cutTimer = time.AfterFunc(time.Until(rn.epoch.Add(rn.end+r.grace)), func() { rn.cancelReqs(errCutAtEnd) })
	defer rn.cutTimer.Stop()

	var err error
	if r.opts.Closed {
		err = r.closedLoop(rn)
	} else {
		err = r.openLoop(rn)
	}
	r.endSending(rn, time.Since(rn.epoch)) // a backstop: the loops mark it themselves
	rn.wg.Wait()

	info.Elapsed = time.Since(rn.epoch)
	info.Interrupted = ctx.Err() != nil
	select {
	case <-r.stopc:
		info.Stopped = r.stopErr
	default:
	}
	info.Sent, info.Dropped, info.CutAtEnd = r.sent.Load(), r.drop.Load(), r.cut.Load()
	info.Host = rn.host
	info.Scheduled = r.scheduled(rn)
	info.StageScheduled = stageShares(r.opts.Stages, info.Scheduled)
	if wall := info.Elapsed.Seconds(); wall > 0 {
		info.CPUUtilization = (cpuTime() - cpu0).Seconds() / (wall * float64(numCPU()))
	}
	return info, err
}

// preconnectLead is how long before Options.StartAt the pool is opened.
const preconnectLead = 2 * time.Second

// waitStart waits for Options.StartAt and returns the epoch (with a
// monotonic reading) and how late it began; ok is false when ctx ended or
// Stop was called during the wait. Without StartAt the epoch is now.
func (r *Runner) waitStart(ctx context.Context) (epoch time.Time, late time.Duration, ok bool) {
	now := time.Now()
	if r.opts.StartAt.IsZero() {
		return now, 0, true
	}
	epoch = now.Add(r.opts.StartAt.Sub(now)) // StartAt on the monotonic clock
	if wait := epoch.Sub(now); wait > 0 {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return epoch, 0, false
		case <-r.stopc:
			return epoch, 0, false
		}
		return epoch, 0, true
	}
	return epoch, now.Sub(epoch), true
}

// endSending marks the schedule's end at offset at: the first call wins.
// The grace runs from there: from the scheduled end, or from when sending
// stopped sooner.
func (r *Runner) endSending(rn *run, at time.Duration) {
	rn.endOnce.Do(func() {
		rn.sentEnd = min(at, rn.end)
		rn.host = hostLoad(rn.host0, readHost(), numCPU())
		close(rn.ended)
		if at < rn.end {
			rn.cutTimer.Reset(time.Until(rn.epoch.Add(at + r.grace)))
		}
	})
}

// scheduled is the run's scheduled window (see Info.Scheduled).
func (r *Runner) scheduled(rn *run) Window {
	from := r.opts.WarmupDuration
	if r.opts.WarmupRequests > 0 {
		r.measuredMu.Lock()
		from = r.measuredFrom
		r.measuredMu.Unlock()
		if from < 0 { // everything sent was warm-up
			from = rn.sentEnd
		}
	}
	return Window{From: min(from, rn.sentEnd), To: rn.sentEnd}
}

// stageShares clips each stage's span to w and sums the lengths by name.
func stageShares(stages []Stage, w Window) map[string]time.Duration {
	out := make(map[string]time.Duration, len(stages))
	var at time.Duration
	for _, s := range stages {
		from, to := max(at, w.From), min(at+s.Duration, w.To)
		out[s.Name] += max(0, to-from)
		at += s.Duration
	}
	return out
}

func (r *Runner) newRecord(epoch time.Time, p *prompts.Prompt, seq int64, intended time.Duration) *Record {
	rec := NewRecord(epoch)
	rec.Seq, rec.ID, rec.Class = seq, p.ID, p.Class
	rec.Session, rec.Turn = p.Session, p.Turn
	rec.RequestedInputTokens = p.InputTokens
	rec.Intended = intended
	rec.Stage = r.opts.Stages[StageAt(r.opts.Stages, intended)].Name
	rec.Warmup = (r.opts.WarmupRequests > 0 && seq < int64(r.opts.WarmupRequests)) ||
		(r.opts.WarmupDuration > 0 && intended < r.opts.WarmupDuration)
	if !rec.Warmup && r.opts.WarmupRequests > 0 {
		r.measuredMu.Lock()
		if r.measuredFrom < 0 || intended < r.measuredFrom {
			r.measuredFrom = intended
		}
		r.measuredMu.Unlock()
	}
	return rec
}

// nextSeq takes the next sequence number (session turns, which do not
// come from the source).
func (r *Runner) nextSeq() int64 {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	if sh := r.opts.Shard; sh.Active() {
		// Not from the source's numbering: when a turn is due depends on
		// an answer, and every shard must number the source alike.
		k := r.followUps
		r.followUps++
		return FollowUpSeqBase + k*int64(sh.Count) + int64(sh.Index)
	}
	r.seq++
	return r.seq - 1
}

// capReached reports whether the request count (Options.Requests) is
// spent before the request numbered seq: sharded, by global number (the
// count is the whole schedule's), else by requests sent and dropped.
func (r *Runner) capReached(seq int64, dropped bool) bool {
	if r.opts.Requests <= 0 {
		return false
	}
	if r.opts.Shard.Active() {
		return seq >= int64(r.opts.Requests)
	}
	n := r.sent.Load()
	if dropped {
		n += r.drop.Load()
	}
	return n >= int64(r.opts.Requests)
}

// do sends one request and settles its record: End, the kind of a
// request the runner cancelled, and Finalize, called here once for every
// record that reaches out.
func (r *Runner) do(rn *run, p *prompts.Prompt, rec *Record) {
	ctx, cancel := context.WithTimeout(rn.req, r.opts.Timeout)
	r.client.Do(ctx, p, rec)
	cancel()
	if rec.End == 0 {
		rec.End = rec.Now()
	}
	if rec.ErrorKind == ErrCancelled {
		// The client saw its context end; the cause says who ended it.
		var stop stopCause
		switch cause := context.Cause(rn.req); {
		case errors.Is(cause, errCutAtEnd):
			rec.ErrorKind = ErrCutAtEnd
			rec.Error = fmt.Sprintf("cut at the end: still in flight %v after the schedule ended (grace period)", r.grace)
			r.cut.Add(1)
		case errors.As(cause, &stop):
			rec.Error = "cancelled: " + stop.Error()
		}
	}
	rec.Finalize()
}

// send runs one request on its own goroutine; done, if set, runs before
// the record is delivered (it frees the slot, schedules a session's turn).
func (r *Runner) send(rn *run, rec *Record, p *prompts.Prompt, done func(*Record)) {
	r.sent.Add(1) // here, not on the goroutine: the request cap reads it next
	rn.wg.Add(1)
	go func() {
		defer rn.wg.Done()
		r.do(rn, p, rec)
		if done != nil {
			done(rec)
		}
		rn.out <- rec
	}()
}

func (r *Runner) openLoop(rn *run) (err error) {
	// Sending stops at the schedule's end (natural) or sooner (request
	// count, source exhausted or failed, interrupt, Stop).
	natural := false
	defer func() {
		at := time.Since(rn.epoch)
		if natural {
			at = rn.end
		}
		r.endSending(rn, at)
	}()
	var arr Arrivals
	if !r.opts.Trace {
		ol, err := NewOpenLoop(r.opts.Stages, r.opts.Arrival, r.opts.shape(), r.opts.Seed)
		if err != nil {
			return err
		}
		arr = ol
	}
	slots := make(chan struct{}, r.opts.MaxInFlight)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	wait := newWaiter(timer)
	deadline := rn.epoch.Add(rn.end)
	release := func(*Record) { <-slots }

	var followUp func(p *prompts.Prompt, rec *Record)
	followUp = func(prev *prompts.Prompt, rec *Record) {
		// Sessions: the next turn is due Think after this answer ends,
		// measured from then; it shares the in-flight cap.
		<-slots
		if prev.FollowUp == nil || rn.send.Err() != nil || !rec.OK() {
			return
		}
		next := prev.FollowUp(rec.Text)
		if next == nil {
			return
		}
		due := rec.End + next.Think
		if due >= rn.end {
			return
		}
		rn.wg.Add(1)
		go func() {
			defer rn.wg.Done()
			// Not time.AfterFunc: a pending turn must not hold Run past an
			// interrupt for the rest of its think time.
			t := time.NewTimer(time.Until(rn.epoch.Add(due)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-rn.send.Done():
				return
			}
			select {
			case slots <- struct{}{}:
			case <-rn.send.Done():
				return
			}
			if rn.req.Err() != nil { // cut: the grace ran out meanwhile
				<-slots
				return
			}
			nrec := r.newRecord(rn.epoch, next, r.nextSeq(), due)
			r.send(rn, nrec, next, func(x *Record) { followUp(next, x) })
		}()
	}

	for {
		if r.capReached(r.peekSeq(), false) {
			return nil
		}
		p, seq, err := r.draw()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("loadgen: prompt source: %w", err)
		}
		var at time.Duration
		if r.opts.Trace {
			at = p.At
			if at >= rn.end {
				natural = true
				return nil
			}
		} else {
			var ok bool
			if at, ok = arr.Next(); !ok || at >= rn.end {
				natural = true
				return nil
			}
		}
		if !r.opts.Shard.Owns(seq) {
			continue // another shard's: drawn only to keep the schedule whole
		}
		rec := r.newRecord(rn.epoch, p, seq, at)

		if !wait.until(rn.send, rn.epoch.Add(at)) {
			return nil
		}
		select {
		case slots <- struct{}{}:
		default:
			// Cap reached: wait for a slot until the run ends. The request
			// keeps its intended start, so the wait shows in its latency.
			timer.Reset(time.Until(deadline))
			select {
			case slots <- struct{}{}:
				timer.Stop() // Go ≥1.23: no stale tick can follow Stop
			case <-timer.C:
				// Sending ended with the schedule: the host readings cover
				// it, not the recording of the dropped rest.
				r.endSending(rn, rn.end)
				r.dropRest(rn, rec, arr)
				natural = true
				return nil
			case <-rn.send.Done():
				return nil
			}
		}
		done := release
		if p.FollowUp != nil {
			pp := p
			done = func(x *Record) { followUp(pp, x) }
		}
		r.send(rn, rec, p, done)
	}
}

// dropRest records rec and every later arrival due before the end as
// dropped: they were due but could not be started.
func (r *Runner) dropRest(rn *run, rec *Record, arr Arrivals) {
	for {
		// An interrupt stops the dropping at once: the arrivals left are
		// not requests of a run that was stopped.
		if rn.send.Err() != nil {
			return
		}
		rec.ErrorKind = ErrDropped
		rec.Error = "not started before the run ended: in-flight cap reached"
		rec.Sent, rec.End = rec.Intended, rec.Intended
		rec.Finalize()
		r.drop.Add(1)
		rn.out <- rec
		for rec = nil; rec == nil; {
			if r.capReached(r.peekSeq(), true) {
				return
			}
			p, seq, err := r.draw()
			if err != nil {
				return
			}
			var at time.Duration
			if r.opts.Trace {
				at = p.At
			} else {
				var ok bool
				if at, ok = arr.Next(); !ok {
					return
				}
			}
			if at >= rn.end {
				return
			}
			if r.opts.Shard.Owns(seq) {
				rec = r.newRecord(rn.epoch, p, seq, at)
			}
		}
	}
}

// peekSeq is the sequence number the next prompt from the source gets.
func (r *Runner) peekSeq() int64 {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	return r.seq
}

// draw takes the next prompt from the source and its sequence number.
func (r *Runner) draw() (*prompts.Prompt, int64, error) {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	p, err := r.src.Next()
	seq := r.seq
	if err == nil {
		r.seq++
	}
	return p, seq, err
}

func (r *Runner) closedLoop(rn *run) error {
	maxC := 0
	for _, s := range r.opts.Stages {
		maxC = max(maxC, s.Concurrency)
	}
	var budget atomic.Int64
	budget.Store(r.opts.Shard.Share(int64(r.opts.Requests)))
	var workers sync.WaitGroup
	var errOnce sync.Once
	var srcErr error
	for w := 0; w < maxC; w++ {
		if !r.opts.Shard.Owns(int64(w)) {
			continue // another shard's worker
		}
		workers.Add(1)
		go func() {
			defer workers.Done()
			// The first worker to finish ends the schedule: the others'
			// requests in flight then drain within the grace, and workers
			// idle until a later stage stop waiting.
			defer func() { r.endSending(rn, time.Since(rn.epoch)) }()
			var pending *prompts.Prompt // a session's next turn
			for rn.send.Err() == nil {
				now := time.Since(rn.epoch)
				if now >= rn.end {
					return
				}
				// Worker w runs only while the current stage wants more
				// than w workers; otherwise it waits for the next stage.
				si := StageAt(r.opts.Stages, now)
				if r.opts.Stages[si].Concurrency <= w {
					next := time.Duration(0)
					for _, s := range r.opts.Stages[:si+1] {
						next += s.Duration
					}
					if !sleep(rn.send, next-now, rn.ended) {
						return
					}
					continue
				}
				if r.opts.Requests > 0 && budget.Add(-1) < 0 {
					return
				}
				p := pending
				var seq int64
				if p == nil {
					var err error
					if p, seq, err = r.drawOwned(); err != nil {
						if err != io.EOF {
							errOnce.Do(func() { srcErr = fmt.Errorf("loadgen: prompt source: %w", err) })
						}
						return
					}
				} else {
					seq = r.nextSeq()
				}
				if pending != nil && pending.Think > 0 && !sleep(rn.send, pending.Think, nil) {
					return
				}
				rec := r.newRecord(rn.epoch, p, seq, time.Since(rn.epoch))
				r.sent.Add(1)
				r.do(rn, p, rec)
				pending = nil
				if p.FollowUp != nil && rec.OK() {
					pending = p.FollowUp(rec.Text)
				}
				rn.out <- rec
			}
		}()
	}
	workers.Wait()
	return srcErr
}

// drawOwned takes the next prompt this shard owns from the source,
// passing over the other shards'.
func (r *Runner) drawOwned() (*prompts.Prompt, int64, error) {
	r.srcMu.Lock()
	defer r.srcMu.Unlock()
	for {
		p, err := r.src.Next()
		if err != nil {
			return nil, 0, err
		}
		seq := r.seq
		r.seq++
		if r.opts.Shard.Owns(seq) {
			return p, seq, nil
		}
	}
}

// sleep waits d, false if ctx ends or stop is closed first.
func sleep(ctx context.Context, d time.Duration, stop <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
	case <-stop:
	}
	return false
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func numCPU() int { return runtime.GOMAXPROCS(0) }

// Sent is the number of requests sent so far; safe to call during Run.
func (r *Runner) Sent() int64 { return r.sent.Load() }
