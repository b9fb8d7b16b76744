package slo

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Status is a verdict's outcome.
type Status string

const (
	Pass    Status = "PASS"
	Fail    Status = "FAIL"
	Waived  Status = "WAIVED"  // a FAIL or NO_DATA that an unexpired waiver covers
	NoData  Status = "NO_DATA" // nothing to measure: the run is invalid
	Pending Status = "PENDING" // a manual stage nobody has recorded yet
	// Inconclusive (confidence.go): the sample does not decide the objective.
)

// Verdict is one objective judged on one stage.
type Verdict struct {
	Objective string `json:"objective"`
	Stage     string `json:"stage"`
	Class     string `json:"class,omitempty"`
	Kind      Kind   `json:"kind"`
	Metric    Metric `json:"metric"`
	// Op is how Measured is held against Threshold: "<=" (latency values,
	// ratios) or ">=" (floors, and a latency's fraction against Target).
	Op string `json:"op"`
	// Threshold is in milliseconds (latency), a fraction (ratio) or per
	// second (floor); ThresholdText is as the file wrote it.
	Threshold     float64 `json:"threshold"`
	ThresholdText string  `json:"threshold_text"`
	// Target is the fraction of events that must meet the threshold
	// (latency only).
	Target     float64 `json:"target,omitempty"`
	TargetText string  `json:"target_text,omitempty"`
	// Measured is the fraction of events meeting the threshold (latency),
	// the failed fraction (ratio) or the rate per second (floor).
	Measured float64 `json:"measured"`
	// QuantileMs is the latency at the target quantile (nearest rank), as
	// QuantileFrom says: from the records, an HDR histogram's value (3
	// significant digits) on the side of the threshold that the exact
	// counts decide, so it is ≤ Threshold exactly when the objective
	// passes. From server histogram buckets it is the bound of the bucket
	// holding the quantile (nil: the +Inf bucket).
	QuantileMs *float64 `json:"quantile_ms,omitempty"`
	// QuantileLowMs is set when the quantile is known only to a server
	// histogram bucket: it lies in (QuantileLowMs, QuantileMs]; 0 means
	// the first bucket.
	QuantileLowMs *float64 `json:"quantile_low_ms,omitempty"`
	QuantileFrom  string   `json:"quantile_from,omitempty"`
	// Good and Total count events: latency, events meeting the threshold of
	// all events; ratio, requests that did not fail of all requests; floor,
	// Good is the count (requests or tokens) over WindowS seconds.
	Good  uint64 `json:"good"`
	Total uint64 `json:"total"`
	// LeftOut counts requests an error-rate objective left out of Total:
	// cut at the end of the grace period (cut_at_end) or never sent
	// (dropped), neither a failure of the server; the note says which.
	LeftOut uint64  `json:"left_out,omitempty"`
	WindowS float64 `json:"window_s,omitempty"`
	// CensoredMisses counts requests cut at the end, timed out or
	// cancelled by the run after a latency threshold had passed: known
	// misses, in Total and not in Good. Censored counts those cut before
	// it: their value is unknown, so they are in neither, and the note says
	// whether they could change the verdict (latency only).
	CensoredMisses uint64 `json:"censored_misses,omitempty"`
	Censored       uint64 `json:"censored,omitempty"`
	// Confidence is the confidence the verdict was decided at (latency and
	// ratio objectives); NeedRequests, on an INCONCLUSIVE verdict, how many
	// events would decide it if the observed miss rate held (0: none would).
	Confidence   float64 `json:"confidence,omitempty"`
	NeedRequests uint64  `json:"need_requests,omitempty"`
	// LagMissed counts events that missed a latency threshold only by the
	// load generator's schedule lag (value > threshold ≥ value − lag); see
	// lagflip.go.
	LagMissed uint64 `json:"lag_missed,omitempty"`
	// Result is the outcome before waivers; Status after them.
	Result Status `json:"result"`
	Status Status `json:"status"`
	// Waiver is the waiver that applied, or the expired one that matched.
	Waiver        *Waiver `json:"waiver,omitempty"`
	WaiverExpired bool    `json:"waiver_expired,omitempty"`
	// Source says where the measurement came from when not the records
	// (queue_delay telemetry), or who recorded a manual result.
	Source string `json:"source,omitempty"`
	Note   string `json:"note,omitempty"`
}

// Window is a measured interval, as offsets from the run's start.
type Window struct {
	Start, End time.Duration
}

// Duration is End − Start.
func (w Window) Duration() time.Duration { return w.End - w.Start }

// QueueTelemetry is server-side queue-delay telemetry for one stage: the time
// requests waited in the server's queue before their prefill, which the
// client cannot see. Give per-request Samples when the server reports them
// per request, or else Buckets: the increase over the stage of a cumulative
// server histogram (vLLM vllm:request_queue_time_seconds, SGLang
// sglang:queue_time_seconds, TGI tgi_request_queue_duration), with a final
// +Inf bucket. Without either, queue_delay objectives are NO_DATA, with
// Missing as the reason when set ("llama.cpp exposes no queue-time
// histogram").
//
// With buckets, a threshold on a bucket bound is judged exactly. A
// threshold inside a bucket is judged exactly when the bucket's two bounds
// agree (the target is met even counting none of the bucket, or missed
// even counting all of it); otherwise the bucket's count is interpolated
// linearly to the threshold, as Prometheus' histogram_quantile does, and
// the verdict's note says it is an estimate.
type QueueTelemetry struct {
	Source  string          `json:"source"`
	Samples []time.Duration `json:"-"`
	Buckets []Bucket        `json:"-"`
	// Missing says why there is no telemetry, when there is none.
	Missing string `json:"missing,omitempty"`
}

// Bucket is one cumulative histogram bucket: Count events ≤ Le. Le is
// InfBound for the +Inf bucket.
type Bucket struct {
	Le    time.Duration
	Count uint64
}

// InfBound is the bound of the +Inf bucket (Prometheus le="+Inf",
// math.Inf(1) seconds): the largest Duration, above every finite bound.
const InfBound = time.Duration(math.MaxInt64)

// IsInf reports whether b is the +Inf bucket.
func (b Bucket) IsInf() bool { return b.Le == InfBound }

// BucketBound is the Duration of a Prometheus bucket bound in seconds:
// InfBound for math.Inf(1).
func BucketBound(seconds float64) time.Duration {
	if math.IsInf(seconds, 1) || seconds*float64(time.Second) >= float64(math.MaxInt64) {
		return InfBound
	}
	return time.Duration(math.Round(seconds * float64(time.Second)))
}

// Where a verdict's quantile came from (Verdict.QuantileFrom).
const (
	QuantileFromHDR     = "hdr"     // an HDR histogram of the samples: µs, 3 significant digits
	QuantileFromBuckets = "buckets" // a server histogram's buckets
)

// Options are Evaluate's inputs besides the spec and the records.
type Options struct {
	// Now is when waivers are judged (their expiry).
	Now time.Time
	// Window overrides the measured window of floor objectives.
	Window Window
	// QueueDelay is the stage's server queue-delay telemetry, if any.
	QueueDelay *QueueTelemetry
	// Only limits evaluation to these objectives (nil: all).
	Only []string
	// Waivers are considered after the spec's own (e.g. the plan's).
	Waivers []Waiver
}

// Evaluate judges every objective of spec (or opt.Only) on the records of
// stage (records whose Stage equals it; a run without stages has stage ""),
// from exact counts over the records (see Judge).
func Evaluate(spec *Spec, stage string, records []loadgen.Record, opt Options) []Verdict {
	j := NewJudge(nil, spec)
	for i := range records {
		if records[i].Stage == stage {
			j.Add(&records[i])
		}
	}
	s := j.stages[stage]
	if s == nil {
		s = j.newStage(stage, nil)
	}
	return j.evaluate(s, opt)
}

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
func (oj *objectiveJudge) verdict(stage string, win Window, qd *QueueTelemetry) Verdict {
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
		v.LagMissed = oj.lagMissed
		if v.Result == NoData && oj.censoredBefore == 0 {
			v.Note = oj.noSamples()
		} else if oj.metric != nil && oj.metric.Streamed && oj.unstreamed > 0 {
			addNote(&v, fmt.Sprintf("%d of %d successful responses came unstreamed (one body): they give no %s", oj.unstreamed, oj.ok, o.Metric))
		}
		censorNote(&v, o, oj.conf)
	case KindRatio:
		v.Good, v.Total, v.LeftOut = oj.counted-oj.bad, oj.counted, oj.cut+oj.dropped+oj.cancelled
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
			v.Note = "left out: " + strings.Join(parts, ", ") + " (the load generator's, not failures of the server)"
		}
		if oj.counted == 0 {
			addNote(&v, "no requests in this stage")
			v.Result = NoData
			break
		}
		v.Measured = float64(oj.bad) / float64(oj.counted)
		applyConfidence(&v, o.Limit.Float(), oj.conf)
	case KindFloor:
		if o.Metric == GoodputPerS {
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
		v.Measured = float64(oj.work) / w.Seconds()
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

// noSamples says why a latency objective had nothing to measure.
func (oj *objectiveJudge) noSamples() string {
	if oj.metric == nil {
		return "no events to measure"
	}
	if oj.metric.Streamed && oj.ok > 0 && oj.unstreamed == oj.ok {
		return fmt.Sprintf("no streamed responses: %s needs a stream (all %d successful responses came as one body)",
			strings.ToUpper(string(oj.o.Metric)), oj.ok)
	}
	if oj.metric.Per != loadgen.PerRequest && oj.ok > 0 && oj.compact == oj.ok {
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

func judgeQueueDelay(v *Verdict, o *Objective, qd *QueueTelemetry, conf float64) {
	if qd == nil || len(qd.Samples) == 0 && len(qd.Buckets) == 0 {
		v.Result = NoData
		v.Note = "no server queue-delay telemetry for this stage"
		if qd != nil && qd.Missing != "" {
			v.Note += ": " + qd.Missing
		}
		return
	}
	v.Source = qd.Source
	if len(qd.Samples) > 0 {
		var c latencyCount
		for _, d := range qd.Samples {
			c.add(trunc(d), o.meets(trunc(d)), 1)
		}
		judgeLatency(v, o, &c, conf)
		if v.Result == NoData {
			v.Note = "no queue-delay samples"
		}
		return
	}
	b := append([]Bucket(nil), qd.Buckets...)
	sort.Slice(b, func(i, j int) bool { return b[i].Le < b[j].Le })
	if !b[len(b)-1].IsInf() {
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
	hi, cHi := b[len(b)-1].Le, total
	below := true // the threshold is below the first bound
	for _, x := range b {
		if x.Le <= o.Threshold {
			lo, cLo, below = x.Le, x.Count, false
			continue
		}
		hi, cHi = x.Le, x.Count
		break
	}
	undecided := o.Target.CmpRatio(cLo, total) < 0 && o.Target.CmpRatio(cHi, total) >= 0
	switch {
	case below && undecided && hi != InfBound:
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
	case o.Target.CmpRatio(cLo, total) >= 0 || o.Target.CmpRatio(cHi, total) < 0 || hi == InfBound:
		// The bounds agree (or there is no finite bound to interpolate to:
		// count none of the bucket, conservatively).
		v.Good = cLo
		if o.Target.CmpRatio(cHi, total) < 0 && hi != InfBound {
			v.Good = cHi
		}
		v.Note = fmt.Sprintf("from histogram buckets: threshold %s is inside the %s bucket, so %d to %d of %d events met it: the verdict is the same at either end",
			o.Threshold, bucketText(lo, hi), cLo, cHi, total)
		if hi == InfBound {
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
	rank := max(o.Target.CeilMul(total), 1)
	var prev time.Duration
	for _, x := range b {
		if x.Count >= rank {
			low := ms(prev)
			v.QuantileLowMs, v.QuantileFrom = &low, QuantileFromBuckets
			if !x.IsInf() {
				q := ms(x.Le)
				v.QuantileMs = &q
			}
			break
		}
		prev = x.Le
	}
	p0, _ := o.ErrorBudget()
	applyConfidence(v, p0, conf)
}

func bucketText(lo, hi time.Duration) string {
	return "(" + lo.String() + ", " + hi.String() + "]"
}

// applyWaivers sets Status from Result and the first matching unexpired
// waiver; an expired one that matches is reported and does not waive.
func applyWaivers(v *Verdict, waivers []Waiver, now time.Time) {
	v.Status = v.Result
	var expired *Waiver
	for i := range waivers {
		w := &waivers[i]
		if !w.Matches(v.Objective, v.Stage, v.Class) {
			continue
		}
		if w.Expired(now) {
			if expired == nil {
				expired = w
			}
			continue
		}
		wc := *w
		v.Waiver, v.WaiverExpired = &wc, false
		switch v.Result {
		case Fail, NoData, Pending, Inconclusive:
			v.Status = Waived
			addNote(v, wc.Describe())
		case Pass:
			addNote(v, "waiver by "+wc.Owner+" not needed: passed")
		}
		return
	}
	if expired != nil {
		wc := *expired
		v.Waiver, v.WaiverExpired = &wc, true
		if v.Result != Pass {
			addNote(v, fmt.Sprintf("waiver by %s expired %s (%s): no longer waives", wc.Owner, wc.ExpiresText, wc.Reason))
		} else {
			addNote(v, fmt.Sprintf("waiver by %s expired %s", wc.Owner, wc.ExpiresText))
		}
	}
}

func addNote(v *Verdict, s string) {
	if v.Note == "" {
		v.Note = s
	} else {
		v.Note += "; " + s
	}
}

// MeasuredText renders Measured for a table: "98.0% (p99 612ms)",
// "0.40%", "1520.3/s".
func (v *Verdict) MeasuredText() string {
	if v.Result == NoData || v.Result == Pending {
		return "-"
	}
	switch v.Kind {
	case KindLatency:
		s := percent(v.Measured)
		p := "p" + quantileLabel(v.TargetText, v.Target)
		switch {
		case v.QuantileLowMs != nil && v.QuantileMs == nil:
			s += fmt.Sprintf(" (%s > %s, +Inf bucket)", p, fmtMs(*v.QuantileLowMs))
		case v.QuantileLowMs != nil && *v.QuantileLowMs == 0:
			s += fmt.Sprintf(" (%s ≤ %s, first bucket)", p, fmtMs(*v.QuantileMs))
		case v.QuantileLowMs != nil:
			s += fmt.Sprintf(" (%s in %s–%s bucket)", p, fmtMs(*v.QuantileLowMs), fmtMs(*v.QuantileMs))
		case v.QuantileMs != nil:
			s += fmt.Sprintf(" (%s %s)", p, fmtMs(*v.QuantileMs))
		}
		return s
	case KindRatio:
		return percent(v.Measured)
	case KindFloor:
		return fmt.Sprintf("%.1f/s", v.Measured)
	case KindManual:
		return strings.ToLower(string(v.Result))
	}
	return fmt.Sprint(v.Measured)
}

// ThresholdLabel renders the threshold with its operator: "≤ 500ms".
func (v *Verdict) ThresholdLabel() string {
	switch v.Kind {
	case KindLatency, KindRatio:
		return "≤ " + v.ThresholdText
	case KindFloor:
		return "≥ " + v.ThresholdText + "/s"
	}
	return "-"
}

func percent(f float64) string {
	s := fmt.Sprintf("%.2f", 100*f)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s + "%"
}

func quantileLabel(text string, f float64) string {
	if t, ok := strings.CutSuffix(text, "%"); ok {
		return t
	}
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", 100*f), "0"), ".")
}

func fmtMs(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2fs", d.Seconds())
	case d >= 10*time.Millisecond:
		return fmt.Sprintf("%.0fms", v)
	case d >= time.Millisecond:
		return fmt.Sprintf("%.1fms", v)
	}
	return fmt.Sprintf("%dµs", d.Microseconds())
}
