package loadgen

import (
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Sessions (multi-turn conversations): a prompt with a FollowUp makes its
// next turn from the answer, due the turn's Think after that answer
// ended. Open loop: the turn is due then, measured from then, and shares
// the in-flight cap; it is not sent if it would fall after the
// schedule's end. Closed loop: the worker that sent the turn before waits
// the think time and sends it itself.

// nextTurn is the turn that follows p, answered in rec (nil: none, or
// the answer failed).
func nextTurn(p *prompts.Prompt, rec *Record) *prompts.Prompt {
	if p.FollowUp == nil || !rec.OK() {
		return nil
	}
	return p.FollowUp(rec.Text)
}

// followUp is an open-loop session turn's done func: it frees the turn's
// slot and schedules the next turn, due Think after rec ended.
func (r *Runner) followUp(rn *run, slots chan struct{}, prev *prompts.Prompt, rec *Record) {
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
		nrec := r.newRecord(rn.epoch, next, r.seq.turn(), due)
		// Sent by the goroutine that waited for it, as the open loop's.
		r.sent.Add(1)
		r.capped.Add(1)
		rn.wg.Add(1)
		r.request(rn, nrec, next, func(x *Record) { r.followUp(rn, slots, next, x) })
	}()
}

// closedNext is a closed-loop worker's next prompt: pending, the
// session's next turn, after its think time, or else a new prompt this
// shard owns from the source. A nil prompt and error: the run was
// interrupted or stopped during the think time.
func (r *Runner) closedNext(rn *run, pending *prompts.Prompt) (*prompts.Prompt, int64, error) {
	if pending == nil {
		return r.seq.drawOwned()
	}
	seq := r.seq.turn()
	if pending.Think > 0 && !sleep(rn.send, pending.Think, nil) {
		return nil, 0, nil
	}
	return pending, seq, nil
}
