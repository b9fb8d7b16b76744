package loadgen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// Stage is one step of a load profile: hold Rate (requests per second, open
// loop) or Concurrency (closed loop) for Duration. With Ramp > 0 the first
// Ramp of the stage moves linearly from the previous stage's level.
type Stage struct {
	Name        string
	Rate        float64 // requests per second; open loop
	Concurrency int     // in-flight requests; closed loop
	Duration    time.Duration
	Ramp        time.Duration
}

// ParseStages reads "10@1m,50@2m,100@2m": RATE@DURATION, comma separated,
// and gives every stage the ramp. For a closed loop the number is a
// concurrency ("c8@30s" is accepted as well).
func ParseStages(s string, ramp time.Duration, closed bool) ([]Stage, error) {
	var out []Stage
	parts := strings.Split(s, ",")
	prefixed := 0
	for _, part := range parts {
		if strings.HasPrefix(strings.TrimSpace(part), "c") {
			prefixed++
		}
	}
	switch {
	case prefixed > 0 && !closed:
		return nil, fmt.Errorf("%q: cN@DURATION is a concurrency (closed loop) and cannot follow open-loop rates", s)
	case prefixed > 0 && prefixed < len(parts):
		return nil, fmt.Errorf("%q: mixes concurrencies (cN) and rates: write every stage as cN@DURATION", s)
	}
	for i, part := range parts {
		part = strings.TrimSpace(part)
		lvl, dur, ok := strings.Cut(part, "@")
		if !ok {
			return nil, fmt.Errorf("stage %d %q: want LEVEL@DURATION, e.g. 10@1m", i+1, part)
		}
		d, err := time.ParseDuration(strings.TrimSpace(dur))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("stage %d %q: duration %q is not a positive duration", i+1, part, dur)
		}
		lvl = strings.TrimPrefix(strings.TrimSpace(lvl), "c")
		v, err := strconv.ParseFloat(lvl, 64)
		if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
			return nil, fmt.Errorf("stage %d %q: level %q is not a non-negative number", i+1, part, lvl)
		}
		st := Stage{Name: fmt.Sprintf("stage%d", i+1), Duration: d, Ramp: min(ramp, d)}
		if closed {
			if v != math.Trunc(v) || v < 1 {
				return nil, fmt.Errorf("stage %d %q: concurrency %q must be a whole number ≥ 1", i+1, part, lvl)
			}
			st.Concurrency = int(v)
		} else {
			st.Rate = v
		}
		out = append(out, st)
	}
	return out, nil
}

// TotalDuration is the sum of the stages' durations.
func TotalDuration(stages []Stage) time.Duration {
	var d time.Duration
	for _, s := range stages {
		d += s.Duration
	}
	return d
}

// stageAt returns the index of the stage running at offset t (the last one
// past the end).
func stageAt(stages []Stage, t time.Duration) int {
	for i, s := range stages {
		if t < s.Duration {
			return i
		}
		t -= s.Duration
	}
	return len(stages) - 1
}

// Arrival processes. All open-loop processes are driven through the
// cumulative intensity Λ(t) = ∫ rate: the next arrival is the t at which Λ
// has grown by a draw with mean 1 since the last one. Constant draws 1,
// Poisson Exp(1), gamma Gamma(k, 1/k), uniform U(1−s, 1+s) (a steady pace
// with jitter: a canary's "every 30s ± 5s" is rate 1/30, spread 5/30). So
// ramps and rate steps change the rate exactly, without re-seeding or
// approximation.
const (
	ArrivalConstant Arrival = "constant"
	ArrivalPoisson  Arrival = "poisson"
	ArrivalGamma    Arrival = "gamma"
	ArrivalUniform  Arrival = "uniform"
)

// Arrival names an open-loop arrival process.
type Arrival string

// DefaultArrival is the process of an open-loop run that names none (run,
// sweep, validate, capacity): Poisson, since constant arrivals, which never
// bunch, would understate queueing.
const DefaultArrival = ArrivalPoisson

// ResolveArrival is the process a command runs: a as given, DefaultArrival
// when a is empty, and "" for a closed loop, which has no arrival process.
// Every command decides so here; library code that leaves Options.Arrival
// empty gets constant arrivals instead (see Options.Arrival).
func ResolveArrival(a Arrival, closed bool) Arrival {
	switch {
	case closed:
		return ""
	case a == "":
		return DefaultArrival
	}
	return a
}

// rateSchedule is an open-loop arrival schedule over stages.
type rateSchedule struct {
	segs  []segment
	draw  func() float64
	lam   float64 // Λ at the last arrival
	seg   int
	first bool
	// startNow sends the first request at once (steady paces).
	startNow bool
}

// segment is a piece of the rate function: rate r0 at start, slope k
// (requests/s²), over [start, end), with Λ at its start.
type segment struct {
	start, end float64 // seconds
	r0, k      float64
	lam0       float64
}

// segmentsOf cuts the stages into pieces of linear rate, with Λ at the
// start of each.
func segmentsOf(stages []Stage) ([]segment, error) {
	var segs []segment
	prev := 0.0
	t, lam := 0.0, 0.0
	for i, s := range stages {
		if !(s.Rate >= 0) || math.IsInf(s.Rate, 0) {
			return nil, fmt.Errorf("stage %d: rate %v is not a non-negative number", i+1, s.Rate)
		}
		d := s.Duration.Seconds()
		ramp := min(s.Ramp.Seconds(), d)
		if i == 0 {
			prev = s.Rate // nothing to ramp from
		}
		if ramp > 0 && prev != s.Rate {
			k := (s.Rate - prev) / ramp
			segs = append(segs, segment{start: t, end: t + ramp, r0: prev, k: k, lam0: lam})
			lam += prev*ramp + k*ramp*ramp/2
			t += ramp
			d -= ramp
		}
		segs = append(segs, segment{start: t, end: t + d, r0: s.Rate, lam0: lam})
		lam += s.Rate * d
		t += d
		prev = s.Rate
	}
	return segs, nil
}

// lambdaAt is Λ(t): the requests the stages make due in [0, t), on
// average (constant pacing sends one each time Λ grows by 1).
func lambdaAt(segs []segment, t float64) float64 {
	lam := 0.0
	for _, s := range segs {
		if t <= s.start {
			break
		}
		lam = s.lamAt(min(t, s.end))
	}
	return lam
}

// expectedArrivals is how many requests open-loop stages make due between
// offsets from and to, on average: the integral of the rate, ramps
// included. Zero means the stages send nothing there.
func expectedArrivals(stages []Stage, from, to time.Duration) float64 {
	segs, err := segmentsOf(stages)
	if err != nil || to <= from {
		return 0
	}
	return lambdaAt(segs, to.Seconds()) - lambdaAt(segs, from.Seconds())
}

// newRateSchedule builds a schedule over stages with the given process
// ("constant", "poisson", "gamma", "uniform"). shape is the gamma shape
// (burstiness: 1 is Poisson, below 1 burstier, above 1 more regular) or
// the uniform spread s in [0, 1] (gaps within ±s of the mean gap); the
// other processes ignore it. seed makes it reproducible.
func newRateSchedule(stages []Stage, process Arrival, shape float64, seed uint64) (*rateSchedule, error) {
	burstiness := shape
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	o := &rateSchedule{first: true}
	switch process {
	case ArrivalConstant, "":
		o.draw = func() float64 { return 1 }
		o.startNow = true
	case ArrivalUniform:
		if !(shape >= 0 && shape <= 1) {
			return nil, fmt.Errorf("uniform arrivals: spread %v must be within [0, 1]", shape)
		}
		o.draw = func() float64 { return 1 + shape*(2*rng.Float64()-1) }
		o.startNow = true
	case ArrivalPoisson:
		o.draw = rng.ExpFloat64
	case ArrivalGamma:
		if !(burstiness > 0) {
			return nil, fmt.Errorf("gamma arrivals: burstiness %v must be > 0", burstiness)
		}
		k := burstiness
		o.draw = func() float64 { return gammaDraw(rng, k) / k }
	default:
		return nil, fmt.Errorf("arrival process %q: want constant, poisson, gamma or uniform", process)
	}
	segs, err := segmentsOf(stages)
	if err != nil {
		return nil, err
	}
	o.segs = segs
	return o, nil
}

// Next implements dueTimes: the next arrival of the process, whatever
// the prompt.
func (o *rateSchedule) Next(*prompts.Prompt) (time.Duration, bool) {
	x := o.draw()
	if o.first {
		// The first request goes out at once for steady paces (as vegeta
		// does); random processes start with a draw.
		o.first = false
		if o.startNow {
			x = 0
		}
	}
	target := o.lam + x
	for o.seg < len(o.segs) {
		s := o.segs[o.seg]
		if target < s.lamAt(s.end) && (s.r0 > 0 || s.k > 0) {
			u := s.invert(target - s.lam0)
			o.lam = target
			return time.Duration((s.start + u) * float64(time.Second)), true
		}
		o.seg++
	}
	return 0, false
}

// lamAt is Λ at t (seconds) within the segment.
func (s segment) lamAt(t float64) float64 {
	u := t - s.start
	return s.lam0 + s.r0*u + s.k*u*u/2
}

// invert solves r0·u + k·u²/2 = dl for u ≥ 0.
func (s segment) invert(dl float64) float64 {
	if dl <= 0 {
		return 0
	}
	if s.k == 0 {
		return dl / s.r0
	}
	// u = (−r0 + sqrt(r0² + 2k·dl)) / k, written to stay accurate when k→0.
	disc := s.r0*s.r0 + 2*s.k*dl
	if disc < 0 {
		disc = 0
	}
	return 2 * dl / (s.r0 + math.Sqrt(disc))
}

// gammaDraw draws from Gamma(k, 1) (Marsaglia–Tsang; boosted for k < 1).
func gammaDraw(rng *rand.Rand, k float64) float64 {
	if k < 1 {
		u := rng.Float64()
		return gammaDraw(rng, k+1) * math.Pow(u, 1/k)
	}
	d := k - 1.0/3
	c := 1 / math.Sqrt(9*d)
	for {
		x := rng.NormFloat64()
		v := 1 + c*x
		if v <= 0 {
			continue
		}
		v = v * v * v
		u := rng.Float64()
		if u < 1-0.0331*x*x*x*x || math.Log(u) < 0.5*x*x+d*(1-v+math.Log(v)) {
			return d * v
		}
	}
}
