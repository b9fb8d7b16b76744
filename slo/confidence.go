package slo

import (
	"fmt"
	"math"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// The confidence rule. An objective allows a fraction p0 of its events to
// miss (1 − target for a latency objective, the limit for an error rate).
// A sample of n events with k misses decides it only when chance alone is
// unlikely to explain the verdict: with X ~ Binomial(n, p0), the largest
// miss count a compliant server makes likely,
//
//	PASS when P(X ≤ k) ≤ α: so few misses are unlikely at a miss rate of p0
//	     (or above), so the true rate is below it at confidence 1 − α;
//	FAIL when P(X ≥ k) ≤ α: so many are unlikely at p0 (or below);
//
// and INCONCLUSIVE otherwise (one-sided exact binomial tests, α = 1 −
// confidence). 50 requests with none missing a 99% target are
// INCONCLUSIVE: 0.99⁵⁰ = 0.61, a server missing 1% of the time does that
// more often than not; 299 decide it at 95% (0.99²⁹⁹ ≤ 0.05).

// Inconclusive is a verdict the sample does not decide at the stated
// confidence; its NeedRequests says how many events would.
const Inconclusive Status = "INCONCLUSIVE"

// DefaultConfidence is the confidence a verdict is decided at when the SLO
// file gives none; MinConfidence and MaxConfidence bound `confidence:`.
const (
	DefaultConfidence = 0.95
	MinConfidence     = 0.5
	MaxConfidence     = 0.999
)

// maxNeed caps NeedRequests' search: beyond it the observed rate is, for
// any practical run, the limit itself.
const maxNeed = uint64(1) << 40

// ConfidenceOf is the confidence verdicts of spec are decided at: the
// file's, else DefaultConfidence.
func ConfidenceOf(spec *Spec) float64 {
	if spec == nil || spec.Confidence == 0 {
		return DefaultConfidence
	}
	return spec.Confidence
}

// Decide judges k misses of n events against an allowed miss fraction p0 at
// confidence conf (see the confidence rule above). need is set only for
// Inconclusive: the smallest number of events that would decide the
// objective if the observed miss rate k/n held (0: none would, the rate is
// p0 itself). An allowed fraction of 0 ("no errors at all") or 1 is a
// statement about the sample, not a rate: it is judged on the sample as is.
func Decide(k, n uint64, p0, conf float64) (s Status, need uint64) {
	if n == 0 {
		return NoData, 0
	}
	switch {
	case p0 <= 0:
		if k == 0 {
			return Pass, 0
		}
		return Fail, 0
	case p0 >= 1:
		return Pass, 0
	}
	alpha := 1 - conf
	if s := decided(k, n, p0, alpha); s != Inconclusive {
		return s, 0
	}
	return Inconclusive, needed(k, n, p0, alpha)
}

// decided is Pass, Fail or Inconclusive for k misses of n.
func decided(k, n uint64, p0, alpha float64) Status {
	switch {
	case BinomCDF(k, n, p0) <= alpha:
		return Pass
	case BinomSF(k, n, p0) <= alpha:
		return Fail
	}
	return Inconclusive
}

// needed is the smallest m (> n) that decides the objective with the
// observed miss rate r = k/n held, k(m) taken on the undecided side (⌈r·m⌉
// misses when r < p0, ⌊r·m⌋ when r > p0) so that the count is one a
// sample at rate r reaches. 0 when r = p0: no sample decides.
func needed(k, n uint64, p0, alpha float64) uint64 {
	r := float64(k) / float64(n)
	if r == p0 {
		return 0
	}
	misses := func(m uint64) uint64 {
		if r < p0 {
			return uint64(math.Ceil(r*float64(m) - 1e-9))
		}
		return uint64(math.Floor(r*float64(m) + 1e-9))
	}
	ok := func(m uint64) bool { return decided(misses(m), m, p0, alpha) != Inconclusive }
	lo, hi := n, 2*n
	for !ok(hi) {
		if hi >= maxNeed {
			return 0
		}
		lo, hi = hi, 2*hi
	}
	// The tails are monotone in m only up to the rounding of k(m): bisect
	// to a deciding m, then scan the window below it for the first one.
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid
		}
	}
	const window = 1 << 12
	from := n + 1
	if hi-from > window {
		from = hi - window
	}
	for m := from; m < hi; m++ {
		if ok(m) {
			return m
		}
	}
	return hi
}

// BinomCDF is P(X ≤ k) for X ~ Binomial(n, p).
func BinomCDF(k, n uint64, p float64) float64 {
	if k >= n {
		return 1
	}
	// P(X ≤ k) = I_{1−p}(n − k, k + 1).
	return regIncBeta(float64(n-k), float64(k+1), 1-p)
}

// BinomSF is P(X ≥ k) for X ~ Binomial(n, p).
func BinomSF(k, n uint64, p float64) float64 {
	if k == 0 {
		return 1
	}
	if k > n {
		return 0
	}
	// P(X ≥ k) = I_p(k, n − k + 1).
	return regIncBeta(float64(k), float64(n-k+1), p)
}

// regIncBeta is the regularised incomplete beta function I_x(a, b), by its
// continued fraction (Lentz's method) on the side where it converges fast.
func regIncBeta(a, b, x float64) float64 {
	switch {
	case x <= 0:
		return 0
	case x >= 1:
		return 1
	}
	la, _ := math.Lgamma(a)
	lb, _ := math.Lgamma(b)
	lab, _ := math.Lgamma(a + b)
	front := math.Exp(lab - la - lb + a*math.Log(x) + b*math.Log1p(-x))
	if x < (a+1)/(a+b+2) {
		return front * betaCF(a, b, x) / a
	}
	return 1 - front*betaCF(b, a, 1-x)/b
}

func betaCF(a, b, x float64) float64 {
	const tiny, eps = 1e-300, 1e-15
	c, d := 1.0, 1-(a+b)*x/(a+1)
	if math.Abs(d) < tiny {
		d = tiny
	}
	d = 1 / d
	h := d
	for m := 1.0; m <= 10000; m++ {
		m2 := 2 * m
		aa := m * (b - m) * x / ((a + m2 - 1) * (a + m2))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		h *= d * c
		aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))
		d = 1 + aa*d
		if math.Abs(d) < tiny {
			d = tiny
		}
		c = 1 + aa/c
		if math.Abs(c) < tiny {
			c = tiny
		}
		d = 1 / d
		del := d * c
		h *= del
		if math.Abs(del-1) < eps {
			break
		}
	}
	return h
}

// MinDecisive is the fewest events that can PASS an objective allowing a
// miss fraction p0 at confidence conf: with no misses at all, (1 − p0)ⁿ ≤
// 1 − conf. 0 when p0 is 0 or 1 (judged on the sample as is).
func MinDecisive(p0, conf float64) uint64 {
	if p0 <= 0 || p0 >= 1 {
		return 0
	}
	n := uint64(math.Ceil(math.Log(1-conf)/math.Log1p(-p0) - 1e-9))
	for n > 1 && decided(0, n-1, p0, 1-conf) == Pass { // float rounding at the boundary
		n--
	}
	for decided(0, n, p0, 1-conf) != Pass {
		n++
	}
	return n
}

// applyConfidence turns a verdict's exact counts (v.Good of v.Total events
// met the objective) into PASS, FAIL or INCONCLUSIVE at confidence conf
// against the allowed miss fraction p0, and says so in the note when the
// sample does not decide it.
func applyConfidence(v *Verdict, p0, conf float64) {
	v.Confidence = conf
	misses := v.Total - v.Good
	s, need := Decide(misses, v.Total, p0, conf)
	v.Result, v.NeedRequests = s, need
	if s != Inconclusive {
		return
	}
	what := "missed"
	if v.Kind == KindRatio {
		what = "failed"
	}
	if need == 0 {
		addNote(v, fmt.Sprintf("INCONCLUSIVE: %d %s, %d %s: the observed rate is the limit itself; no sample size would decide at %s",
			v.Total, eventNoun(v), misses, what, percent(conf)))
		return
	}
	addNote(v, fmt.Sprintf("INCONCLUSIVE: %d %s, %d %s; %d would decide at %s", v.Total, eventNoun(v), misses, what, need, percent(conf)))
}

// eventNoun names what a verdict's Total counts.
func eventNoun(v *Verdict) string {
	if v.Metric.PerSession() {
		return "sessions"
	}
	if m := measure.FindLatencyMetric(string(v.Metric)); v.Kind == KindRatio || v.Metric == QueueDelay ||
		m != nil && m.Per == measure.PerRequest {
		return "requests"
	}
	return "events"
}
