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

// Source yields the prompts to send, in order. The runner calls Next from
// one goroutine at a time; io.EOF ends a finite source (a trace).
type Source interface {
	Next() (*prompts.Prompt, error)
}

// Options configure a run. The zero value of a field means its default.
type Options struct {
	// Stages is the load profile. Open loop uses Stage.Rate, closed loop
	// Stage.Concurrency.
	Stages []Stage
	// Closed selects the closed loop: each of Concurrency workers sends its
	// next request when the previous one ends, so intended start = send.
	Closed bool
	// Arrival is the open-loop process (ArrivalConstant, ArrivalPoisson,
	// ArrivalGamma) and Burstiness the gamma shape.
	Arrival    string
	Burstiness float64
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
	// KeepText asks for answer text on records (sessions need it).
	KeepText bool
}

// Info describes a finished run.
type Info struct {
	Started     time.Time     // wall clock at the run's epoch
	Elapsed     time.Duration // epoch to the last record
	Interrupted bool          // the caller's context was cancelled
	// Sent, Dropped count requests; the records carry the rest.
	Sent, Dropped int64
	// CPUUtilization is the process's CPU time over wall time × GOMAXPROCS
	// during the run, 0–1: near 1, the load generator may be the bottleneck.
	CPUUtilization float64
}

// Runner sends a Source's prompts through a Client on a schedule.
type Runner struct {
	client Client
	src    Source
	opts   Options

	srcMu sync.Mutex // guards src and seq in closed loop
	seq   int64
	sent  atomic.Int64
	drop  atomic.Int64
}

// NewRunner returns a runner; Run starts it.
func NewRunner(c Client, src Source, opts Options) (*Runner, error) {
	if len(opts.Stages) == 0 {
		return nil, errors.New("loadgen: no stages: give a rate or concurrency and a duration")
	}
	for i, s := range opts.Stages {
		if s.Duration <= 0 {
			return nil, fmt.Errorf("loadgen: stage %d (%s): duration must be positive", i+1, s.Name)
		}
		if opts.Closed && s.Concurrency < 1 {
			return nil, fmt.Errorf("loadgen: stage %d (%s): closed loop needs concurrency ≥ 1", i+1, s.Name)
		}
	}
	if opts.MaxInFlight <= 0 {
		opts.MaxInFlight = 10000
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	return &Runner{client: c, src: src, opts: opts}, nil
}

// Run sends requests until the stages end, the request count is reached,
// the source is exhausted or ctx is cancelled, and delivers every record
// (completed, failed, cancelled or dropped) to out, which it closes. In
// flight requests are cancelled when ctx is; at the natural end they are
// let finish within their timeout.
func (r *Runner) Run(ctx context.Context, out chan<- *Record) (Info, error) {
	defer close(out)
	epoch := time.Now()
	info := Info{Started: epoch}
	cpu0 := cpuTime()
	end := TotalDuration(r.opts.Stages)

	// reqCtx ends in-flight requests only on interruption, not at the
	// natural end of the schedule.
	reqCtx, cancelReqs := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelReqs()
	stopWatch := context.AfterFunc(ctx, cancelReqs)
	defer stopWatch()

	var wg sync.WaitGroup
	var err error
	if r.opts.Closed {
		r.closedLoop(ctx, reqCtx, epoch, end, out, &wg)
	} else {
		err = r.openLoop(ctx, reqCtx, epoch, end, out, &wg)
	}
	wg.Wait()
	info.Elapsed = time.Since(epoch)
	info.Interrupted = ctx.Err() != nil
	info.Sent, info.Dropped = r.sent.Load(), r.drop.Load()
	if wall := info.Elapsed.Seconds(); wall > 0 {
		info.CPUUtilization = (cpuTime() - cpu0).Seconds() / (wall * float64(runtime.GOMAXPROCS(0)))
	}
	return info, err
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
	return rec
}

// send runs one request on its own goroutine; done releases its slot.
func (r *Runner) send(reqCtx context.Context, rec *Record, p *prompts.Prompt, out chan<- *Record, wg *sync.WaitGroup, done func(*Record)) {
	r.sent.Add(1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(reqCtx, r.opts.Timeout)
		r.client.Do(ctx, p, rec)
		cancel()
		if rec.End == 0 {
			rec.End = rec.Now()
		}
		if done != nil {
			done(rec)
		}
		out <- rec
	}()
}

func (r *Runner) openLoop(ctx, reqCtx context.Context, epoch time.Time, end time.Duration, out chan<- *Record, wg *sync.WaitGroup) error {
	var arr Arrivals
	if !r.opts.Trace {
		ol, err := NewOpenLoop(r.opts.Stages, r.opts.Arrival, r.opts.Burstiness, r.opts.Seed)
		if err != nil {
			return err
		}
		arr = ol
	}
	slots := make(chan struct{}, r.opts.MaxInFlight)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	deadline := epoch.Add(end)
	release := func(rec *Record) { <-slots }

	var followUp func(p *prompts.Prompt, rec *Record)
	followUp = func(prev *prompts.Prompt, rec *Record) {
		// Sessions: the next turn is due Think after this answer ends,
		// measured from then; it shares the in-flight cap.
		<-slots
		if prev.FollowUp == nil || ctx.Err() != nil || !rec.OK() {
			return
		}
		next := prev.FollowUp(rec.Text)
		if next == nil {
			return
		}
		due := rec.End + next.Think
		if due >= end {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Not time.AfterFunc: a pending turn must not hold Run past an
			// interrupt for the rest of its think time.
			t := time.NewTimer(time.Until(epoch.Add(due)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			r.srcMu.Lock()
			seq := r.seq
			r.seq++
			r.srcMu.Unlock()
			nrec := r.newRecord(epoch, next, seq, due)
			r.send(reqCtx, nrec, next, out, wg, func(x *Record) { followUp(next, x) })
		}()
	}

	for {
		if r.opts.Requests > 0 && r.sent.Load() >= int64(r.opts.Requests) {
			return nil
		}
		r.srcMu.Lock()
		p, err := r.src.Next()
		seq := r.seq
		if err == nil {
			r.seq++
		}
		r.srcMu.Unlock()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("loadgen: prompt source: %w", err)
		}
		var at time.Duration
		if r.opts.Trace {
			at = p.At
			if at >= end {
				return nil
			}
		} else {
			var ok bool
			if at, ok = arr.Next(); !ok || at >= end {
				return nil
			}
		}
		rec := r.newRecord(epoch, p, seq, at)

		if !r.waitUntil(ctx, timer, epoch.Add(at)) {
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
				r.dropRest(rec, p, arr, end, out)
				return nil
			case <-ctx.Done():
				return nil
			}
		}
		done := release
		if p.FollowUp != nil {
			pp := p
			done = func(x *Record) { followUp(pp, x) }
		}
		r.send(reqCtx, rec, p, out, wg, done)
	}
}

// spinWindow is how close to a due time the dispatcher stops sleeping on
// a timer and yields in a loop instead: Go's timers sleep in the netpoller,
// whose wait rounds to whole milliseconds when no thread is awake, which
// alone would add ~0.5 ms of schedule lag to every request.
const spinWindow = 1500 * time.Microsecond

// waitUntil returns at due (false if ctx ended first).
func (r *Runner) waitUntil(ctx context.Context, timer *time.Timer, due time.Time) bool {
	if wait := time.Until(due) - spinWindow; wait > 0 {
		timer.Reset(wait)
		select {
		case <-timer.C:
		case <-ctx.Done():
			return false
		}
	}
	for time.Now().Before(due) {
		runtime.Gosched()
	}
	return ctx.Err() == nil
}

// dropRest records rec and every later arrival due before the end as
// dropped: they were due but could not be started.
func (r *Runner) dropRest(rec *Record, p *prompts.Prompt, arr Arrivals, end time.Duration, out chan<- *Record) {
	for {
		rec.ErrorKind = ErrDropped
		rec.Error = "not started before the run ended: in-flight cap reached"
		rec.Sent, rec.End = rec.Intended, rec.Intended
		r.drop.Add(1)
		out <- rec
		if r.opts.Requests > 0 && r.sent.Load()+r.drop.Load() >= int64(r.opts.Requests) {
			return
		}
		r.srcMu.Lock()
		p2, err := r.src.Next()
		r.srcMu.Unlock()
		if err != nil {
			return
		}
		p = p2
		var at time.Duration
		if r.opts.Trace {
			at = p.At
		} else {
			var ok bool
			if at, ok = arr.Next(); !ok {
				return
			}
		}
		if at >= end {
			return
		}
		r.srcMu.Lock()
		seq := r.seq
		r.seq++
		r.srcMu.Unlock()
		rec = r.newRecord(rec.Epoch(), p, seq, at)
	}
}

func (r *Runner) closedLoop(ctx, reqCtx context.Context, epoch time.Time, end time.Duration, out chan<- *Record, wg *sync.WaitGroup) {
	maxC := 0
	for _, s := range r.opts.Stages {
		maxC = max(maxC, s.Concurrency)
	}
	var budget atomic.Int64
	budget.Store(int64(r.opts.Requests))
	var workers sync.WaitGroup
	for w := 0; w < maxC; w++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			var pending *prompts.Prompt // a session's next turn
			for ctx.Err() == nil {
				now := time.Since(epoch)
				if now >= end {
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
					select {
					case <-time.After(next - now):
					case <-ctx.Done():
					}
					continue
				}
				if r.opts.Requests > 0 && budget.Add(-1) < 0 {
					return
				}
				p := pending
				r.srcMu.Lock()
				if p == nil {
					var err error
					if p, err = r.src.Next(); err != nil {
						r.srcMu.Unlock()
						return
					}
				}
				seq := r.seq
				r.seq++
				r.srcMu.Unlock()
				if pending != nil && pending.Think > 0 {
					select {
					case <-time.After(pending.Think):
					case <-ctx.Done():
						return
					}
				}
				rec := r.newRecord(epoch, p, seq, time.Since(epoch))
				r.sent.Add(1)
				cctx, cancel := context.WithTimeout(reqCtx, r.opts.Timeout)
				r.client.Do(cctx, p, rec)
				cancel()
				if rec.End == 0 {
					rec.End = rec.Now()
				}
				pending = nil
				if p.FollowUp != nil && rec.OK() {
					pending = p.FollowUp(rec.Text)
				}
				out <- rec
			}
		}()
	}
	workers.Wait()
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
