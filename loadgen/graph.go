package loadgen

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Agent sessions (a prompt with a Graph): the engine runs the graph's
// calls by their edges. A root is due at the session's intended start
// plus its Offset; a dependent call at the latest of its edges'
// predecessor event (sent, first token, end) plus the edge's delay, and
// it is sent only once every edge is met. Lateness against that is its
// schedule lag, as for any request.
//
// A waiting call costs no goroutine: each session keeps one timer, armed
// for its earliest call that is due but not yet sent, and a goroutine
// exists only for a call being sent. An interrupt or Stop settles every
// waiting call at once (abortAll), so none holds Run.
//
// Calls that cannot be sent are recorded, never lost, so a session's
// records always number its calls:
//   - a predecessor that the server failed (any Counted kind), or one
//     whose first-token edge ended without a token: its dependents,
//     transitively, are ErrCancelledByDependency;
//   - a call due at or after the schedule's end (or after sending ended
//     sooner), or whose predecessor was cut or not due: ErrNotDue, never
//     sent and, like an arrival past the schedule, not part of the run's
//     counts (not sent, not cut, bound by no validity rule);
//   - a call still waiting when the run is interrupted or stopped, or whose
//     predecessor was: ErrCancelled.
//
// Unsent calls' records have Sent = End = Intended, the instant they were
// settled (dropped requests are recorded the same way).
//
// OnFirstToken edges are met as the predecessor's first chunk arrives,
// for clients that add chunks with Record.AddChunk; with a client that
// does not, at the predecessor's end, the intended start still its first
// token plus the delay, so the late release shows as schedule lag. An
// edge met before its predecessor failed (start, first token) stays met.
//
// Open loop: the arrivals give each session's intended start; the calls
// share the in-flight cap. Closed loop: each worker runs one session tree
// at a time and starts the next when it completes; calls take no slot.

// Call states.
const (
	callWaiting uint8 = iota // edges not all met
	callReady                // every edge met, waiting for its due time
	callSending              // handed to a goroutine that sends it
	callDone                 // answered
	callFailed               // sent and failed
	callSkipped              // recorded without being sent
)

type callState struct {
	need     int32 // edges not yet met
	state    uint8
	kind     ErrorKind     // a failed or skipped call's kind
	due      time.Duration // intended start, once known
	toolWait time.Duration
	// tokenSeen: the first-token edges from this call were met as its
	// first token arrived (Record.AddChunk), not at its end.
	tokenSeen bool
}

// graphs is a run's live sessions.
type graphs struct {
	mu    sync.Mutex
	live  map[*session]struct{}
	idle  chan struct{} // closed when live empties; nil while none ever began
	abort bool
}

// session is one live session graph.
type session struct {
	r     *Runner
	rn    *run
	g     *prompts.Graph
	seq   int64 // the first call's Seq: the session's number in the source
	slots chan struct{}
	done  chan struct{} // closed when the last record is delivered

	mu    sync.Mutex
	calls []callState
	timer *time.Timer
	fig   SessionFigures

	outMu     sync.Mutex
	delivered int
}

// startSession begins p's graph, due at start; slots is the open loop's
// in-flight cap (nil: closed loop). It returns the session, whose done
// closes once every call has its record delivered.
func (r *Runner) startSession(rn *run, p *prompts.Prompt, seq int64, start time.Duration, slots chan struct{}) (*session, error) {
	g := p.Graph
	if err := g.Validate(); err != nil {
		return nil, fmt.Errorf("loadgen: %w", err)
	}
	s := &session{r: r, rn: rn, g: g, seq: seq, slots: slots, done: make(chan struct{}),
		calls: make([]callState, len(g.Calls))}
	s.fig = SessionFigures{Session: g.ID, Trace: g.Trace}
	if g.HashIDs && g.PromptTokens > 0 {
		s.fig.Promised, s.fig.PromisedOf = g.PromisedPrefixTokens, g.PromptTokens
	}
	rn.wg.Add(1)
	if !r.graphs.add(rn, s) {
		rn.wg.Done()
		return nil, nil
	}
	s.mu.Lock()
	for i := range g.Calls {
		c := &s.calls[i]
		c.need = int32(len(g.Calls[i].After))
		if c.need == 0 {
			c.state, c.due = callReady, start+g.Calls[i].Offset
		}
	}
	emit := s.release(nil)
	s.mu.Unlock()
	s.deliver(emit)
	return s, nil
}

// add registers s as live, false when the run was already aborted.
func (gs *graphs) add(rn *run, s *session) bool {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if gs.abort {
		return false
	}
	if gs.live == nil {
		gs.live = map[*session]struct{}{}
		context.AfterFunc(rn.send, gs.abortAll)
	}
	if len(gs.live) == 0 {
		gs.idle = make(chan struct{})
	}
	gs.live[s] = struct{}{}
	return true
}

func (gs *graphs) remove(s *session) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	delete(gs.live, s)
	if len(gs.live) == 0 && gs.idle != nil {
		close(gs.idle)
		gs.idle = nil
	}
}

// abortAll settles every waiting call of every live session: the run was
// interrupted or stopped.
func (gs *graphs) abortAll() {
	gs.mu.Lock()
	gs.abort = true
	live := make([]*session, 0, len(gs.live))
	for s := range gs.live {
		live = append(live, s)
	}
	gs.mu.Unlock()
	for _, s := range live {
		s.mu.Lock()
		if s.timer != nil {
			s.timer.Stop()
		}
		emit := s.release(nil)
		s.mu.Unlock()
		s.deliver(emit)
	}
}

// waitIdle waits until no session is live, or sending ends, or the
// schedule's end: a finite source's last session may still run.
func (gs *graphs) waitIdle(rn *run) {
	gs.mu.Lock()
	idle := gs.idle
	gs.mu.Unlock()
	if idle == nil {
		return
	}
	t := time.NewTimer(time.Until(rn.epoch.Add(rn.end)))
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	case <-rn.send.Done():
	}
}

// release sends every ready call now due, settles those that will never
// be, and arms the timer for the next; with s.mu held. It returns emit
// with the records to deliver once the lock is released.
func (s *session) release(emit []*Record) []*Record {
	rn := s.rn
	now := time.Since(rn.epoch)
	stopped := rn.send.Err() != nil
	endAt := rn.end
	select {
	case <-rn.ended:
		endAt = min(endAt, rn.sentEnd)
	default:
	}
	next := time.Duration(-1)
	for i := range s.calls {
		c := &s.calls[i]
		switch {
		case c.state == callWaiting && stopped:
			emit = s.skip(emit, i, ErrCancelled, "cancelled: the run stopped before the call was due", now)
		case c.state != callReady:
		case stopped:
			emit = s.skip(emit, i, ErrCancelled, "cancelled: the run stopped before the call was due", now)
		case c.due >= endAt:
			emit = s.skip(emit, i, ErrNotDue, "not sent: due after the schedule ended", max(c.due, now))
		case c.due <= now:
			c.state = callSending
			go s.send(i)
		case next < 0 || c.due < next:
			next = c.due
		}
	}
	if next >= 0 {
		d := time.Until(rn.epoch.Add(next))
		if s.timer == nil {
			s.timer = time.AfterFunc(d, s.fire)
		} else {
			s.timer.Reset(d)
		}
	}
	return emit
}

func (s *session) fire() {
	s.mu.Lock()
	emit := s.release(nil)
	s.mu.Unlock()
	s.deliver(emit)
}

// record is a new record for call i, numbered and placed in its session.
func (s *session) record(i int, intended time.Duration) *Record {
	r := s.r
	c := &s.g.Calls[i]
	seq := s.seq
	if i > 0 {
		seq = r.seq.turn()
	}
	rec := r.newRecord(s.rn.epoch, c.Prompt, seq, intended)
	rec.Session, rec.Call, rec.After = s.g.ID, c.ID, s.g.AfterIDs(i)
	if rec.Call == "" {
		rec.Call = c.Prompt.Call
	}
	rec.Warmup = rec.Warmup || c.Warmup
	return rec
}

// skip records call i as not sent, with kind, and its dependents after
// it; with s.mu held.
func (s *session) skip(emit []*Record, i int, kind ErrorKind, why string, at time.Duration) []*Record {
	c := &s.calls[i]
	c.state, c.kind = callSkipped, kind
	rec := s.record(i, at)
	rec.ErrorKind, rec.Error = kind, why
	rec.Sent, rec.End, rec.NotSent = at, at, true
	rec.Finalize()
	if kind == ErrCutAtEnd {
		s.r.cut.Add(1)
	}
	s.fig.Add(rec)
	emit = append(emit, rec)
	return s.cascade(emit, i, at)
}

// cascade settles the calls that can no longer be sent because call from
// failed or was skipped: those with an edge from it not yet met.
func (s *session) cascade(emit []*Record, from int, at time.Duration) []*Record {
	for j := from + 1; j < len(s.calls); j++ {
		c := &s.calls[j]
		if c.state != callWaiting {
			continue
		}
		for _, e := range s.g.Calls[j].After {
			p := &s.calls[e.From]
			met := e.On == prompts.OnStart || (e.On == prompts.OnFirstToken && p.tokenSeen)
			broken := p.state == callSkipped || (p.state == callFailed && !met)
			if !broken {
				continue
			}
			kind, why := p.kind, ""
			switch {
			case kind.Counted():
				kind = ErrCancelledByDependency
				why = fmt.Sprintf("not sent: call %q it waits for failed (%s)", s.g.Calls[e.From].ID, p.kind)
			case kind == ErrCutAtEnd || kind == ErrNotDue:
				kind = ErrNotDue
				why = fmt.Sprintf("not sent: call %q it waits for was not answered before the end (%s)", s.g.Calls[e.From].ID, p.kind)
			case kind == ErrCancelledByDependency:
				why = fmt.Sprintf("not sent: call %q it waits for was cancelled by dependency", s.g.Calls[e.From].ID)
			default:
				why = fmt.Sprintf("not sent: call %q it waits for was not answered (%s)", s.g.Calls[e.From].ID, kind)
			}
			emit = s.skip(emit, j, kind, why, at)
			break
		}
	}
	return emit
}

// meet marks one edge of call j met at instant at (the predecessor's
// event plus the delay); with s.mu held.
func (s *session) meet(j int, e prompts.Edge, at time.Duration) {
	c := &s.calls[j]
	if c.state != callWaiting {
		return
	}
	c.due = max(c.due, at)
	if e.Tool {
		c.toolWait += e.Delay
	}
	if c.need--; c.need == 0 {
		c.state = callReady
	}
}

// edges calls f for every edge from call i, on event on.
func (s *session) edges(i int, on prompts.EdgeOn, f func(j int, e prompts.Edge)) {
	for j := i + 1; j < len(s.g.Calls); j++ {
		for _, e := range s.g.Calls[j].After {
			if e.From == i && e.On == on {
				f(j, e)
			}
		}
	}
}

// send sends call i on this goroutine: a slot first (open loop), then the
// request; its record settles its dependents.
func (s *session) send(i int) {
	r, rn := s.r, s.rn
	c := &s.calls[i]
	s.mu.Lock()
	due, toolWait := c.due, c.toolWait
	s.mu.Unlock()
	if s.slots != nil && !s.slot() {
		s.mu.Lock()
		var emit []*Record
		now := time.Since(rn.epoch)
		if rn.send.Err() != nil {
			emit = s.skip(emit, i, ErrCancelled, "cancelled: the run stopped before the call was sent", now)
		} else {
			emit = s.skip(emit, i, ErrDropped, "not started before the run ended: in-flight cap reached", due)
			s.r.drop.Add(1)
		}
		emit = s.release(emit)
		s.mu.Unlock()
		s.deliver(emit)
		return
	}
	rec := s.record(i, due)
	rec.ToolWait = toolWait
	p := s.g.Calls[i].Prompt
	r.sent.Add(1)
	// The start event: when the runner hands the call to the client.
	s.mu.Lock()
	sentAt := time.Since(rn.epoch)
	s.edges(i, prompts.OnStart, func(j int, e prompts.Edge) { s.meet(j, e, sentAt+e.Delay) })
	emit := s.release(nil)
	s.mu.Unlock()
	s.deliver(emit)

	s.edges(i, prompts.OnFirstToken, func(int, prompts.Edge) { rec.firstToken = s.onFirstToken(i) })
	r.do(rn, p, rec)
	rec.firstToken = nil
	if s.slots != nil {
		<-s.slots
	}
	s.finished(i, rec)
}

// onFirstToken is call i's first-token hook: it meets the edges that
// wait for it, at the token's arrival plus their delays.
func (s *session) onFirstToken(i int) func(time.Duration) {
	return func(at time.Duration) {
		s.mu.Lock()
		s.calls[i].tokenSeen = true
		s.edges(i, prompts.OnFirstToken, func(j int, e prompts.Edge) { s.meet(j, e, at+e.Delay) })
		emit := s.release(nil)
		s.mu.Unlock()
		s.deliver(emit)
	}
}

// slot takes an in-flight slot, waiting until the schedule's end; false
// when none came (or sending ended).
func (s *session) slot() bool {
	select {
	case s.slots <- struct{}{}:
		return true
	default:
	}
	rn := s.rn
	t := time.NewTimer(time.Until(rn.epoch.Add(rn.end)))
	defer t.Stop()
	select {
	case s.slots <- struct{}{}:
		return true
	case <-t.C:
	case <-rn.send.Done():
	}
	return false
}

// finished settles call i's answer: its end and first-token edges, or the
// cancellation of its dependents, then delivers.
func (s *session) finished(i int, rec *Record) {
	s.mu.Lock()
	c := &s.calls[i]
	s.fig.Add(rec)
	var emit []*Record
	emit = append(emit, rec)
	if rec.OK() {
		c.state = callDone
		end, first := rec.End, rec.FirstToken()
		s.edges(i, prompts.OnEnd, func(j int, e prompts.Edge) { s.meet(j, e, end+e.Delay) })
		var noToken []int
		s.edges(i, prompts.OnFirstToken, func(j int, e prompts.Edge) {
			switch {
			case c.tokenSeen:
			case rec.HasToken():
				s.meet(j, e, first+e.Delay)
			default:
				noToken = append(noToken, j)
			}
		})
		for _, j := range noToken {
			if s.calls[j].state == callWaiting {
				emit = s.skip(emit, j, ErrCancelledByDependency,
					fmt.Sprintf("not sent: call %q it waits for answered without a token", s.g.Calls[i].ID), end)
			}
		}
	} else {
		c.state, c.kind = callFailed, rec.ErrorKind
		emit = s.cascade(emit, i, rec.End)
	}
	emit = s.release(emit)
	s.mu.Unlock()
	s.deliver(emit)
}

// deliver hands records to the run's output in order, the session's last
// one carrying its figures; the session then ends.
func (s *session) deliver(recs []*Record) {
	if len(recs) == 0 {
		return
	}
	s.outMu.Lock()
	defer s.outMu.Unlock()
	for _, rec := range recs {
		s.delivered++
		last := s.delivered == len(s.calls)
		if last {
			s.mu.Lock()
			fig := s.fig
			s.mu.Unlock()
			rec.SessionDone, rec.SessionLast = &fig, true
		}
		s.rn.out <- rec
		if last {
			s.mu.Lock()
			if s.timer != nil {
				s.timer.Stop()
			}
			s.mu.Unlock()
			s.r.graphs.remove(s)
			close(s.done)
			s.rn.wg.Done()
		}
	}
}

// session starts an open-loop session due at at, once it is due.
func (d *dispatch) session(p *prompts.Prompt, seq int64, at time.Duration) error {
	if !d.wait.until(d.rn.send, d.rn.epoch.Add(at)) {
		return nil
	}
	s, err := d.r.startSession(d.rn, p, seq, at, d.slots)
	if s != nil {
		d.r.capped.Add(1)
	}
	return err
}

// session runs a closed-loop session tree on worker's goroutine until
// every call has its record; false when the worker should stop.
func (cw *closedWork) session(p *prompts.Prompt, seq int64) bool {
	s, err := cw.r.startSession(cw.rn, p, seq, time.Since(cw.rn.epoch), nil)
	if err != nil {
		cw.errOnce.Do(func() { cw.srcErr = err })
		return false
	}
	if s == nil {
		return false
	}
	<-s.done
	return true
}
