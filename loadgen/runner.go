package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/prompts"
)

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
	Host selfcheck.HostLoad
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
	// keepsDeadline: client is a DeadlineKeeper that keeps them (do).
	keepsDeadline bool
	// acceptEmpty: the classes of Options.AcceptEmptyClasses.
	acceptEmpty map[string]bool
	seq         *sequencer
	opts        Options
	grace       time.Duration
	host        selfcheck.Sampler // where HostLoad reads; zero: the system's files

	sent atomic.Int64
	drop atomic.Int64
	// capped is what the request cap counts: requests sent (a linear
	// session's turns each) and agent sessions started, once each.
	capped atomic.Int64
	cut    atomic.Int64

	// measuredFrom is the earliest intended start of a measured request
	// (-1: none yet), for the scheduled window after a warm-up by count.
	graphs graphs // live agent sessions (graph.go)

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
	var acceptEmpty map[string]bool
	for _, class := range opts.AcceptEmptyClasses {
		if acceptEmpty == nil {
			acceptEmpty = map[string]bool{}
		}
		acceptEmpty[class] = true
	}
	dk, ok := c.(DeadlineKeeper)
	return &Runner{client: c, keepsDeadline: ok && dk.KeepsDeadline(), acceptEmpty: acceptEmpty, seq: &sequencer{src: src, shard: opts.Shard}, opts: opts, grace: grace, measuredFrom: -1,
		stopc: make(chan struct{})}, nil
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
	host0 selfcheck.Reading
	host  selfcheck.HostLoad
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
		if lead := time.Until(r.opts.StartAt) - preconnectLead(r.opts.PreconnectConns); !r.opts.StartAt.IsZero() && lead > 0 {
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
	cpu0 := selfcheck.CPUTime()
	rn.host0 = r.host.Read()

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
		info.CPUUtilization = (selfcheck.CPUTime() - cpu0).Seconds() / (wall * float64(numCPU()))
	}
	return info, err
}

// preconnectLead is how long before Options.StartAt a pool of n
// connections is opened: a base, and a share per connection, since tens
// of thousands of dials on a busy machine outlast the base. It stays well
// short of the preconnect's budget: servers close idle connections
// (uvicorn after 5 s), so the pool is not opened far ahead.
func preconnectLead(n int) time.Duration {
	return 2*time.Second + time.Duration(max(n, 0))*250*time.Microsecond
}

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
		rn.host = selfcheck.Between(rn.host0, r.host.Read(), numCPU())
		close(rn.ended)
		// Not after an interrupt or Stop: their own cause cancels the
		// requests, on another goroutine, and a cut armed for now (no
		// grace) could reach them first and record them ErrCutAtEnd.
		if at < rn.end && rn.send.Err() == nil {
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
	rec.Model = p.ModelName()
	rec.Session, rec.Turn = p.Session, p.Turn
	rec.RequestedInputTokens = p.InputTokens
	rec.Intended = intended
	rec.Stage = r.opts.Stages[stageAt(r.opts.Stages, intended)].Name
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

// capReached reports whether the request count (Options.Requests) is
// spent before the request numbered seq: sharded, by global number (the
// count is the whole schedule's), else by requests sent (an agent session
// counting once) and dropped.
func (r *Runner) capReached(seq int64, dropped bool) bool {
	if r.opts.Requests <= 0 {
		return false
	}
	if r.opts.Shard.Active() {
		return seq >= int64(r.opts.Requests)
	}
	n := r.capped.Load()
	if dropped {
		n += r.drop.Load()
	}
	return n >= int64(r.opts.Requests)
}

// do sends one request and settles its record: End, the kind of a
// request the runner cancelled, and Finalize, called here once for every
// record that reaches out.
//
// Its frame and its callers' are on the stack of every request in flight
// while it waits for its next token (most of the time): a goroutine's
// stack shrinks only to a size four times what it then holds, so they are
// kept small, the work around the request in functions of their own.
func (r *Runner) do(rn *run, p *prompts.Prompt, rec *Record) {
	if r.keepsDeadline {
		r.client.Do(WithSoftDeadline(rn.req, time.Now().Add(r.opts.Timeout)), p, rec)
	} else {
		ctx, cancel := context.WithTimeout(rn.req, r.opts.Timeout)
		r.client.Do(ctx, p, rec)
		cancel()
	}
	r.settle(rn, p, rec)
}

// settle settles a record after its request returned (see do): its
// cancellation's cause, its token counts, and whether its answer carried
// what was asked for.
//
//go:noinline
func (r *Runner) settle(rn *run, p *prompts.Prompt, rec *Record) {
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
	rec.settleAnswer(asksNoToken(p), r.opts.AcceptEmpty || r.acceptEmpty[rec.Class])
}

// request sends one request on the calling goroutine, counted by the
// caller (Runner.sent, the run's WaitGroup); done, if set, runs before the
// record is delivered (it frees the slot, schedules a session's turn).
func (r *Runner) request(rn *run, rec *Record, p *prompts.Prompt, done func(*Record)) {
	defer rn.wg.Done()
	r.do(rn, p, rec)
	if done != nil {
		done(rec)
	}
	rn.out <- rec
}

// openLoop sends on the arrivals' schedule. The goroutine that waited for
// a request's due time sends it: it is the one that is running then. The
// wait for the next one goes on in a new goroutine (dispatch.loop), which
// runs when the request first blocks (its write done, waiting for the
// answer). A request handed to a new goroutine instead waits for a
// processor behind every stream woken meanwhile, and with thousands of
// streams on few cores that wait sets the schedule lag's tail
// (docs/design/dispatcher.md; bench-peers' lag step).
func (r *Runner) openLoop(rn *run) error {
	arr, err := r.opts.arrivals(rn.epoch)
	if err != nil {
		return err
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	d := &dispatch{r: r, rn: rn, arr: arr, slots: make(chan struct{}, r.opts.MaxInFlight), timer: timer,
		wait: newWaiter(timer), deadline: rn.epoch.Add(rn.end), ended: make(chan struct{})}
	d.free = func(*Record) { <-d.slots }
	go d.loop()
	<-d.ended
	return d.err
}

// dispatch is the open loop's state, handed from each dispatching
// goroutine to the next; one holds it at a time.
type dispatch struct {
	r        *Runner
	rn       *run
	arr      dueTimes
	slots    chan struct{} // the in-flight cap
	timer    *time.Timer
	wait     *waiter
	deadline time.Time // the schedule's end

	free  func(*Record) // frees a request's slot
	err   error         // why sending stopped early, if it failed
	ended chan struct{} // closed when sending ended
}

// loop waits for the next request's due time and sends it, after handing
// the dispatching on to a new goroutine. Its frame is on the stack of the
// request while it waits for its next token (see do): small.
func (d *dispatch) loop() {
	p, rec, done := d.next()
	if rec == nil {
		close(d.ended)
		return
	}
	go d.loop()
	d.r.request(d.rn, rec, p, done)
}

// next waits for the next request's due time and a slot and returns it,
// counted as sent (Runner.Sent, the run's WaitGroup), with the function
// that frees its slot; a nil record when sending ended (d.err says if it
// failed).
//
//go:noinline
func (d *dispatch) next() (_ *prompts.Prompt, rec *Record, _ func(*Record)) {
	r, rn := d.r, d.rn
	// Sending stops at the schedule's end (natural) or sooner (request
	// count, source exhausted or failed, interrupt, Stop).
	natural := false
	defer func() {
		if rec != nil {
			return // not ended: a request to send
		}
		at := time.Since(rn.epoch)
		if natural {
			at = rn.end
		}
		r.endSending(rn, at)
	}()
	for {
		if r.capReached(r.seq.peek(), false) {
			// A count, not a clock, ended sending: the sessions already
			// started run to their end, bounded by the schedule's.
			r.graphs.waitIdle(rn)
			return nil, nil, nil
		}
		p, seq, err := r.seq.draw()
		if errors.Is(err, io.EOF) {
			r.graphs.waitIdle(rn) // sending ends with the last session
			return nil, nil, nil
		}
		if err != nil {
			d.err = fmt.Errorf("loadgen: prompt source: %w", err)
			return nil, nil, nil
		}
		at, ok := d.arr.Next(p)
		if !ok || at >= rn.end {
			natural = true
			return nil, nil, nil
		}
		if !r.opts.Shard.Owns(seq) {
			continue // another shard's: drawn only to keep the schedule whole
		}
		if p.Graph != nil {
			if d.err = d.session(p, seq, at); d.err != nil || rn.send.Err() != nil {
				return nil, nil, nil
			}
			continue
		}
		rec = r.newRecord(rn.epoch, p, seq, at)

		if !d.wait.until(rn.send, rn.epoch.Add(at)) {
			return nil, nil, nil
		}
		select {
		case d.slots <- struct{}{}:
		default:
			// Cap reached: wait for a slot until the run ends. The request
			// keeps its intended start, so the wait shows in its latency.
			d.timer.Reset(time.Until(d.deadline))
			select {
			case d.slots <- struct{}{}:
				d.timer.Stop() // Go ≥1.23: no stale tick can follow Stop
			case <-d.timer.C:
				// Sending ended with the schedule: the host readings cover
				// it, not the recording of the dropped rest.
				r.endSending(rn, rn.end)
				r.dropRest(rn, rec, d.arr)
				natural = true
				return nil, nil, nil
			case <-rn.send.Done():
				return nil, nil, nil
			}
		}
		done := d.free
		if p.FollowUp != nil {
			pp, slots := p, d.slots
			done = func(x *Record) { r.followUp(rn, slots, pp, x) }
		}
		r.sent.Add(1)
		r.capped.Add(1) // before the next dispatcher runs: the request cap reads it
		rn.wg.Add(1)
		return p, rec, done
	}
}

// dropRest records rec and every later arrival due before the end as
// dropped: they were due but could not be started.
func (r *Runner) dropRest(rn *run, rec *Record, arr dueTimes) {
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
			if r.capReached(r.seq.peek(), true) {
				return
			}
			p, seq, err := r.seq.draw()
			if err != nil {
				return
			}
			at, ok := arr.Next(p)
			if !ok || at >= rn.end {
				return
			}
			if r.opts.Shard.Owns(seq) {
				rec = r.newRecord(rn.epoch, p, seq, at)
			}
		}
	}
}

func (r *Runner) closedLoop(rn *run) error {
	arr, err := r.opts.arrivals(rn.epoch)
	if err != nil {
		return err
	}
	maxC := 0
	for _, s := range r.opts.Stages {
		maxC = max(maxC, s.Concurrency)
	}
	cw := &closedWork{r: r, rn: rn, arr: arr}
	cw.budget.Store(r.opts.Shard.Share(int64(r.opts.Requests)))
	var workers sync.WaitGroup
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
			// Sessions other workers still run are let finish first: a
			// worker out of budget must not cut them (waitIdle returns at
			// the schedule's end or a stop).
			defer func() {
				for cw.claims.Load() > 0 && sleep(rn.send, time.Millisecond, rn.ended) {
				}
				r.graphs.waitIdle(rn)
				r.endSending(rn, time.Since(rn.epoch))
			}()
			// The loop holds little: its frame is on the stack of a
			// request waiting for its next token (see do).
			var pending *prompts.Prompt // a session's next turn
			var bo backoff
			for {
				// After connection failures the worker waits before its
				// next request, so a dead server is not hammered and its
				// records do not fill the disk. The wait counts from
				// where the request was due: it shows as schedule lag.
				due := time.Duration(-1)
				if d := bo.wait(); d > 0 {
					due = time.Since(rn.epoch)
					if !sleep(rn.send, min(d, max(rn.end-due, 0)), rn.ended) {
						return
					}
				}
				p, rec := cw.next(w, pending, due)
				if rec == nil {
					return
				}
				r.do(rn, p, rec)
				bo.note(rec.ErrorKind)
				pending = nextTurn(p, rec)
				rn.out <- rec
			}
		}()
	}
	workers.Wait()
	return cw.srcErr
}

// closedWork is what the closed loop's workers share.
type closedWork struct {
	r       *Runner
	rn      *run
	arr     dueTimes
	budget  atomic.Int64
	claims  atomic.Int64 // budget taken, session not yet registered
	errOnce sync.Once
	srcErr  error
}

// next is worker w's next request (pending, a session's next turn, or a
// prompt drawn), once the stage wants w at work; nil when the worker is
// done.
//
// due, if not negative, is when the request was due had the worker not
// backed off: its intended start.
//
//go:noinline
func (cw *closedWork) next(w int, pending *prompts.Prompt, due time.Duration) (*prompts.Prompt, *Record) {
	r, rn := cw.r, cw.rn
	for rn.send.Err() == nil {
		now := time.Since(rn.epoch)
		if now >= rn.end {
			return nil, nil
		}
		// Worker w runs only while the current stage wants more than w
		// workers; otherwise it waits for the next stage.
		si := stageAt(r.opts.Stages, now)
		if r.opts.Stages[si].Concurrency <= w {
			next := time.Duration(0)
			for _, s := range r.opts.Stages[:si+1] {
				next += s.Duration
			}
			if !sleep(rn.send, next-now, rn.ended) {
				return nil, nil
			}
			continue
		}
		if r.opts.Requests > 0 && cw.budget.Add(-1) < 0 {
			return nil, nil
		}
		// Between taking a request from the budget and registering its
		// session, a session is neither live nor done: a worker out of
		// budget waits for such claims before it ends sending.
		cw.claims.Add(1)
		p, rec, again := cw.claim(pending, due)
		cw.claims.Add(-1)
		if again {
			continue
		}
		return p, rec
	}
	return nil, nil
}

// claim is next's part after the budget: the prompt drawn and its record,
// or again when it started a session (draw the next); nil when done.
func (cw *closedWork) claim(pending *prompts.Prompt, due time.Duration) (*prompts.Prompt, *Record, bool) {
	r, rn := cw.r, cw.rn
	p, seq, err := r.closedNext(rn, pending)
	if err != nil {
		if !errors.Is(err, io.EOF) {
			cw.errOnce.Do(func() { cw.srcErr = fmt.Errorf("loadgen: prompt source: %w", err) })
		}
		return nil, nil, false
	}
	if p == nil {
		return nil, nil, false // interrupted during a think time
	}
	if p.Graph != nil {
		if !cw.session(p, seq) {
			return nil, nil, false
		}
		return nil, nil, true
	}
	at, _ := cw.arr.Next(p)
	if due >= 0 {
		at = min(at, due)
	}
	rec := r.newRecord(rn.epoch, p, seq, at)
	r.sent.Add(1)
	return p, rec, false
}

// Backoff bounds of a closed-loop worker after consecutive connection
// failures: the first wait, doubled at each failure up to the cap.
const (
	backoffFirst = 10 * time.Millisecond
	backoffCap   = time.Second
)

// backoff counts a closed-loop worker's consecutive connection failures.
// Only a failure to reach the server counts: an HTTP error is an answer,
// and any answer or other outcome resets it.
type backoff struct{ fails int }

// note records the outcome of the worker's last request.
func (b *backoff) note(k ErrorKind) {
	if k == ErrConnect {
		b.fails++
	} else {
		b.fails = 0
	}
}

// wait is how long to wait before the next request: 0 after anything but
// a connection failure, then backoffFirst doubling up to backoffCap.
func (b *backoff) wait() time.Duration {
	if b.fails == 0 {
		return 0
	}
	d := backoffFirst
	for i := 1; i < b.fails && d < backoffCap; i++ {
		d *= 2
	}
	return min(d, backoffCap)
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

func numCPU() int { return runtime.GOMAXPROCS(0) }

// Sent is the number of requests sent so far; safe to call during Run.
func (r *Runner) Sent() int64 { return r.sent.Load() }
