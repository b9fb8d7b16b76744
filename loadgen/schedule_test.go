package loadgen

import (
	"math"
	"testing"
	"time"
)

func arrivals(t *testing.T, stages []Stage, proc Arrival, k float64) []time.Duration {
	t.Helper()
	o, err := newRateSchedule(stages, proc, k, 42)
	if err != nil {
		t.Fatal(err)
	}
	var out []time.Duration
	for {
		at, ok := o.Next(nil)
		if !ok {
			return out
		}
		if len(out) > 0 && at < out[len(out)-1] {
			t.Fatalf("arrivals not increasing: %v after %v", at, out[len(out)-1])
		}
		out = append(out, at)
	}
}

func TestConstantArrivalsAreEvenlySpaced(t *testing.T) {
	t.Parallel()
	got := arrivals(t, []Stage{{Rate: 50, Duration: 2 * time.Second}}, ArrivalConstant, 0)
	if len(got) != 100 {
		t.Fatalf("got %d arrivals at 50/s over 2s, want 100", len(got))
	}
	for i, at := range got {
		want := time.Duration(i) * 20 * time.Millisecond
		if d := at - want; d < -time.Microsecond || d > time.Microsecond {
			t.Fatalf("arrival %d at %v, want %v", i, at, want)
		}
	}
}

func interarrivalStats(a []time.Duration) (mean, cv float64) {
	var xs []float64
	for i := 1; i < len(a); i++ {
		xs = append(xs, (a[i] - a[i-1]).Seconds())
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	var v float64
	for _, x := range xs {
		v += (x - mean) * (x - mean)
	}
	v /= float64(len(xs) - 1)
	return mean, math.Sqrt(v) / mean
}

func TestPoissonAndGammaMoments(t *testing.T) {
	t.Parallel()
	cases := []struct {
		proc   Arrival
		k      float64
		wantCV float64
	}{
		{ArrivalPoisson, 0, 1},
		{ArrivalGamma, 1, 1},
		{ArrivalGamma, 0.25, 2}, // CV = 1/sqrt(k)
		{ArrivalGamma, 4, 0.5},
	}
	for _, c := range cases {
		a := arrivals(t, []Stage{{Rate: 1000, Duration: 40 * time.Second}}, c.proc, c.k)
		mean, cv := interarrivalStats(a)
		// 40,000 draws: the mean's standard error is cv/200 of it, so 3% is
		// beyond 5 sigma for these CVs; CV estimates are looser.
		if math.Abs(mean-0.001)/0.001 > 0.03 {
			t.Errorf("%s k=%v: mean gap %.6fs, want 0.001s", c.proc, c.k, mean)
		}
		if math.Abs(cv-c.wantCV)/c.wantCV > 0.06 {
			t.Errorf("%s k=%v: CV %.3f, want %.3f", c.proc, c.k, cv, c.wantCV)
		}
	}
}

func TestStagesAndRampsFollowTheRate(t *testing.T) {
	t.Parallel()
	// 0→100/s linear ramp over 2 s (expect 100 requests), hold 100/s for
	// 1 s (100), then step to 10/s for 1 s (10).
	stages := []Stage{{Rate: 0, Duration: time.Nanosecond}, {Rate: 100, Duration: 3 * time.Second, Ramp: 2 * time.Second}, {Rate: 10, Duration: time.Second}}
	a := arrivals(t, stages, ArrivalConstant, 0)
	count := func(from, to time.Duration) int {
		n := 0
		for _, x := range a {
			if x >= from && x < to {
				n++
			}
		}
		return n
	}
	if n := count(0, 2*time.Second); n < 99 || n > 101 {
		t.Errorf("ramp 0→100/s over 2s sent %d, want ~100", n)
	}
	if n := count(0, time.Second); n < 24 || n > 26 {
		t.Errorf("first half of the ramp sent %d, want ~25 (rate grows linearly)", n)
	}
	if n := count(2*time.Second, 3*time.Second); n < 99 || n > 101 {
		t.Errorf("hold at 100/s sent %d, want 100", n)
	}
	if n := count(3*time.Second, 4*time.Second); n < 9 || n > 11 {
		t.Errorf("10/s stage sent %d, want 10", n)
	}
}

func TestParseStages(t *testing.T) {
	t.Parallel()
	st, err := ParseStages("10@1m, 50@2m,100@30s", 5*time.Second, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(st) != 3 || st[1].Rate != 50 || st[2].Duration != 30*time.Second || st[0].Ramp != 5*time.Second {
		t.Fatalf("parsed %+v", st)
	}
	if TotalDuration(st) != 210*time.Second {
		t.Errorf("total %v", TotalDuration(st))
	}
	if i := stageAt(st, 61*time.Second); i != 1 {
		t.Errorf("stageAt(61s) = %d, want 1", i)
	}
	c, err := ParseStages("c8@10s,c16@10s", 0, true)
	if err != nil || c[0].Concurrency != 8 || c[1].Concurrency != 16 {
		t.Fatalf("closed stages %+v %v", c, err)
	}
	for _, bad := range []struct {
		s      string
		closed bool
	}{{"10", false}, {"x@1m", false}, {"10@-1s", false}, {"10@soon", false}, {"1.5@1s", true},
		{"c8@1s", false}, {"c8@1s,10@1s", true}} {
		if _, err := ParseStages(bad.s, 0, bad.closed); err == nil {
			t.Errorf("ParseStages(%q, closed=%v) accepted", bad.s, bad.closed)
		}
	}
}

// expectedArrivals integrates the rate, ramps included, and agrees with
// the count of constant arrivals it drives.
func TestExpectedArrivals(t *testing.T) {
	t.Parallel()
	sec := time.Second
	stages := []Stage{{Rate: 0, Duration: sec}, {Rate: 100, Duration: 3 * sec, Ramp: 2 * sec}, {Rate: 10, Duration: sec}}
	for _, c := range []struct {
		from, to time.Duration
		want     float64
	}{
		{0, 5 * sec, 0 + 100 + 100 + 10}, // nothing, ramp 0→100 over 2 s, hold 1 s, 10/s
		{0, sec, 0},
		{sec, 2 * sec, 25}, // first half of the ramp: a quarter of its area
		{3 * sec, 4 * sec, 100},
		{4500 * time.Millisecond, 10 * sec, 5}, // past the end counts nothing
		{2 * sec, sec, 0},
	} {
		if got := expectedArrivals(stages, c.from, c.to); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("expectedArrivals(%v, %v) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	if n := len(arrivals(t, stages, ArrivalConstant, 0)); n != 210 {
		t.Errorf("constant pacing sent %d, want 210 = Λ(end)", n)
	}
	if got := expectedArrivals([]Stage{{Rate: 0, Duration: 2 * sec}}, 0, 2*sec); got != 0 {
		t.Errorf("0@2s expects %v", got)
	}
}

// Uniform arrivals (a canary's interval with jitter): the first at once,
// then every gap within ±spread of the mean gap, with the mean kept.
func TestUniformArrivalsStayWithinTheJitter(t *testing.T) {
	t.Parallel()
	got := arrivals(t, []Stage{{Rate: 10, Duration: 100 * time.Second}}, ArrivalUniform, 0.2)
	if len(got) < 950 || len(got) > 1050 || got[0] != 0 {
		t.Fatalf("%d arrivals at 10/s over 100s (first at %v), want ~1000 from 0", len(got), got[0])
	}
	spread := false
	for i := 1; i < len(got); i++ {
		gap := got[i] - got[i-1]
		if gap < 80*time.Millisecond-time.Microsecond || gap > 120*time.Millisecond+time.Microsecond {
			t.Fatalf("gap %d = %v, want 100ms ± 20ms", i, gap)
		}
		spread = spread || gap < 95*time.Millisecond || gap > 105*time.Millisecond
	}
	if !spread {
		t.Error("no gap strayed from 100ms by 5ms: no jitter applied")
	}
	if _, err := newRateSchedule([]Stage{{Rate: 1, Duration: time.Second}}, ArrivalUniform, 1.5, 1); err == nil {
		t.Error("spread 1.5 accepted")
	}
}

func TestResolveArrival(t *testing.T) {
	for _, c := range []struct {
		a      Arrival
		closed bool
		want   Arrival
	}{
		{"", false, ArrivalPoisson},
		{ArrivalConstant, false, ArrivalConstant},
		{ArrivalGamma, false, ArrivalGamma},
		{"", true, ""},
		{ArrivalGamma, true, ""},
	} {
		if got := ResolveArrival(c.a, c.closed); got != c.want {
			t.Errorf("ResolveArrival(%q, closed %v) = %q, want %q", c.a, c.closed, got, c.want)
		}
	}
	// The library's zero value stays constant arrivals: the first arrival
	// at once, the next a whole mean gap later.
	a := arrivals(t, []Stage{{Rate: 10, Duration: time.Second}}, "", 0)
	if len(a) < 2 || a[0] != 0 || a[1] != 100*time.Millisecond {
		t.Errorf("empty Arrival: first gaps %v, want constant arrivals every 100ms from 0", a[:min(len(a), 2)])
	}
}
