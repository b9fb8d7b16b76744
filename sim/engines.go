package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// pick deals a request to the next engine that is not draining, round
// robin, and counts it as that engine's until runOnEngine ends.
func (s *Server) pick() int {
	n := len(s.engines)
	start := int(s.rr.Add(1)-1) % n
	i := start
	for k := range n {
		if j := (start + k) % n; !s.draining[j].Load() {
			i = j
			break
		}
	}
	s.engReqs[i].Add(1)
	return i
}

// Engines is how many data-parallel engines serve requests (Config.Engines;
// 0 in ModeFixed).
func (s *Server) Engines() int { return len(s.engines) }

var errClosed = errors.New("sim: server closed")

// ErrRestart is returned by RestartEngine for an engine it cannot restart.
var ErrRestart = errors.New("sim: restart")

// RestartEngine restarts engine i the way a rolling restart behind a
// router does: the engine is drained (new requests go to the others), and
// once its last request has finished and a /metrics scrape that began
// after that has been answered, its counters and histograms start again
// at zero, as a new engine process's do, and it takes requests again.
// Nothing it counted goes unscraped, so a scraper that takes increases
// series by series loses nothing, while the sum over engines falls. It
// blocks until the engine is back, or ctx ends (the engine then takes
// requests again, its counters as they were). It needs Engines() ≥ 2: the
// others take the load meanwhile.
func (s *Server) RestartEngine(ctx context.Context, i int) error {
	if len(s.engines) < 2 || i < 0 || i >= len(s.engines) {
		return fmt.Errorf("%w: engine %d of %d (needs ModeBatch and at least 2 engines)", ErrRestart, i, len(s.engines))
	}
	if !s.draining[i].CompareAndSwap(false, true) {
		return fmt.Errorf("%w: engine %d is already restarting", ErrRestart, i)
	}
	restarted := false
	defer func() {
		if !restarted {
			s.draining[i].Store(false)
		}
	}()
	e := s.engines[i]
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	// Idle: no request in a handler's hands, and the scheduler has
	// published an empty batch (after the last step's token count).
	for s.engReqs[i].Load() > 0 || e.nRunning.Load() > 0 || e.nWaiting.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.quit:
			return errClosed
		}
	}
	select {
	case <-s.scrapes.next():
	case <-ctx.Done():
		return ctx.Err()
	case <-s.quit:
		return errClosed
	}
	s.metrics.reset(i)
	e.cache.clear()
	restarted = true
	s.draining[i].Store(false)
	return nil
}

// scrapeWatch tells when a /metrics scrape has been answered.
type scrapeWatch struct {
	mu      sync.Mutex
	waiters []chan struct{}
}

// next returns a channel closed once a scrape that began after this call
// has been answered.
func (w *scrapeWatch) next() <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	w.waiters = append(w.waiters, ch)
	w.mu.Unlock()
	return ch
}

func (w *scrapeWatch) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		waiters := w.waiters
		w.waiters = nil
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
		for _, ch := range waiters {
			close(ch)
		}
	})
}

// engineJob is one request as a batching engine runs it.
type engineJob struct {
	prompt, max int
	arrived     time.Time
	fault       FaultKind
	faultFor    time.Duration
	mid         int   // content chunks before a mid-stream stall
	seqNo       int64 // seeds the jitter of ModeFixed
	// blocks are the prompt's full blocks' hashes for the prefix cache;
	// hit, when set, is told the prompt tokens it hit, before admitted.
	blocks []uint64
	hit    *int
}

// runOnEngine feeds one request through a batching engine, for every
// protocol alike (exchange.produce): the stall fault first, then the engine
// pick deals it to (told to onEngine before it is submitted), admitted once at
// its first token, and produced each time the engine has made more:
// produced(avail) sends what it may of the avail tokens made so far and
// reports false to stop. runOnEngine reports true when the engine has
// made all max tokens, false when the request was cancelled, the server
// closed or produced refused; the engine drops a request left unfinished.
func (s *Server) runOnEngine(ctx context.Context, j engineJob, onEngine func(i int), admitted func(at time.Time), produced func(avail int) bool) bool {
	if j.fault == FaultStall {
		if _, ok := s.gate.sleepUntil(time.Now().Add(j.faultFor), ctx.Done(), s.quit, nil); !ok {
			return false
		}
	}
	q := newSeq(j.prompt, j.max, j.arrived)
	q.blocks = j.blocks
	if j.fault == FaultStallMid {
		q.pauseAt = min(j.mid*s.cfg.TokensPerChunk, j.max)
		q.pauseFor = j.faultFor
	}
	i := s.pick()
	onEngine(i)
	eng := s.engines[i]
	eng.submit(q)
	defer func() {
		if q.avail.Load() < int64(q.max) {
			eng.cancel(q)
		}
		s.engReqs[i].Add(-1)
	}()
	isAdmitted := false
	for {
		avail := int(q.avail.Load())
		if !isAdmitted && avail > 0 {
			isAdmitted = true
			if j.hit != nil {
				*j.hit = q.cached
			}
			admitted(s.epoch.Add(time.Duration(q.admittedAt.Load() - 1)))
		}
		if !produced(avail) {
			return false
		}
		if avail >= j.max {
			return true
		}
		select {
		case <-q.notify:
		case <-ctx.Done():
			return false
		case <-s.quit:
			return false
		}
	}
}

// runOnTimer times one request on its own (ModeFixed), for every protocol
// alike (exchange.produce): admitted at once, FixedTTFT to the first chunk
// (plus a stall fault's time) and FixedITL between chunks, each ± Jitter,
// a mid-stream stall after j.mid chunks. produced(n, at) sends the next
// chunk of n tokens, made at at, and reports false to stop. runOnTimer
// reports true when all max tokens were made, false when the request was
// cancelled, the server closed or produced refused.
func (s *Server) runOnTimer(ctx context.Context, j engineJob, admitted func(at time.Time), produced func(n int, at time.Time) bool) bool {
	now := time.Now()
	kv := int64(j.prompt + j.max)
	s.fixedRunning.Add(1)
	s.fixedKV.Add(kv)
	s.busy.begin(now)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
		s.busy.end(time.Now())
		s.fixedKV.Add(-kv)
		s.fixedRunning.Add(-1)
	}()
	cached := s.cache.admit(j.blocks, j.prompt)
	if j.hit != nil {
		*j.hit = cached
	}
	admitted(now)
	eng := s.metrics.engine(0)
	eng.queueTime.Observe(now.Sub(j.arrived).Seconds())
	eng.promptTokens.Add(float64(j.prompt))
	eng.prefix(j.prompt, cached)
	var rng *rand.Rand
	if s.cfg.Jitter > 0 {
		rng = rand.New(rand.NewPCG(s.cfg.Seed, uint64(j.seqNo)))
	}
	jit := func(d time.Duration) time.Duration {
		if rng == nil {
			return d
		}
		d += time.Duration(rng.Int64N(int64(2*s.cfg.Jitter)+1)) - s.cfg.Jitter
		return max(0, d)
	}
	first := s.cfg.FixedTTFT
	if j.fault == FaultStall {
		first += j.faultFor
	}
	due := now.Add(jit(first))
	paused := false
	tpc := s.cfg.TokensPerChunk
	var flushed time.Time // when the last chunk's write returned
	for made, chunks := 0, 0; made < j.max; chunks++ {
		if j.fault == FaultStallMid && !paused && chunks >= j.mid {
			// The stall runs from the last chunk's flush, so the gap the
			// client sees is at least the stall however long that took.
			paused = true
			if due.Before(flushed) {
				due = flushed
			}
			due = due.Add(j.faultFor)
		}
		eff, ok := s.gate.sleepUntil(due, ctx.Done(), s.quit, &timer)
		if !ok {
			return false
		}
		n := min(tpc, j.max-made)
		made += n
		if !produced(n, eff) {
			return false
		}
		flushed = time.Now()
		eng.genTokens.Add(float64(n))
		due = eff.Add(jit(s.cfg.FixedITL))
	}
	return true
}
