package slo

import (
	"fmt"
	"math"
	"math/big"
	"sort"
	"strings"
	"time"

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
	// QuantileMs is the latency at the target quantile (nearest rank): the
	// objective passes exactly when QuantileMs ≤ Threshold. From server
	// histogram buckets it is the bucket's upper bound.
	QuantileMs *float64 `json:"quantile_ms,omitempty"`
	// Good and Total count events: latency, events meeting the threshold of
	// all events; ratio, requests that did not fail of all requests; floor,
	// Good is the count (requests or tokens) over WindowS seconds.
	Good    uint64  `json:"good"`
	Total   uint64  `json:"total"`
	WindowS float64 `json:"window_s,omitempty"`
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
// +Inf bucket. With buckets the good count is the count at the largest
// bound ≤ threshold, so a threshold between two bounds is judged
// conservatively, and the verdict says so. Without either, queue_delay
// objectives are NO_DATA.
type QueueTelemetry struct {
	Source  string          `json:"source"`
	Samples []time.Duration `json:"-"`
	Buckets []Bucket        `json:"-"`
}

// Bucket is one cumulative histogram bucket: Count events ≤ Le. Le is
// InfBound for the +Inf bucket.
type Bucket struct {
	Le    time.Duration
	Count uint64
}

// InfBound is the +Inf bucket bound.
const InfBound = time.Duration(math.MaxInt64)

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
// exactly, from the records.
func Evaluate(spec *Spec, stage string, records []loadgen.Record, opt Options) []Verdict {
	var recs []*loadgen.Record
	win := Window{}
	seen := false
	for i := range records {
		r := &records[i]
		if r.Warmup || r.Stage != stage {
			continue
		}
		recs = append(recs, r)
		if r.ErrorKind == loadgen.ErrDropped {
			continue
		}
		s, e := trunc(r.Intended), trunc(r.End)
		if !seen || s < win.Start {
			win.Start = s
		}
		if !seen || e > win.End {
			win.End = e
		}
		seen = true
	}
	if opt.Window != (Window{}) {
		win = Window{trunc(opt.Window.Start), trunc(opt.Window.End)}
	}
	only := map[string]bool{}
	for _, n := range opt.Only {
		only[n] = true
	}
	waivers := append(append([]Waiver(nil), spec.Waivers...), opt.Waivers...)
	var out []Verdict
	for i := range spec.Objectives {
		o := &spec.Objectives[i]
		if opt.Only != nil && !only[o.Name] {
			continue
		}
		var sel []*loadgen.Record
		for _, r := range recs {
			if o.Class == "" || r.Class == o.Class {
				sel = append(sel, r)
			}
		}
		v := judge(o, spec, stage, sel, win, opt.QueueDelay)
		applyWaivers(&v, waivers, opt.Now)
		out = append(out, v)
	}
	return out
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

func judge(o *Objective, spec *Spec, stage string, recs []*loadgen.Record, win Window, qd *QueueTelemetry) Verdict {
	v := newVerdict(o, stage)
	switch o.Kind() {
	case KindLatency:
		if o.Metric == QueueDelay {
			judgeQueueDelay(&v, o, qd)
			break
		}
		var samples []sample
		for _, r := range recs {
			if r.OK() {
				latencySamples(o.Metric, r, func(d time.Duration, n uint64) { samples = append(samples, sample{d, n}) })
			}
		}
		judgeLatency(&v, o, samples)
	case KindRatio:
		var bad, total uint64
		for _, r := range recs {
			total++
			if !r.OK() && (len(o.ErrorKinds) == 0 || hasKind(o.ErrorKinds, r.ErrorKind)) {
				bad++
			}
		}
		v.Good, v.Total = total-bad, total
		if total == 0 {
			v.Result, v.Note = NoData, "no requests in this stage"
			break
		}
		v.Measured = float64(bad) / float64(total)
		v.Result = Fail
		if o.Limit.CmpRatio(bad, total) <= 0 {
			v.Result = Pass
		}
	case KindFloor:
		var count uint64
		cons := spec.Goodput
		if o.Constraints != nil {
			cons = *o.Constraints
		}
		for _, r := range recs {
			if !r.OK() {
				continue
			}
			switch o.Metric {
			case RequestsPerS:
				count++
			case OutputTokensPerS:
				count += uint64(max(r.OutputTokens, 0))
			case InputTokensPerS:
				count += uint64(max(r.InputTokens, 0))
			case GoodputPerS:
				if cons.Met(r) {
					count++
				}
			}
		}
		if o.Metric == GoodputPerS {
			v.Note = "good: " + cons.String()
		}
		v.Good = count
		w := win.Duration()
		if w <= 0 {
			v.Result, v.Note = NoData, "no measured window: no request was sent in this stage"
			break
		}
		v.WindowS = w.Seconds()
		v.Measured = float64(count) / w.Seconds()
		v.Result = Fail
		if rateAtLeast(count, w, o.Limit) {
			v.Result = Pass
		}
	}
	return v
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

func judgeLatency(v *Verdict, o *Objective, samples []sample) {
	var good, total uint64
	for _, s := range samples {
		total += s.n
		if s.v <= o.Threshold {
			good += s.n
		}
	}
	v.Good, v.Total = good, total
	if total == 0 {
		v.Result = NoData
		v.Note = "no " + eventName(o.Metric) + " to measure"
		return
	}
	v.Measured = float64(good) / float64(total)
	sort.Slice(samples, func(i, j int) bool { return samples[i].v < samples[j].v })
	rank := max(o.Target.CeilMul(total), 1)
	var cum uint64
	for _, s := range samples {
		cum += s.n
		if cum >= rank {
			q := ms(s.v)
			v.QuantileMs = &q
			break
		}
	}
	v.Result = Fail
	if o.Target.CmpRatio(good, total) >= 0 {
		v.Result = Pass
	}
}

func eventName(m Metric) string {
	switch m {
	case ITL:
		return "output tokens after the first (with token counts)"
	case ICL:
		return "chunk gaps"
	case TPOT:
		return "successful requests with ≥ 2 output tokens"
	case TTFAT:
		return "successful requests with an answer token"
	case TTFT:
		return "successful requests with a token"
	}
	return "successful requests"
}

func judgeQueueDelay(v *Verdict, o *Objective, qd *QueueTelemetry) {
	if qd == nil || len(qd.Samples) == 0 && len(qd.Buckets) == 0 {
		v.Result = NoData
		v.Note = "no server queue-delay telemetry for this stage"
		return
	}
	v.Source = qd.Source
	if len(qd.Samples) > 0 {
		s := make([]sample, len(qd.Samples))
		for i, d := range qd.Samples {
			s[i] = sample{trunc(d), 1}
		}
		judgeLatency(v, o, s)
		return
	}
	b := append([]Bucket(nil), qd.Buckets...)
	sort.Slice(b, func(i, j int) bool { return b[i].Le < b[j].Le })
	if b[len(b)-1].Le != InfBound {
		v.Result = NoData
		v.Note = "queue-delay histogram has no +Inf bucket: events above its last bound are unseen"
		return
	}
	total := b[len(b)-1].Count
	var good uint64
	var at time.Duration = -1
	for _, x := range b {
		if x.Le <= o.Threshold {
			good, at = x.Count, x.Le
		}
	}
	v.Good, v.Total = good, total
	if total == 0 {
		v.Result, v.Note = NoData, "queue-delay histogram is empty for this stage"
		return
	}
	v.Measured = float64(good) / float64(total)
	rank := max(o.Target.CeilMul(total), 1)
	for _, x := range b {
		if x.Count >= rank && x.Le != InfBound {
			q := ms(x.Le)
			v.QuantileMs = &q
			break
		}
	}
	if at != o.Threshold {
		bound := "no bucket"
		if at >= 0 {
			bound = "the " + at.String() + " bucket"
		}
		v.Note = fmt.Sprintf("from histogram buckets: threshold %s is not a bucket bound; counted %s (conservative)", o.Threshold, bound)
	}
	v.Result = Fail
	if o.Target.CmpRatio(good, total) >= 0 {
		v.Result = Pass
	}
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
		case Fail, NoData, Pending:
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
		if v.QuantileMs != nil {
			s += fmt.Sprintf(" (p%s %s)", quantileLabel(v.TargetText, v.Target), fmtMs(*v.QuantileMs))
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
