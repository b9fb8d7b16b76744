package slo

import (
	"fmt"
	"strings"
	"time"
)

// Status is a verdict's outcome.
type Status string

// The verdicts an objective, a stage or a plan can get.
const (
	Pass    Status = "PASS"
	Fail    Status = "FAIL"
	Waived  Status = "WAIVED"  // a FAIL or NO_DATA that an unexpired waiver covers
	NoData  Status = "NO_DATA" // nothing to measure: the run is invalid
	Pending Status = "PENDING" // a manual stage nobody has recorded yet
	// NotApplicable is a floor the stage's offered load could not reach by
	// itself, whatever the server (Input.Demand): demand, not capacity.
	// It neither passes nor fails the stage; the note says why.
	NotApplicable Status = "N/A"
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
	// Offered counts the requests the floor's stage offered (its class
	// and turn, failed and dropped ones too), for a floor judged as a
	// share of them (ShareOfOffered: Measured is Good / Offered, Threshold
	// a fraction) or held against what they could reach (ReachablePerS:
	// the most the offered load could give whatever the server; 0 when
	// not known). A floor above its reachable rate is NotApplicable.
	Offered        uint64  `json:"offered,omitempty"`
	ShareOfOffered bool    `json:"share_of_offered,omitempty"`
	ReachablePerS  float64 `json:"reachable_per_s,omitempty"`
	// CensoredMisses counts requests cut at the end, timed out or
	// cancelled by the run after a latency threshold had passed: known
	// misses, in Total and not in Good. Censored counts those cut before
	// it: their value is unknown, so they are in neither, and the note says
	// whether they could change the verdict (latency only).
	CensoredMisses uint64 `json:"censored_misses,omitempty"`
	Censored       uint64 `json:"censored,omitempty"`
	// EmptyMisses counts answers that came with no output token, or more
	// than max_tokens (empty_answer, over_generation): misses of every
	// latency objective, in Total and not in Good, with no value for the
	// quantile (latency only).
	EmptyMisses uint64 `json:"empty_misses,omitempty"`
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
		if v.ShareOfOffered {
			return percent(v.Measured) + " of offered"
		}
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
		if v.ShareOfOffered {
			return "≥ " + v.ThresholdText + " of offered"
		}
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
