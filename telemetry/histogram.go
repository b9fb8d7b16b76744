package telemetry

import (
	"cmp"
	"math"
	"slices"

	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// The histogram types are promhist's: one histogram type from the scrape
// to the judge and the results files.
type (
	// Bucket is one cumulative bucket.
	Bucket = promhist.Bucket
	// Histogram is a scraped histogram.
	Histogram = promhist.Histogram
	// Estimate is a quantile read from a Histogram, with its bounds.
	Estimate = promhist.Estimate
)

// QueueDelay is the histogram of the time requests waited in the server's
// queue before being scheduled (vLLM's WAITING phase), in seconds.
type QueueDelay = Histogram

// joinSources unions comma-separated source lists, as histograms' sources.
var joinSources = promhist.JoinSources

// Delta is the queue delay observed between snapshots a and b (b taken
// later) of one Run. Without queue-delay buckets in b (none exposed, or
// Triton's mean only) Missing says why, and the histogram is empty or
// mean-only. Snapshots are reset-corrected already; should b still be
// below a (snapshots of different runs), Delta returns b's histogram.
func Delta(a, b Snapshot) QueueDelay {
	var d QueueDelay
	switch {
	case b.QueueDelay == nil:
	case a.QueueDelay == nil:
		d = b.QueueDelay.Clone()
	default:
		d, _ = b.QueueDelay.Sub(*a.QueueDelay)
	}
	if d.MeanOnly() {
		d.Missing = cmp.Or(b.QueueDelayUnavailable, NoQueueNotExposed)
	}
	return d
}

// histogramBuilder turns raw (bound, cumulative count) pairs into a
// well-formed Histogram: finite-or-+Inf bounds, sorted, duplicates merged,
// counts forced non-decreasing (as histogram_quantile does), +Inf bucket
// present and equal to Count.
type histogramBuilder struct {
	bounds map[float64]float64
	count  float64 // sample count, when given
	sum    float64
	hasCnt bool
	bad    bool
}

func (hb *histogramBuilder) bucket(le, count float64) {
	if math.IsNaN(le) || math.IsInf(le, -1) {
		return
	}
	if !validCount(count) {
		hb.bad = true
		return
	}
	if hb.bounds == nil {
		hb.bounds = map[float64]float64{}
	}
	hb.bounds[le] = max(hb.bounds[le], count)
}

func validCount(v float64) bool { return v >= 0 && v < 1<<63 }

// build scales bounds and sum by scale (e.g. 0.001 for milliseconds) and
// returns false for a histogram that cannot be used (negative or NaN
// counts, non-finite sum, nothing at all).
func (hb *histogramBuilder) build(source string, scale float64) (*Histogram, bool) {
	if hb.bad || math.IsNaN(hb.sum) || math.IsInf(hb.sum, 0) || (hb.hasCnt && !validCount(hb.count)) {
		return nil, false
	}
	if len(hb.bounds) == 0 && !hb.hasCnt {
		return nil, false
	}
	les := make([]float64, 0, len(hb.bounds)+1)
	for le := range hb.bounds {
		les = append(les, le)
	}
	slices.Sort(les)
	h := &Histogram{Source: source, Sum: hb.sum * scale}
	var prev uint64
	for _, le := range les {
		c := max(prev, uint64(math.Round(hb.bounds[le])))
		prev = c
		bound := le
		if !math.IsInf(le, 1) {
			bound = le * scale
		}
		if n := len(h.Buckets); n > 0 && h.Buckets[n-1].LeSeconds == bound {
			h.Buckets[n-1].Count = c // two bounds that scaling made equal
			continue
		}
		h.Buckets = append(h.Buckets, Bucket{LeSeconds: bound, Count: c})
	}
	if n := len(h.Buckets); n == 0 || !math.IsInf(h.Buckets[n-1].LeSeconds, 1) {
		c := prev
		if hb.hasCnt {
			c = max(prev, uint64(math.Round(hb.count)))
		}
		h.Buckets = append(h.Buckets, Bucket{LeSeconds: math.Inf(1), Count: c})
	}
	h.Count = h.Buckets[len(h.Buckets)-1].Count
	if math.IsNaN(h.Sum) || math.IsInf(h.Sum, 0) {
		return nil, false
	}
	return h, true
}
