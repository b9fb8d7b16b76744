package slo

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Per-record SLI events: what one record is to one objective. The Judge
// counts verdicts with these rules and the operate phase (tailgate canary,
// the Prometheus counters tailgate_slo_events_total) counts good and bad
// events with them, so acceptance and monitoring share one definition and
// every SLO is a ratio of two counters.
//
// How each objective kind becomes events:
//
//   - latency objectives on a metric-table row (ttft, ttfat, tpot, e2e,
//     schedule_lag: one event per successful request that has the metric;
//     icl one per chunk gap; itl one per output token after the first): an
//     event is good when its value is ≤ threshold.
//   - error_rate: one event per counted request (dropped and cut_at_end are
//     left out unless the objective names them), bad when it failed with a
//     kind the objective counts; any other ratio counted per record: one
//     event per record its row counts, bad as its row says (RateMetric.Bad).
//   - session_duration and session_success: one event per session, from
//     its records rolled up (judge.go's addSession): none per record.
//   - floors (output_tokens_per_s, input_tokens_per_s, requests_per_s,
//     goodput_per_s) are rates over a window of load, and queue_delay comes
//     from the server's histogram, not from records: neither gives
//     per-record events (HasRecordEvents is false).

// Events are the SLI events one record gives one objective.
type Events struct{ Good, Bad uint64 }

// Total is Good + Bad.
func (e Events) Total() uint64 { return e.Good + e.Bad }

// HasRecordEvents reports whether o's events come from records one at a
// time: latency objectives on a metric-table row and error_rate. Floors
// and queue_delay do not (see the package's events rules above).
func (o *Objective) HasRecordEvents() bool {
	switch o.Kind() {
	case KindLatency:
		return o.latency() != nil
	case KindRatio:
		return !o.perSession()
	}
	return false
}

// meets reports whether a latency value meets the objective: a value
// exactly at the threshold meets it.
func (o *Objective) meets(v time.Duration) bool { return v <= o.Threshold }

// ratioClass is what a record is to an error_rate objective.
type ratioClass int

const (
	ratioCut       ratioClass = iota // cut_at_end, not named: left out
	ratioDropped                     // dropped, not named: left out
	ratioCancelled                   // cancelled by the run itself, not named: left out
	ratioGood
	ratioBad
	ratioOut // not counted by the row's own rule (RateMetric.Bad)
)

func (o *Objective) ratioEvent(r *loadgen.Record) ratioClass {
	if rate := o.rateRow(); rate != nil && rate.Bad != nil && !rate.ErrorKinds {
		// A ratio row that classes records itself: one definition for the
		// verdict, summary.json and the counters.
		switch counted, bad := rate.Bad(r); {
		case !counted:
			return ratioOut
		case bad:
			return ratioBad
		}
		return ratioGood
	}
	named := len(o.ErrorKinds) > 0 && hasKind(o.ErrorKinds, r.ErrorKind)
	switch {
	case r.ErrorKind == loadgen.ErrCutAtEnd && !named:
		return ratioCut
	case r.ErrorKind == loadgen.ErrDropped && !named:
		return ratioDropped
	case r.ErrorKind == loadgen.ErrCancelled && !named:
		return ratioCancelled
	case (r.ErrorKind == loadgen.ErrNotDue || r.ErrorKind == loadgen.ErrCancelledByDependency) && !named:
		// Never sent: the failure that cancelled it is counted once, on
		// the call it waited for.
		return ratioCancelled
	case !r.OK() && (len(o.ErrorKinds) == 0 || named):
		return ratioBad
	}
	return ratioGood
}

// applies reports whether r is judged by o at all: not warm-up, of o's
// class when o names one, and of o's turn when o selects one.
func (o *Objective) applies(r *loadgen.Record) bool {
	if r.Warmup || (o.Class != "" && o.Class != r.Class) {
		return false
	}
	switch o.Turn {
	case TurnFirst:
		return r.Session != "" && r.Turn == 0
	case TurnLater:
		return r.Session != "" && r.Turn > 0
	}
	return true
}

// Events is what r counts for o by acceptance's rules, exactly as the
// Judge counts it: latency objectives count successful requests only
// (failures are error_rate's business).
func (o *Objective) Events(r *loadgen.Record) Events {
	var e Events
	if !o.applies(r) || !o.HasRecordEvents() {
		return e
	}
	switch o.Kind() {
	case KindLatency:
		m := o.latency()
		if m == nil {
			return e
		}
		if !r.OK() {
			switch c, v := o.censor(r); {
			case c == answeredEmpty, c == censoredMiss, c == censoredSeen && !o.meets(v):
				e.Bad = 1
			case c == censoredSeen:
				e.Good = 1
			}
			return e
		}
		for s := m.Samples(r); s.Next(); {
			if o.meets(s.Value()) {
				e.Good += uint64(s.Weight())
			} else {
				e.Bad += uint64(s.Weight())
			}
		}
	case KindRatio:
		switch o.ratioEvent(r) {
		case ratioGood:
			e.Good = 1
		case ratioBad:
			e.Bad = 1
		}
	}
	return e
}

// OperateEvents is what r counts for o in the operate phase (a canary).
// It differs from Events in two ways, both because a canary probes a live
// service at a low rate, where a probe that failed is a user who got no
// answer in time:
//
//   - a failed request (one error_rate would count: not dropped or cut at
//     the end) is one bad event for every latency objective too, so a down
//     or hanging target burns the latency budgets as well as the error
//     budget (itl counts it as one bad token: how many it would have
//     streamed is unknown);
//   - a request cancelled by the canary itself (reload, shutdown) is no
//     measurement and counts nowhere.
func (o *Objective) OperateEvents(r *loadgen.Record) Events {
	if r.ErrorKind == loadgen.ErrCancelled || !o.applies(r) {
		return Events{}
	}
	if o.Kind() == KindLatency && !r.OK() {
		if o.latency() == nil || o.ratioEvent(r) != ratioBad {
			return Events{}
		}
		return Events{Bad: 1}
	}
	return o.Events(r)
}

// censorClass is what a request that never finished is to a latency
// objective measured from the intended start.
type censorClass int

const (
	notCensored    censorClass = iota // finished, failed by the server, or a metric not from the intended start
	censoredSeen                      // cut after the metric's instant: its value is known
	censoredMiss                      // cut after the threshold had passed: a known miss
	censoredBefore                    // cut before the threshold: its value is unknown
	answeredEmpty                     // an answer with no token (or too many): a miss for every latency objective
)

// censor classes r for o. A request cut at the end (cut_at_end), timed
// out or cancelled by the run is right-censored: its TTFT, TTFAT or E2E is
// at least the time from its intended start to when it was cut. Once that
// is past the threshold it is a known miss, not a silent exclusion (the
// requests cut are the slowest); before it, the request is counted apart
// and said. Metrics not measured from the intended start (ICL, ITL, TPOT)
// are not censored this way.
//
// A TTFT or TTFAT that arrived before the cut is known (censoredSeen, with
// its value): it counts like any other sample.
//
// An answer that carried no token (empty_answer) or more than were asked
// for (over_generation) came back in time but not as an answer: it is a
// miss for every latency objective of the server's answer, whatever the
// metric, so a server cannot meet a TTFT objective by answering nothing.
// Schedule lag is the generator's, not the answer's: it is not judged.
func (o *Objective) censor(r *loadgen.Record) (censorClass, time.Duration) {
	switch r.ErrorKind {
	case loadgen.ErrEmptyAnswer, loadgen.ErrOverGeneration:
		if o.Metric == ScheduleLag {
			return notCensored, 0
		}
		return answeredEmpty, 0
	case loadgen.ErrCutAtEnd, loadgen.ErrTimeout, loadgen.ErrCancelled:
	default:
		return notCensored, 0
	}
	switch o.Metric {
	case TTFT, TTFAT, E2E:
	default:
		return notCensored, 0
	}
	// The record's own accessors: the metric table's values, which (unlike
	// its samples) a failed record has too.
	if o.Metric == TTFT {
		if d, ok := r.TTFT(); ok {
			return censoredSeen, d
		}
	}
	if o.Metric == TTFAT {
		if d, ok := r.TTFAT(); ok {
			return censoredSeen, d
		}
	}
	if v := censoredElapsed(r); v > o.Threshold {
		return censoredMiss, v
	}
	return censoredBefore, 0
}

// censoredElapsed is how long a censored request had run, from its
// intended start to when it was cut.
func censoredElapsed(r *loadgen.Record) time.Duration { return r.E2E() }
