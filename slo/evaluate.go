package slo

import (
	"fmt"
	"math/big"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// Evaluation: an objective's running counts (judge.go) become its verdict.
// Queue delay is judged from server buckets (queuedelay.go), waivers are
// applied after (waiver.go), and verdict.go renders the result.

func newVerdict(o *Objective, stage string) Verdict {
	v := Verdict{Objective: o.Name, Stage: stage, Class: o.Class, Kind: o.Kind(), Metric: o.Metric}
	switch o.Kind() {
	case KindLatency:
		v.Op, v.Threshold, v.ThresholdText = "<=", ms(o.Threshold), o.Threshold.String()
		v.Target, v.TargetText = o.Target.Float(), o.Target.String()
	case KindRatio:
		v.Op, v.Threshold, v.ThresholdText = "<=", o.Limit.Float(), o.Limit.String()
	case KindFloor:
		v.Op, v.Threshold, v.ThresholdText = ">=", o.Limit.Float(), o.Limit.String()
	}
	return v
}

// verdict judges the objective from its counts; win is the stage's
// window, qd its queue-delay telemetry.
func (oj *objectiveJudge) verdict(stage string, win loadgen.Window, qd *promhist.Histogram) Verdict {
	o := oj.o
	v := newVerdict(o, stage)
	switch o.Kind() {
	case KindLatency:
		if o.Metric == QueueDelay {
			judgeQueueDelay(&v, o, qd, oj.conf)
			break
		}
		judgeLatency(&v, o, &oj.lat, oj.conf)
		v.CensoredMisses, v.Censored = oj.censoredMiss, oj.censoredBefore
		v.EmptyMisses = oj.emptyMiss
		v.LagMissed = oj.lagMissed
		if o.Metric == SessionDuration {
			oj.sessionNotes(&v)
			break
		}
		if v.Result == NoData && oj.censoredBefore == 0 {
			v.Note = oj.noSamples()
		} else if oj.metric != nil && oj.metric.Streamed && oj.unstreamed > 0 {
			addNote(&v, fmt.Sprintf("%d of %d successful responses came unstreamed (one body): they give no %s", oj.unstreamed, oj.ok, o.Metric))
		}
		censorNote(&v, o, oj.conf)
		if oj.emptyMiss > 0 {
			addNote(&v, fmt.Sprintf("%d answers with no output token, or more than max_tokens (%s, %s), counted as misses", oj.emptyMiss, loadgen.ErrEmptyAnswer, loadgen.ErrOverGeneration))
		}
	case KindRatio:
		v.Good, v.Total, v.LeftOut = oj.counted-oj.bad, oj.counted, oj.cut+oj.dropped+oj.cancelled+oj.out
		if o.perSession() {
			if oj.cut > 0 {
				v.Note = fmt.Sprintf("left out: %d sessions cut by the load generator (a call dropped, cut at the end or not due before the run ended)", oj.cut)
			}
			if oj.counted == 0 {
				addNote(&v, "no session ran its course in this stage")
				v.Result = NoData
				break
			}
			v.Measured = float64(oj.bad) / float64(oj.counted)
			applyConfidence(&v, o.Limit.Float(), oj.conf)
			break
		}
		if v.LeftOut > 0 {
			var parts []string
			if oj.cut > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", oj.cut, loadgen.ErrCutAtEnd))
			}
			if oj.dropped > 0 {
				parts = append(parts, fmt.Sprintf("%d %s", oj.dropped, loadgen.ErrDropped))
			}
			if oj.cancelled > 0 {
				parts = append(parts, fmt.Sprintf("%d %s by the run", oj.cancelled, loadgen.ErrCancelled))
			}
			if len(parts) > 0 {
				v.Note = "left out: " + strings.Join(parts, ", ") + " (the load generator's, not failures of the server)"
			}
			if oj.out > 0 {
				addNote(&v, fmt.Sprintf("left out: %d requests %s does not count", oj.out, o.Metric))
			}
		}
		if oj.counted == 0 {
			addNote(&v, "no requests in this stage")
			v.Result = NoData
			break
		}
		v.Measured = float64(oj.bad) / float64(oj.counted)
		applyConfidence(&v, o.Limit.Float(), oj.conf)
	case KindFloor:
		goodput := oj.rate != nil && oj.rate.Goodput
		if goodput {
			v.Note = "good: " + oj.cons.String()
			if oj.unjudged > 0 && oj.work == 0 {
				// No stream, no TPOT: the rule cannot be judged, which is
				// not a rate of 0 good requests per second.
				v.Result = NoData
				v.Note = fmt.Sprintf("goodput needs the tpot ≤ %s limit judged, and no TPOT exists without a stream: %d successful answers came as one body (good: %s)",
					oj.cons.TPOT, oj.unjudged, oj.cons.String())
				break
			}
			if oj.unjudged > 0 {
				v.Note += fmt.Sprintf("; %d answers came as one body and could not be judged against the tpot limit (not counted)", oj.unjudged)
			}
		}
		v.Good = oj.work
		w := win.Duration()
		if w <= 0 {
			v.Result, v.Note = NoData, "no measured window: no request was sent in this stage"
			break
		}
		v.WindowS = w.Seconds()
		if o.ShareOfOffered {
			v.ShareOfOffered, v.Offered = true, oj.offered
			if oj.offered == 0 {
				v.Result, v.Note = NoData, "no request was offered in this stage"
				break
			}
			v.Total = oj.offered
			v.Measured = float64(oj.work) / float64(oj.offered)
			v.Result = Fail
			if o.Limit.CmpRatio(oj.work, oj.offered) >= 0 {
				v.Result = Pass
			}
			addNote(&v, fmt.Sprintf("%d of %d offered requests %s", oj.work, oj.offered, map[bool]string{true: "good", false: "completed"}[goodput]))
			break
		}
		v.Measured = measure.PerSecond(oj.work, w)
		v.Result = Fail
		if rateAtLeast(oj.work, w, o.Limit) {
			v.Result = Pass
		}
	}
	return v
}

// censorNote says what censored requests did to a latency verdict: those
// cut after the threshold are misses; those cut before it are unknown, and
// when counting them either way could change a PASS or a FAIL the sample
// does not decide it: INCONCLUSIVE.
func censorNote(v *Verdict, o *Objective, conf float64) {
	if v.CensoredMisses > 0 {
		addNote(v, fmt.Sprintf("%d requests cut at the end, timed out or cancelled after %s counted as misses (right-censored)", v.CensoredMisses, o.Threshold))
	}
	if v.Censored == 0 {
		return
	}
	msg := fmt.Sprintf("%d requests cut at the end, timed out or cancelled before %s are not counted: their %s is unknown", v.Censored, o.Threshold, o.Metric)
	p0, _ := o.ErrorBudget()
	misses := v.Total - v.Good
	switch v.Result {
	case Pass:
		if s, _ := Decide(misses+v.Censored, v.Total+v.Censored, p0, conf); s != Pass {
			v.Result = Inconclusive
			msg += "; had they missed, the objective would not pass: this sample does not decide it"
		}
	case Fail:
		if s, _ := Decide(misses, v.Total+v.Censored, p0, conf); s != Fail {
			v.Result = Inconclusive
			msg += "; had they met it, the objective would not fail: this sample does not decide it"
		}
	case NoData:
		msg += "; nothing else to judge"
	}
	addNote(v, msg)
}

// sessionNotes says what a session_duration verdict left out and why:
// failed sessions (session_success judges them), sessions cut by the
// generator before or after the threshold.
func (oj *objectiveJudge) sessionNotes(v *Verdict) {
	o := oj.o
	if oj.bad > 0 {
		addNote(v, fmt.Sprintf("%d failed sessions are not timed (session_success judges them)", oj.bad))
	}
	if oj.cut > 0 {
		addNote(v, fmt.Sprintf("%d sessions had no call sent", oj.cut))
	}
	if v.CensoredMisses > 0 {
		addNote(v, fmt.Sprintf("%d sessions cut by the load generator after %s counted as misses (right-censored)", v.CensoredMisses, o.Threshold))
	}
	if v.Result == NoData && v.Censored == 0 {
		addNote(v, "no session ran its course in this stage")
	}
	if v.Censored == 0 {
		return
	}
	msg := fmt.Sprintf("%d sessions cut by the load generator before %s are not counted: their duration is unknown", v.Censored, o.Threshold)
	p0, _ := o.ErrorBudget()
	misses := v.Total - v.Good
	switch v.Result {
	case Pass:
		if s, _ := Decide(misses+v.Censored, v.Total+v.Censored, p0, oj.conf); s != Pass {
			v.Result = Inconclusive
			msg += "; had they missed, the objective would not pass: this sample does not decide it"
		}
	case Fail:
		if s, _ := Decide(misses, v.Total+v.Censored, p0, oj.conf); s != Fail {
			v.Result = Inconclusive
			msg += "; had they met it, the objective would not fail: this sample does not decide it"
		}
	}
	addNote(v, msg)
}

// noSamples says why a latency objective had nothing to measure.
func (oj *objectiveJudge) noSamples() string {
	if oj.metric == nil {
		return "no events to measure"
	}
	if oj.metric.Streamed && oj.ok > 0 && oj.unstreamed == oj.ok {
		return fmt.Sprintf("no streamed responses: %s needs a stream (all %d successful responses came as one body)",
			strings.ToUpper(string(oj.o.Metric)), oj.ok)
	}
	if oj.metric.Per != measure.PerRequest && oj.ok > 0 && oj.compact == oj.ok {
		return fmt.Sprintf("the records are compact (--records compact): they keep no chunk instants, so no %s; re-judge a run kept with --records full",
			strings.ToUpper(string(oj.o.Metric)))
	}
	return "no " + oj.metric.Events + " to measure"
}

func hasKind(kinds []loadgen.ErrorKind, k loadgen.ErrorKind) bool {
	for _, x := range kinds {
		if x == k {
			return true
		}
	}
	return false
}

// rateAtLeast reports count / w ≥ limit per second, exactly:
// count · 10⁹ · 10^scale ≥ num · w(ns).
func rateAtLeast(count uint64, w time.Duration, limit Decimal) bool {
	l := new(big.Int).SetUint64(count)
	l.Mul(l, big.NewInt(int64(time.Second)))
	l.Mul(l, new(big.Int).SetUint64(pow10[limit.Scale]))
	r := new(big.Int).SetUint64(limit.Num)
	r.Mul(r, big.NewInt(int64(w)))
	return l.Cmp(r) >= 0
}

// judgeLatency judges exact counts; the quantile comes from the histogram,
// held on the side of the threshold the counts decide: when they pass, an
// HDR bucket straddling the threshold reports the threshold, a value of
// that bucket.
func judgeLatency(v *Verdict, o *Objective, c *latencyCount, conf float64) {
	v.Good, v.Total = c.good, c.total
	if c.total == 0 {
		v.Result = NoData
		return
	}
	v.Measured = float64(c.good) / float64(c.total)
	pass := o.Target.CmpRatio(c.good, c.total) >= 0
	if q, ok := rankValue(c.hist, max(o.Target.CeilMul(c.total), 1)); ok {
		if pass && q > o.Threshold {
			q = o.Threshold
		}
		f := ms(q)
		v.QuantileMs, v.QuantileFrom = &f, QuantileFromHDR
	}
	p0, _ := o.ErrorBudget()
	applyConfidence(v, p0, conf)
}

// rankValue is the highest value equivalent to the rank-th smallest
// recorded value (nearest rank, 1-based).
func rankValue(h *hdrhistogram.Histogram, rank uint64) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	var cum uint64
	for _, b := range h.Distribution() {
		cum += uint64(b.Count)
		if b.Count > 0 && cum >= rank {
			return time.Duration(b.To) * time.Microsecond, true
		}
	}
	return 0, false
}

func addNote(v *Verdict, s string) {
	if v.Note == "" {
		v.Note = s
	} else {
		v.Note += "; " + s
	}
}
