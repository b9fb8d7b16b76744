package slo

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// Queue delay is the time requests waited in the server's queue before
// their prefill, which the client cannot see. It is judged on the stage's
// increase of a cumulative server histogram (vLLM
// vllm:request_queue_time_seconds, SGLang sglang:queue_time_seconds, TGI
// tgi_request_queue_duration) with a final +Inf bucket: Input.QueueDelay.
// Without buckets (none given, or the server's mean only) queue_delay
// objectives are NO_DATA, with the histogram's Missing as the reason when
// set ("llama.cpp exposes no queue-time histogram").
//
// A threshold on a bucket bound is judged exactly. A threshold inside a
// bucket is judged exactly when the bucket's two bounds agree (the target
// is met even counting none of the bucket, or missed even counting all of
// it); otherwise the bucket's count is interpolated linearly to the
// threshold, as Prometheus' histogram_quantile does, and the verdict's note
// says it is an estimate.

// Where a verdict's quantile came from (Verdict.QuantileFrom).
const (
	QuantileFromHDR     = "hdr"     // an HDR histogram of the samples: µs, 3 significant digits
	QuantileFromBuckets = "buckets" // a server histogram's buckets
)

// infBound is the bound of the +Inf bucket as a Duration: above every
// finite bound.
const infBound = time.Duration(math.MaxInt64)

// bucketBound is a bucket bound in seconds as a Duration (nanoseconds,
// rounded), so thresholds compare exactly: infBound for +Inf.
func bucketBound(seconds float64) time.Duration {
	if math.IsInf(seconds, 1) || seconds*float64(time.Second) >= float64(math.MaxInt64) {
		return infBound
	}
	return time.Duration(math.Round(seconds * float64(time.Second)))
}

func judgeQueueDelay(v *Verdict, o *Objective, qd *promhist.Histogram, conf float64) {
	if qd == nil || qd.MeanOnly() {
		v.Result = NoData
		v.Note = "no server queue-delay telemetry for this stage"
		if qd != nil && qd.Missing != "" {
			v.Note += ": " + qd.Missing
		}
		return
	}
	v.Source = qd.Source
	h := qd.Clone()
	slices.SortFunc(h.Buckets, func(a, b promhist.Bucket) int { return cmp.Compare(a.LeSeconds, b.LeSeconds) })
	b := h.Buckets
	if !math.IsInf(b[len(b)-1].LeSeconds, 1) {
		v.Result = NoData
		v.Note = "queue-delay histogram has no +Inf bucket: events above its last bound are unseen"
		return
	}
	total := b[len(b)-1].Count
	if total == 0 {
		v.Result, v.Note = NoData, "queue-delay histogram is empty for this stage"
		return
	}
	v.Total = total
	// The bucket holding the threshold: (lo, hi] with counts cLo ≤ cHi.
	var lo time.Duration
	var cLo uint64
	hi, cHi := infBound, total
	below := true // the threshold is below the first bound
	for _, x := range b {
		le := bucketBound(x.LeSeconds)
		if le <= o.Threshold {
			lo, cLo, below = le, x.Count, false
			continue
		}
		hi, cHi = le, x.Count
		break
	}
	undecided := o.Target.CmpRatio(cLo, total) < 0 && o.Target.CmpRatio(cHi, total) >= 0
	switch {
	case below && undecided && hi != infBound:
		// Inside the first bucket the buckets say nothing: with no
		// queueing at all every event is there, and interpolating from 0
		// would invent a spread.
		v.Result = NoData
		v.Note = fmt.Sprintf("cannot judge below the first bucket: threshold %s is below the server histogram's first bound %s; "+
			"%d of %d events were ≤ %s, and the buckets do not say how many of them were ≤ %s (set the threshold at %s or above, or judge queue delay from the client)",
			o.Threshold, hi, cHi, total, hi, o.Threshold, hi)
		return
	case lo == o.Threshold:
		v.Good = cLo // on a bound: exact
	case o.Target.CmpRatio(cLo, total) >= 0 || o.Target.CmpRatio(cHi, total) < 0 || hi == infBound:
		// The bounds agree (or there is no finite bound to interpolate to:
		// count none of the bucket, conservatively).
		v.Good = cLo
		if o.Target.CmpRatio(cHi, total) < 0 && hi != infBound {
			v.Good = cHi
		}
		v.Note = fmt.Sprintf("from histogram buckets: threshold %s is inside the %s bucket, so %d to %d of %d events met it: the verdict is the same at either end",
			o.Threshold, bucketText(lo, hi), cLo, cHi, total)
		if hi == infBound {
			v.Note = fmt.Sprintf("from histogram buckets: threshold %s is above the last finite bound %s; counted at that bound (conservative)", o.Threshold, lo)
		}
	default:
		// Linear interpolation within (lo, hi], as histogram_quantile does.
		frac := float64(o.Threshold-lo) / float64(hi-lo)
		v.Good = cLo + uint64(float64(cHi-cLo)*frac)
		v.Note = fmt.Sprintf("estimated from histogram buckets: threshold %s is inside the %s bucket, so %d to %d of %d events met it; %d interpolated linearly within the bucket, as Prometheus histogram_quantile does",
			o.Threshold, bucketText(lo, hi), cLo, cHi, total, v.Good)
	}
	v.Measured = float64(v.Good) / float64(total)
	// The quantile is the bucket holding the target's rank (nearest rank),
	// not an interpolated value: the judge reports only what the buckets say.
	if e, ok := h.AtRank(float64(max(o.Target.CeilMul(total), 1))); ok {
		low := 0.0 // a first bucket at or below 0 still starts the range at 0
		if !math.IsInf(e.Lower, -1) {
			low = ms(bucketBound(e.Lower))
		}
		v.QuantileLowMs, v.QuantileFrom = &low, QuantileFromBuckets
		if !math.IsInf(e.Upper, 1) {
			q := ms(bucketBound(e.Upper))
			v.QuantileMs = &q
		}
	}
	p0, _ := o.ErrorBudget()
	applyConfidence(v, p0, conf)
}

func bucketText(lo, hi time.Duration) string {
	return "(" + lo.String() + ", " + hi.String() + "]"
}
