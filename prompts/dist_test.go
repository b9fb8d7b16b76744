package prompts

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// distFrom parses a distribution from YAML text, as a mix file would.
func distFrom(t *testing.T, text string, u unit) dist {
	t.Helper()
	doc, root := yamlwalk.Parse("t.yaml", []byte("x: "+text))
	m, _ := root.Map()
	x, _ := m.Get("x")
	d, _ := mixReader{doc: doc}.dist(x, u, 1)
	if err := doc.Err(); err != nil {
		t.Fatalf("%s: %v", text, err)
	}
	return d
}

func moments(d *dist, r *rng, n int) (mean, sd, lo, hi float64) {
	var sum, sum2 float64
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := 0; i < n; i++ {
		v := float64(d.sample(r))
		sum += v
		sum2 += v * v
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	mean = sum / float64(n)
	sd = math.Sqrt(sum2/float64(n) - mean*mean)
	return
}

// Length distributions match their parameters: over 200,000 draws the
// sample mean is within 4 standard errors of the distribution's mean and
// the sample standard deviation within 2% of its value; draws stay in
// [min, max]. Bounds are chosen wide enough (≥ 4.5 sd from the mean) that
// truncation moves the moments by far less than those tolerances.
func TestDistMoments(t *testing.T) {
	t.Parallel()
	const n = 200000
	cases := []struct {
		yaml     string
		u        unit
		mean, sd float64
	}{
		{"512", unitTokens, 512, 0},
		{"{dist: fixed, value: 77}", unitTokens, 77, 0},
		{"{dist: uniform, min: 100, max: 900}", unitTokens, 500, math.Sqrt((801*801 - 1) / 12.0)},
		{"{dist: uniform, min: 1, max: 2}", unitTokens, 1.5, 0.5},
		{"{dist: normal, mean: 500, stddev: 100, min: 1, max: 2000}", unitTokens, 500, 100},
		{"{dist: normal, mean: 2000, stddev: 400}", unitTokens, 2000, 400},
		{"{dist: lognormal, mean: 500, stddev: 300, min: 1, max: 100000}", unitTokens, 500, 300},
		{"{dist: lognormal, mean: 8000, stddev: 2000}", unitTokens, 8000, 2000},
		{"{dist: uniform, min: 1s, max: 3s}", unitDuration, 2e9, 2e9 / math.Sqrt(12)},
		{"{dist: normal, mean: 2s, stddev: 300ms}", unitDuration, 2e9, 3e8},
		{"{dist: lognormal, mean: 3s, stddev: 2s, max: 10m}", unitDuration, 3e9, 2e9},
	}
	for _, c := range cases {
		d := distFrom(t, c.yaml, c.u)
		mean, sd, lo, hi := moments(&d, newRNG(42, fnv64(c.yaml)), n)
		se := c.sd / math.Sqrt(n)
		if math.Abs(mean-c.mean) > 4*se+1e-9 {
			t.Errorf("%s: mean %.3f, want %.3f ± %.3f", c.yaml, mean, c.mean, 4*se)
		}
		if math.Abs(sd-c.sd) > 0.02*c.sd+1e-9 {
			t.Errorf("%s: stddev %.3f, want %.3f ± 2%%", c.yaml, sd, c.sd)
		}
		if lo < d.min || hi > d.max {
			t.Errorf("%s: draws in [%v, %v], outside [%v, %v]", c.yaml, lo, hi, d.min, d.max)
		}
	}
}

// Tight bounds truncate: every draw stays inside.
func TestDistTruncates(t *testing.T) {
	t.Parallel()
	d := distFrom(t, "{dist: normal, mean: 100, stddev: 500, min: 90, max: 110}", unitTokens)
	_, _, lo, hi := moments(&d, newRNG(1), 20000)
	if lo < 90 || hi > 110 {
		t.Errorf("draws in [%v, %v]", lo, hi)
	}
	// Uniform over integers reaches both ends.
	d = distFrom(t, "{dist: uniform, min: 3, max: 5}", unitTokens)
	_, _, lo, hi = moments(&d, newRNG(1), 1000)
	if lo != 3 || hi != 5 {
		t.Errorf("uniform 3..5 drew [%v, %v]", lo, hi)
	}
}

// The portable log and exp agree with the math package (whose amd64
// versions are assembly, with their own rounding) to a relative 1e-15.
func TestPortableMath(t *testing.T) {
	t.Parallel()
	r := newRNG(5)
	ulps := func(a, b float64) uint64 {
		x, y := math.Float64bits(a), math.Float64bits(b)
		if x > y {
			return x - y
		}
		return y - x
	}
	for i := 0; i < 200000; i++ {
		x := math.Ldexp(r.float64()+0.5, r.intn(200)-100)
		if d := math.Abs(plog(x) - math.Log(x)); d > 1e-15*math.Abs(math.Log(x)) && ulps(plog(x), math.Log(x)) > 1 {
			t.Fatalf("plog(%v) = %v, math.Log = %v", x, plog(x), math.Log(x))
		}
		y := (r.float64() - 0.5) * 1400
		if d := math.Abs(pexp(y) - math.Exp(y)); d > 1e-15*math.Exp(y) {
			t.Fatalf("pexp(%v) = %v, math.Exp = %v", y, pexp(y), math.Exp(y))
		}
	}
	if !math.IsInf(plog(0), -1) || !math.IsNaN(plog(-1)) || pexp(-1000) != 0 || !math.IsInf(pexp(1000), 1) {
		t.Error("special cases")
	}
}

// Golden draws: the generator and the normal sampler never change for a
// seed (if this fails, every mix's prompts changed).
func TestRNGGolden(t *testing.T) {
	t.Parallel()
	r := newRNG(42, 7)
	got := []uint64{r.uint64(), r.uint64(), uint64(r.intn(1000)), math.Float64bits(r.normal())}
	want := []uint64{0xa3359777b206499c, 0x3e5caa55758574c4, 0x36d, 0xbff50b3141e0d54c}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("draw %d = %#x, want %#x", i, got[i], want[i])
		}
	}
}

func TestDistString(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"512":                                  "512",
		"{dist: uniform, min: 1, max: 9}":      "uniform(1..9)",
		"{dist: normal, mean: 5, stddev: 1.5}": "normal(mean=5,stddev=1.5,min=1,max=1048576)",
	} {
		if got := distFrom(t, in, unitTokens).String(); got != want {
			t.Errorf("%s: %s, want %s", in, got, want)
		}
	}
	if got := distFrom(t, "{dist: uniform, min: 1s, max: 1500ms}", unitDuration).String(); got != "uniform(1s..1.5s)" {
		t.Error(got)
	}
	if d := distFrom(t, "2s", unitDuration); time.Duration(d.value) != 2*time.Second || !strings.HasPrefix(d.String(), "2s") {
		t.Error(d.String())
	}
}
