package sim

import (
	"sync"
	"sync/atomic"
	"time"
)

// seq is one sequence in the engine. The handler goroutine creates it and
// reads avail/admittedAt; everything else is owned by the scheduler.
type seq struct {
	prompt, max, kv int
	arrived         time.Time
	blocks          []uint64      // the prompt's full blocks' hashes, for the prefix cache
	cached          int           // prompt tokens the prefix cache held; set before admittedAt
	pauseAt         int           // stall_mid: pause once this many tokens are out (0 with pauseFor: before the first)
	pauseFor        time.Duration // 0: no pause

	avail      atomic.Int64 // tokens produced so far
	admittedAt atomic.Int64 // ns since the server epoch, +1; 0 = still waiting
	notify     chan struct{}

	// scheduler-owned
	state    int // stWaiting, stRunning, stDone
	produced int
	paused   bool // the pause has been taken (or is in progress)
	resumeAt time.Time
}

const (
	stNew = iota
	stWaiting
	stRunning
	stDone
)

func newSeq(prompt, max int, arrived time.Time) *seq {
	return &seq{prompt: prompt, max: max, kv: prompt + max, arrived: arrived, notify: make(chan struct{}, 1)}
}

func (q *seq) signal() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// engine is the continuous-batching model (ModeBatch): one scheduler
// goroutine runs steps back to back, timed with real sleeps.
//
// Requests wait in a FIFO queue. Before each step the scheduler admits
// requests from the head of the queue while a slot is free (Config.Slots,
// vLLM's max_num_seqs), the KV cache has room for the request's prompt +
// max_tokens tokens (Config.KVTokens, reserved whole at admission and freed
// when the request finishes or is cancelled), and the step's prefill budget
// (Config.MaxBatchTokens prompt tokens; one request is always admitted)
// lasts. A head that does not fit blocks the queue (first come, first
// served). A request that could never fit (prompt + max_tokens > KVTokens)
// is rejected with 400 before it gets here, as vLLM rejects requests
// longer than max_model_len. A step lasts
//
//	DecodeBase + DecodePerSeq × running
//	  + (PrefillBase + PrefillPerToken × prompt tokens admitted), if any were admitted
//
// where a prompt's tokens the prefix cache held (prefixCache) are not
// counted, in the step's time or its MaxBatchTokens budget.
//
// and at its end every running sequence, the newly admitted included (its
// prefill produced its first token), emits TokensPerChunk tokens. So a
// prefill holds up the whole batch's next token, as in a non-chunked or
// step-level prefill; MaxBatchTokens bounds how long. TTFT below capacity
// is about one step with prefill; above capacity the queue grows, and
// queue time and TTFT grow with it. Back-to-back steps are scheduled from
// the previous step's end, so timer lateness does not slow the engine.
type engine struct {
	index   int // its engine label on /metrics
	cfg     Config
	epoch   time.Time
	gate    *gate
	busy    *busyMeter
	metrics *metrics
	quit    <-chan struct{}
	done    chan struct{}
	watch   *stateWatch
	// emitted are the sequences the step fed, told after its accounting.
	emitted []*seq

	mu      sync.Mutex
	inbox   []*seq
	cancels []*seq
	scrapes []chan struct{} // MetricsFromLoop: closed when the loop is between steps
	wake    chan struct{}

	// cache is the engine's prefix cache (nil: off); the scheduler alone
	// uses it.
	cache *prefixCache

	// scheduler-owned
	waiting []*seq
	running []*seq
	kvUsed  int
	timer   *time.Timer

	// published for the gauges
	nRunning, nWaiting, nKV atomic.Int64
}

func newEngine(cfg Config, epoch time.Time, g *gate, busy *busyMeter, quit <-chan struct{}) *engine {
	return &engine{cfg: cfg, epoch: epoch, gate: g, busy: busy, quit: quit,
		done: make(chan struct{}), wake: make(chan struct{}, 1)}
}

// engineGauges is one engine's state for its gauges.
type engineGauges struct{ e *engine }

func (g engineGauges) running() int      { return int(g.e.nRunning.Load()) }
func (g engineGauges) waiting() int      { return int(g.e.nWaiting.Load()) }
func (g engineGauges) kvUsedTokens() int { return int(g.e.nKV.Load()) }

func (e *engine) submit(q *seq) {
	e.mu.Lock()
	e.inbox = append(e.inbox, q)
	e.nWaiting.Add(1) // counted at once; the scheduler republishes exact values
	e.mu.Unlock()
	e.watch.changed()
	e.poke()
}

// cancel removes q (waiting or running) and frees its slot and KV at the
// start of the next step.
func (e *engine) cancel(q *seq) {
	e.mu.Lock()
	e.cancels = append(e.cancels, q)
	e.mu.Unlock()
	e.poke()
}

func (e *engine) poke() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// loopFree returns a channel closed when the scheduler is next between
// steps: at once when idle, else when the step in progress ends. llama.cpp
// answers /metrics from its inference loop in the same way.
func (e *engine) loopFree() <-chan struct{} {
	ch := make(chan struct{})
	e.mu.Lock()
	e.scrapes = append(e.scrapes, ch)
	e.mu.Unlock()
	e.poke()
	return ch
}

// drain moves submitted sequences to the queue, applies cancellations and
// lets waiting scrapes go.
func (e *engine) drain() {
	e.mu.Lock()
	inbox, cancels, scrapes := e.inbox, e.cancels, e.scrapes
	e.inbox, e.cancels, e.scrapes = nil, nil, nil
	e.mu.Unlock()
	for _, ch := range scrapes {
		close(ch)
	}
	for _, q := range inbox {
		if q.state == stNew {
			q.state = stWaiting
			e.waiting = append(e.waiting, q)
		}
	}
	for _, q := range cancels {
		switch q.state {
		case stWaiting:
			for i, w := range e.waiting {
				if w == q {
					e.waiting = append(e.waiting[:i], e.waiting[i+1:]...)
					break
				}
			}
		case stRunning:
			for i, r := range e.running {
				if r == q {
					e.running = append(e.running[:i], e.running[i+1:]...)
					break
				}
			}
			e.kvUsed -= q.kv
		}
		q.state = stDone
	}
}

func (e *engine) publish() {
	e.nRunning.Store(int64(len(e.running)))
	e.mu.Lock()
	pending := len(e.inbox)
	e.mu.Unlock()
	e.nWaiting.Store(int64(len(e.waiting) + pending))
	e.nKV.Store(int64(e.kvUsed))
	e.watch.changed()
}

// admit moves sequences from the head of the queue into the batch while a
// slot and their KV are free (first come, first served: a head that does not
// fit blocks those behind it, as in vLLM's FCFS policy) and the step's
// prefill budget lasts. It returns the prompt tokens to prefill.
func (e *engine) admit(now time.Time) (prefillTokens, admitted int) {
	for len(e.waiting) > 0 && len(e.running) < e.cfg.Slots {
		q := e.waiting[0]
		if e.kvUsed+q.kv > e.cfg.KVTokens {
			break
		}
		hit := e.cache.hits(q.blocks, q.prompt)
		if admitted > 0 && prefillTokens+q.prompt-hit > e.cfg.MaxBatchTokens {
			break
		}
		e.waiting[0] = nil
		e.waiting = e.waiting[1:]
		q.state = stRunning
		e.running = append(e.running, q)
		e.kvUsed += q.kv
		q.cached = e.cache.admit(q.blocks, q.prompt)
		prefillTokens += q.prompt - q.cached
		admitted++
		q.admittedAt.Store(int64(now.Sub(e.epoch)) + 1)
		if q.pauseFor > 0 && q.pauseAt == 0 { // stall_mid on a one-chunk answer
			q.paused = true
			q.resumeAt = now.Add(q.pauseFor)
		}
		m := e.metrics.engine(e.index)
		m.queueTime.Observe(now.Sub(q.arrived).Seconds())
		m.promptTokens.Add(float64(q.prompt))
		m.prefix(q.prompt, q.cached)
	}
	return prefillTokens, admitted
}

func (e *engine) run() {
	defer close(e.done)
	defer func() {
		if e.timer != nil {
			e.timer.Stop()
		}
	}()
	var lastEnd time.Time // end of the previous step while the engine stays busy
	for {
		e.drain()
		if len(e.running) == 0 && len(e.waiting) == 0 {
			e.publish()
			select {
			case <-e.wake:
			case <-e.quit:
				return
			}
			lastEnd = time.Time{}
			continue
		}
		now := time.Now()
		prefill, admitted := e.admit(now)
		e.publish()

		active := 0
		var nextResume time.Time
		for _, q := range e.running {
			if q.resumeAt.After(now) {
				if nextResume.IsZero() || q.resumeAt.Before(nextResume) {
					nextResume = q.resumeAt
				}
				continue
			}
			active++
		}
		if active == 0 {
			// Everything running is paused (stall_mid) and nothing more
			// fits: idle until a pause ends or something changes.
			if nextResume.IsZero() { // nothing running, queue head cannot fit: impossible by admission check
				nextResume = now.Add(time.Millisecond)
			}
			select {
			case <-e.wake:
			case <-e.quit:
				return
			case <-e.after(nextResume.Sub(now)):
			}
			lastEnd = time.Time{}
			continue
		}

		decode := e.cfg.DecodeBase + time.Duration(active)*e.cfg.DecodePerSeq
		var prefillDur time.Duration
		if admitted > 0 {
			prefillDur = e.cfg.PrefillBase + time.Duration(prefill)*e.cfg.PrefillPerToken
		}
		dur := decode + prefillDur
		// Back-to-back steps start where the previous one ended, so timer
		// lateness does not slow the simulated GPU down.
		start := now
		if !lastEnd.IsZero() && now.Sub(lastEnd) < 2*time.Millisecond && lastEnd.Before(now) {
			start = lastEnd
		}
		end, ok := e.gate.sleepUntil(start.Add(dur), nil, e.quit, &e.timer)
		if !ok {
			return
		}
		lastEnd = end
		e.busy.add(dur)
		generated := e.emit(end)
		e.metrics.llama.add(prefill, prefillDur, generated, decode, 1, active)
		// Handlers are told only now, so a scrape after a response holds
		// the step that ended it (tokens, decodes, the gauges) in every
		// series.
		e.publish()
		e.signalEmitted()
	}
}

// signalEmitted tells the handlers of the sequences the last step fed.
func (e *engine) signalEmitted() {
	for i, q := range e.emitted {
		q.signal()
		e.emitted[i] = nil
	}
	e.emitted = e.emitted[:0]
}

// after returns a channel that fires after d, reusing the engine's timer.
func (e *engine) after(d time.Duration) <-chan time.Time {
	if e.timer == nil {
		e.timer = time.NewTimer(d)
	} else {
		e.timer.Reset(d)
	}
	return e.timer.C
}

// emit ends a step: every running, unpaused sequence gets TokensPerChunk
// more tokens (fewer for the last), and finished ones leave the batch.
func (e *engine) emit(now time.Time) (generated int) {
	kept := e.running[:0]
	gen := e.metrics.engine(e.index).genTokens
	for _, q := range e.running {
		if q.resumeAt.After(now) {
			kept = append(kept, q)
			continue
		}
		n := min(e.cfg.TokensPerChunk, q.max-q.produced)
		q.produced += n
		generated += n
		// Counted before the handler is told, so a scrape after the
		// response has every token of it.
		gen.Add(float64(n))
		q.avail.Store(int64(q.produced))
		e.emitted = append(e.emitted, q)
		if q.produced >= q.max {
			q.state = stDone
			e.kvUsed -= q.kv
			continue
		}
		if q.pauseFor > 0 && !q.paused && q.produced >= q.pauseAt {
			q.paused = true
			q.resumeAt = now.Add(q.pauseFor)
		}
		kept = append(kept, q)
	}
	for i := len(kept); i < len(e.running); i++ {
		e.running[i] = nil
	}
	e.running = kept
	return generated
}
