// Package promhist is the one type for a server's cumulative latency
// histogram in the Prometheus classic layout (queue delay, server TTFT and
// E2E): telemetry builds it from scrapes, the slo judge judges queue_delay
// objectives on it, and results stores it, all in one JSON form. It imports
// only the standard library, so the judge stays free of scraping and HTTP.
package promhist

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Bucket is one cumulative histogram bucket: Count observations were ≤
// LeSeconds. The last bucket of a Histogram has LeSeconds = math.Inf(1).
// In JSON it is {"le": 0.5, "count": 3}, with "le": "+Inf" for the last.
type Bucket struct {
	LeSeconds float64
	Count     uint64
}

type bucketJSON struct {
	Le    any    `json:"le"`
	Count uint64 `json:"count"`
}

// MarshalJSON writes {"le": bound, "count": n}; bounds that JSON numbers
// cannot hold are written as Prometheus spells them ("+Inf", "-Inf", "NaN").
func (b Bucket) MarshalJSON() ([]byte, error) {
	var le any = b.LeSeconds
	if math.IsInf(b.LeSeconds, 0) || math.IsNaN(b.LeSeconds) {
		le = formatBound(b.LeSeconds)
	}
	return json.Marshal(bucketJSON{Le: le, Count: b.Count})
}

// UnmarshalJSON reads what MarshalJSON writes, and the {"le_s": bound}
// form (null for +Inf) that queue_delay.json used before.
func (b *Bucket) UnmarshalJSON(data []byte) error {
	var v struct {
		Le    json.RawMessage `json:"le"`
		LeS   json.RawMessage `json:"le_s"`
		Count uint64          `json:"count"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	if v.Le == nil && v.LeS != nil {
		// queue_delay.json before the one form: {"le_s": 0.5 | null}.
		if string(v.LeS) == "null" {
			b.LeSeconds, b.Count = math.Inf(1), v.Count
			return nil
		}
		v.Le = v.LeS
	}
	var le float64
	if err := json.Unmarshal(v.Le, &le); err != nil {
		var s string
		if json.Unmarshal(v.Le, &s) != nil {
			return fmt.Errorf("promhist: bucket le %s: not a number", v.Le)
		}
		if le, err = parseBound(s); err != nil {
			return err
		}
	}
	b.LeSeconds, b.Count = le, v.Count
	return nil
}

func formatBound(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return fmt.Sprint(v)
}

func parseBound(s string) (float64, error) {
	switch s {
	case "+Inf", "Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	}
	return 0, fmt.Errorf("promhist: bucket le %q: not a number", s)
}

// Histogram is a cumulative histogram in the Prometheus classic layout:
// Buckets sorted by bound, non-decreasing counts, and a final +Inf bucket
// whose count equals Count. A histogram with only the +Inf bucket (Triton's
// latency counters) has a mean but no quantiles.
type Histogram struct {
	// Source names the server metric, e.g. "vllm:request_queue_time_seconds";
	// several joined by "," when sources with different metrics were summed.
	Source  string   `json:"source"`
	Buckets []Bucket `json:"buckets"`
	// Sum is the sum of the observations, in seconds.
	Sum   float64 `json:"sum_s"`
	Count uint64  `json:"count"`
	// Missing, set only by Delta, says why there are no buckets to judge
	// a queue_delay objective on (one of the NoQueue… reasons): the
	// objective is NO_DATA with this reason.
	Missing string `json:"missing,omitempty"`
}

// MeanOnly reports whether h has no finite bucket, so only its mean is
// known.
func (h Histogram) MeanOnly() bool { return len(h.Buckets) < 2 }

// Mean is Sum / Count in seconds; false when Count is 0.
func (h Histogram) Mean() (float64, bool) {
	if h.Count == 0 {
		return 0, false
	}
	return h.Sum / float64(h.Count), true
}

// Estimate is a quantile estimated from buckets, with the bucket it fell
// in: the true quantile of the observations lies in (Lower, Upper], so the
// estimate is off by at most Upper − Lower. Upper is +Inf when the quantile
// fell in the +Inf bucket; Value is then Lower, a lower bound.
type Estimate struct {
	Value, Lower, Upper float64
}

// Quantile estimates the q-quantile (0 ≤ q ≤ 1) exactly as Prometheus's
// histogram_quantile does for classic buckets: the estimate at rank
// q·Count (see AtRank). False when there are no observations, no finite
// bucket, or q is out of range.
func (h Histogram) Quantile(q float64) (Estimate, bool) {
	if !(q >= 0 && q <= 1) || h.MeanOnly() {
		return Estimate{}, false
	}
	return h.AtRank(q * float64(h.Buckets[len(h.Buckets)-1].Count))
}

// AtRank estimates the rank-th smallest observation (rank 0 to the total
// count, fractions allowed): find the bucket holding the rank and
// interpolate linearly inside it (the first bucket's lower bound is 0 when
// its upper bound is positive); a rank in the +Inf bucket returns the
// highest finite bound. Rank 0 gives the lower bound of the first
// non-empty bucket (where Prometheus divides 0 by 0). The bucket, (Lower,
// Upper], is where the quantile lies whatever the estimate: a judge that
// must not interpolate reads only it. False when there are no
// observations or no finite bucket, or the last bucket is not +Inf.
func (h Histogram) AtRank(rank float64) (Estimate, bool) {
	if h.MeanOnly() {
		return Estimate{}, false
	}
	bs := h.Buckets
	if !math.IsInf(bs[len(bs)-1].LeSeconds, 1) {
		return Estimate{}, false
	}
	total := float64(bs[len(bs)-1].Count)
	if total == 0 {
		return Estimate{}, false
	}
	b := sort.Search(len(bs)-1, func(i int) bool { return float64(bs[i].Count) >= rank })
	if rank == 0 { // q = 0: the first non-empty bucket, not an empty one (0/0)
		b = sort.Search(len(bs)-1, func(i int) bool { return bs[i].Count > 0 })
	}
	if b == len(bs)-1 {
		lo := bs[len(bs)-2].LeSeconds
		return Estimate{Value: lo, Lower: lo, Upper: math.Inf(1)}, true
	}
	if b == 0 && bs[0].LeSeconds <= 0 {
		return Estimate{Value: bs[0].LeSeconds, Lower: math.Inf(-1), Upper: bs[0].LeSeconds}, true
	}
	start, end, count := 0.0, bs[b].LeSeconds, float64(bs[b].Count)
	if b > 0 {
		start = bs[b-1].LeSeconds
		count -= float64(bs[b-1].Count)
		rank -= float64(bs[b-1].Count)
	}
	if rank <= 0 {
		return Estimate{Value: start, Lower: start, Upper: end}, true
	}
	v := start + (end-start)*(rank/count)
	return Estimate{Value: min(max(v, start), end), Lower: start, Upper: end}, true // rounding can step past end
}

// Sub returns the observations h gained since earlier, an earlier reading
// of the same series. When any count or the sum went down, the server
// restarted (a counter reset) and Sub returns h itself with reset true: what
// was observed before the reset and after earlier is lost, as with
// Prometheus's increase(). When the bucket layouts differ, only the bounds
// both share are kept.
func (h Histogram) Sub(earlier Histogram) (d Histogram, reset bool) {
	a, b := align(earlier, h)
	if b.Count < a.Count || b.Sum < a.Sum {
		return b, true
	}
	for i := range b.Buckets {
		if b.Buckets[i].Count < a.Buckets[i].Count {
			return b, true
		}
	}
	d = Histogram{Source: h.Source, Buckets: make([]Bucket, len(b.Buckets)), Sum: Finite(b.Sum - a.Sum), Count: b.Count - a.Count}
	for i := range b.Buckets {
		d.Buckets[i] = Bucket{LeSeconds: b.Buckets[i].LeSeconds, Count: b.Buckets[i].Count - a.Buckets[i].Count}
	}
	return d, false
}

// Plus returns h + o (o's layout aligned to h's).
func (h Histogram) Plus(o Histogram) Histogram {
	a, b := align(h, o)
	out := Histogram{Source: JoinSources(h.Source, o.Source), Buckets: make([]Bucket, len(a.Buckets)),
		Sum: Finite(a.Sum + b.Sum), Count: a.Count + b.Count}
	for i := range a.Buckets {
		out.Buckets[i] = Bucket{LeSeconds: a.Buckets[i].LeSeconds, Count: a.Buckets[i].Count + b.Buckets[i].Count}
	}
	return out
}

// Zero is h's layout with nothing observed.
func (h Histogram) Zero() Histogram {
	z := Histogram{Source: h.Source, Buckets: make([]Bucket, len(h.Buckets))}
	for i, b := range h.Buckets {
		z.Buckets[i].LeSeconds = b.LeSeconds
	}
	return z
}

// Clone is h with its own copy of the buckets.
func (h Histogram) Clone() Histogram {
	h.Buckets = slices.Clone(h.Buckets)
	return h
}

// align returns copies of a and b restricted to the bounds both have.
// Cumulative counts at a shared bound are exact, so nothing is invented.
func align(a, b Histogram) (Histogram, Histogram) {
	if sameLayout(a.Buckets, b.Buckets) {
		return a, b
	}
	keep := func(h Histogram, other []Bucket) Histogram {
		out := h
		out.Buckets = nil
		j := 0
		for _, bk := range h.Buckets {
			for j < len(other) && other[j].LeSeconds < bk.LeSeconds {
				j++
			}
			if j < len(other) && other[j].LeSeconds == bk.LeSeconds {
				out.Buckets = append(out.Buckets, bk)
			}
		}
		return out
	}
	return keep(a, b.Buckets), keep(b, a.Buckets)
}

func sameLayout(a, b []Bucket) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].LeSeconds != b[i].LeSeconds {
			return false
		}
	}
	return true
}

// JoinSources unions comma-separated source lists, keeping order.
func JoinSources(a, b string) string {
	if a == b || b == "" {
		return a
	}
	if a == "" {
		return b
	}
	parts := strings.Split(a, ",")
	for _, s := range strings.Split(b, ",") {
		if !slices.Contains(parts, s) {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, ",")
}

// Finite clamps an overflowed sum to ±MaxFloat64 (JSON has no Inf).
func Finite(v float64) float64 {
	switch {
	case math.IsInf(v, 1):
		return math.MaxFloat64
	case math.IsInf(v, -1):
		return -math.MaxFloat64
	}
	return v
}
