package prompts

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Distribution kinds for lengths and think times.
const (
	DistFixed     = "fixed"
	DistUniform   = "uniform"
	DistNormal    = "normal"
	DistLognormal = "lognormal"
)

// unit says what a dist's numbers are: whole tokens, or nanoseconds
// written as duration strings.
type unit int

const (
	unitTokens unit = iota
	unitDuration
)

// dist is a distribution of whole tokens or of durations (nanoseconds).
// Lognormal takes the mean and standard deviation of the values themselves,
// not of their logarithm. Draws outside [min, max] are drawn again (up to
// 64 times, then clamped), so bounds truncate the distribution rather than
// piling mass on them.
type dist struct {
	kind     string
	value    float64 // fixed
	mean     float64
	stddev   float64
	min, max float64
	unit     unit
	mu, sig  float64 // lognormal: parameters of the underlying normal
}

// tokenLimit bounds every token length: far above any context window, and
// the size of the synthetic corpus.
const tokenLimit = 1 << 20

func fixedDist(v float64, u unit) dist {
	return dist{kind: DistFixed, value: v, min: v, max: v, unit: u}
}

// sample draws one value: tokens, or nanoseconds.
func (d *dist) sample(r *rng) int64 {
	switch d.kind {
	case DistFixed:
		return int64(d.value)
	case DistUniform:
		if d.unit == unitTokens {
			return int64(d.min) + int64(r.intn(int(d.max-d.min)+1))
		}
		return int64(math.Round(float64((d.max-d.min)*r.float64()) + d.min))
	}
	var v float64
	for try := 0; ; try++ {
		z := r.normal()
		if d.kind == DistNormal {
			v = float64(d.stddev*z) + d.mean
		} else {
			v = pexp(float64(d.sig*z) + d.mu)
		}
		v = math.Round(v)
		if v != v { // NaN: cannot happen with validated parameters
			v = d.min
		}
		if (v >= d.min && v <= d.max) || try == 63 {
			break
		}
	}
	return int64(math.Max(d.min, math.Min(d.max, v)))
}

// normal is a standard normal draw (Marsaglia's polar method) computed with
// exactly rounded operations only, so it is the same on every platform.
func (r *rng) normal() float64 {
	for {
		u := float64(2*r.float64()) - 1
		v := float64(2*r.float64()) - 1
		s := float64(u*u) + float64(v*v)
		if s >= 1 || s == 0 {
			continue
		}
		return float64(u * math.Sqrt(float64(-2*plog(s))/s))
	}
}

// plog and pexp are the portable algorithms of Go's math.Log and math.Exp
// (from FreeBSD's msun, as in the Go source, BSD licence), written with
// explicit conversions so no platform fuses a multiply-add and no assembly
// version is used: the same input gives the same bits everywhere.
func plog(x float64) float64 {
	const (
		ln2Hi = 6.93147180369123816490e-01
		ln2Lo = 1.90821492927058770002e-10
		l1    = 6.666666666666735130e-01
		l2    = 3.999999999940941908e-01
		l3    = 2.857142874366239149e-01
		l4    = 2.222219843214978396e-01
		l5    = 1.818357216161805012e-01
		l6    = 1.531383769920937332e-01
		l7    = 1.479819860511658591e-01
	)
	switch {
	case math.IsNaN(x) || math.IsInf(x, 1):
		return x
	case x < 0:
		return math.NaN()
	case x == 0:
		return math.Inf(-1)
	}
	f1, ki := math.Frexp(x)
	if f1 < math.Sqrt2/2 {
		f1 *= 2
		ki--
	}
	f := f1 - 1
	k := float64(ki)
	s := f / (2 + f)
	s2 := float64(s * s)
	s4 := float64(s2 * s2)
	t1 := float64(s2 * (l1 + float64(s4*(l3+float64(s4*(l5+float64(s4*l7)))))))
	t2 := float64(s4 * (l2 + float64(s4*(l4+float64(s4*l6)))))
	rr := t1 + t2
	hfsq := float64(float64(0.5*f) * f)
	return float64(k*ln2Hi) - ((hfsq - (float64(s*(hfsq+rr)) + float64(k*ln2Lo))) - f)
}

func pexp(x float64) float64 {
	const (
		ln2Hi     = 6.93147180369123816490e-01
		ln2Lo     = 1.90821492927058770002e-10
		log2e     = 1.44269504088896338700e+00
		overflow  = 7.09782712893383973096e+02
		underflow = -7.45133219101941108420e+02
		nearZero  = 1.0 / (1 << 28)
		p1        = 1.66666666666666657415e-01
		p2        = -2.77777777770155933842e-03
		p3        = 6.61375632143793436117e-05
		p4        = -1.65339022054652515390e-06
		p5        = 4.13813679705723846039e-08
	)
	switch {
	case math.IsNaN(x):
		return x
	case x > overflow:
		return math.Inf(1)
	case x < underflow:
		return 0
	case -nearZero < x && x < nearZero:
		return 1 + x
	}
	var k int
	switch {
	case x < 0:
		k = int(float64(log2e*x) - 0.5)
	case x > 0:
		k = int(float64(log2e*x) + 0.5)
	}
	hi := x - float64(float64(k)*ln2Hi)
	lo := float64(float64(k) * ln2Lo)
	r := hi - lo
	t := float64(r * r)
	c := r - float64(t*(p1+float64(t*(p2+float64(t*(p3+float64(t*(p4+float64(t*p5)))))))))
	y := 1 - ((lo - float64(r*c)/(2-c)) - hi)
	return math.Ldexp(y, k)
}

// bounds are the default and widest [min, max] of a unit.
func (u unit) bounds(minDefault float64) (lo, hi float64) {
	if u == unitDuration {
		return 0, float64(24 * time.Hour)
	}
	return minDefault, tokenLimit
}

func (u unit) format(v float64) string {
	if u == unitDuration {
		return time.Duration(v).String()
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// String is the canonical text of the distribution.
func (d dist) String() string {
	f := d.unit.format
	switch d.kind {
	case DistFixed:
		return f(d.value)
	case DistUniform:
		return fmt.Sprintf("uniform(%s..%s)", f(d.min), f(d.max))
	default:
		return fmt.Sprintf("%s(mean=%s,stddev=%s,min=%s,max=%s)", d.kind, f(d.mean), f(d.stddev), f(d.min), f(d.max))
	}
}

// dist reads a distribution: a bare value is fixed; a mapping names dist
// and its parameters. minDefault is the least value allowed for tokens (1
// for lengths).
func (r mixReader) dist(x yamlwalk.Node, u unit, minDefault float64) (dist, bool) {
	lo, hi := u.bounds(minDefault)
	// num reads one parameter: a duration, a whole number of tokens, or
	// (for mean and stddev) any number of tokens.
	num := func(n yamlwalk.Node, whole bool) (float64, bool) {
		if u == unitDuration {
			d, ok := n.Duration()
			return float64(d), ok
		}
		if !whole {
			return n.Float()
		}
		v, ok := n.Int(int64(lo), int64(hi))
		return float64(v), ok
	}
	if x.IsScalar() {
		v, ok := num(x, true)
		if !ok {
			return dist{}, false
		}
		if v < lo || v > hi {
			x.Errorf("%s is out of range [%s, %s]", x.Yaml().Value, u.format(lo), u.format(hi))
			return dist{}, false
		}
		return fixedDist(v, u), true
	}
	if !x.IsMap() {
		x.Errorf("want a number or a distribution {dist: ..., ...}, got %s", x.Describe())
		return dist{}, false
	}
	start := r.doc.Count()
	m, _ := x.Map()
	kn, ok := m.Require("dist")
	if !ok {
		return dist{}, false
	}
	kind, ok := kn.Str()
	if !ok {
		return dist{}, false
	}
	d := dist{kind: kind, unit: u, min: lo, max: hi}
	var allowed, required []string
	switch kind {
	case DistFixed:
		allowed, required = []string{"dist", "value"}, []string{"value"}
	case DistUniform:
		allowed, required = []string{"dist", "min", "max"}, []string{"min", "max"}
	case DistNormal, DistLognormal:
		allowed, required = []string{"dist", "mean", "stddev", "min", "max"}, []string{"mean", "stddev"}
	default:
		kn.Errorf("unknown distribution %q (want fixed, uniform, normal or lognormal)", kind)
		return dist{}, false
	}
	m.Only(allowed...)
	for _, k := range required {
		m.Require(k)
	}
	for _, f := range []struct {
		key      string
		dst      *float64
		allowNeg bool
	}{{"value", &d.value, false}, {"mean", &d.mean, true}, {"stddev", &d.stddev, true}, {"min", &d.min, false}, {"max", &d.max, false}} {
		n, ok := m.Get(f.key)
		if !ok || !slices.Contains(allowed, f.key) {
			continue
		}
		v, ok := num(n, !f.allowNeg)
		if !ok {
			continue
		}
		if !f.allowNeg && v < lo {
			n.Errorf("%s is below %s", n.Yaml().Value, u.format(lo))
			continue
		}
		*f.dst = v
	}
	if r.doc.Count() != start {
		// The checks below need every parameter.
		return dist{}, false
	}
	switch kind {
	case DistFixed:
		d.min, d.max = d.value, d.value
	case DistNormal, DistLognormal:
		sn, _ := m.Get("stddev")
		if d.stddev < 0 {
			sn.Errorf("must not be negative")
		}
		if d.stddev > hi {
			sn.Errorf("is larger than the widest range %s", u.format(hi))
		}
		if kind == DistLognormal {
			mn, _ := m.Get("mean")
			if d.mean <= 0 {
				mn.Errorf("must be positive for a lognormal")
			}
			cv := d.stddev / d.mean
			s2 := plog(1 + float64(cv*cv))
			d.sig = math.Sqrt(s2)
			d.mu = plog(d.mean) - s2/2
		}
	}
	if d.min > d.max {
		n, _ := m.Get("max")
		if !n.Valid() {
			n, _ = m.Get("min")
		}
		n.Errorf("max %s is below min %s", u.format(d.max), u.format(d.min))
	} else if (kind == DistNormal || kind == DistLognormal) && r.doc.Count() == start {
		if d.mean < d.min || d.mean > d.max {
			mn, _ := m.Get("mean")
			mn.Errorf("mean %s is outside [min, max]", u.format(d.mean))
		}
	}
	return d, r.doc.Count() == start
}
