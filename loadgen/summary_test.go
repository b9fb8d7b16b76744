package loadgen

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

// lagRuns returns n OK records with the given TTFT (E2E = TTFT + 10 ms)
// whose sends were on time (100 µs late) except those late ones, lateBy.
func lagRun(n, late int, ttft, lateBy time.Duration) *Metrics {
	m := NewMetrics()
	for i := 0; i < n; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		lag := 100 * time.Microsecond
		if i < late {
			lag = lateBy
		}
		r := &Record{Intended: at, Sent: at + lag, End: at + ttft + 10*time.Millisecond, OutputTokens: 2,
			Chunks: []Chunk{{At: at + ttft}, {At: at + ttft + 10*time.Millisecond}}}
		if ttft == 0 { // no token: an answer without chunks
			r.Chunks = nil
			r.End = at + 2*time.Second
		}
		r.Finalize()
		m.Add(r)
	}
	return m
}

func TestSelfCheck(t *testing.T) {
	for _, c := range []struct {
		name          string
		m             *Metrics
		cpu           float64
		distorted     bool
		late          int64
		limitMs       float64
		reasonContain string
	}{
		// make demo at 5 req/s: one late send of 45 sets the p99 but is an
		// outlier, not a bottleneck.
		{"one outlier of 45", lagRun(45, 1, 20*time.Millisecond, 30*time.Millisecond), 0.01, false, 1, 1, ""},
		{"2% of 500 late", lagRun(500, 10, 20*time.Millisecond, 3*time.Millisecond), 0.1, true, 10, 1, "schedule lag p99"},
		{"1% of 500 late is not more than 1%", lagRun(500, 5, 20*time.Millisecond, 3*time.Millisecond), 0.1, false, 5, 1, ""},
		{"2 of 45 late", lagRun(45, 2, 20*time.Millisecond, 3*time.Millisecond), 0.1, true, 2, 1, "2 of 45 requests"},
		{"one late of one", lagRun(1, 1, 20*time.Millisecond, 3*time.Millisecond), 0.1, false, 1, 1, ""},
		{"4 of 6 late (in-flight cap full)", lagRun(6, 4, 20*time.Millisecond, 2*time.Second), 0.1, true, 4, 1, "4 of 6"},
		// Lag is judged against what it distorts: 10 ms is 1% of a 1 s TTFT.
		{"10ms lag, 1s TTFT", lagRun(200, 20, time.Second, 10*time.Millisecond), 0.1, false, 0, 50, ""},
		{"10ms lag, 20ms TTFT", lagRun(200, 20, 20*time.Millisecond, 10*time.Millisecond), 0.1, true, 20, 1, "20 of 200 requests (10.0%)"},
		// Without a token the reference is E2E (2 s): limit 100 ms.
		{"no TTFT: E2E reference", lagRun(200, 20, 0, 50*time.Millisecond), 0.1, false, 0, 100, ""},
		{"CPU saturated", lagRun(100, 0, 20*time.Millisecond, 0), 0.95, true, 0, 1, "CPU saturated"},
	} {
		sc := CheckSelf(c.m.All.Hist[MetricScheduleLag], c.m.All.Hist[MetricTTFT], c.m.All.Hist[MetricE2E], c.cpu)
		if sc.Distorted != c.distorted || sc.LateRequests != c.late || math.Abs(sc.LagLimitMs-c.limitMs) > c.limitMs*0.001 { // HDR: 3 digits
			t.Errorf("%s: distorted %v late %d limit %.3f ms, want %v %d %.3f (%q)", c.name, sc.Distorted,
				sc.LateRequests, sc.LagLimitMs, c.distorted, c.late, c.limitMs, sc.Reasons)
		}
		if c.distorted != (len(sc.Reasons) > 0) || (c.reasonContain != "" && !strings.Contains(strings.Join(sc.Reasons, "\n"), c.reasonContain)) {
			t.Errorf("%s: reasons %q, want one containing %q", c.name, sc.Reasons, c.reasonContain)
		}
		s := c.m.Summary(Info{CPUUtilization: c.cpu}, SummaryMeta{})
		if s.SelfCheck.Distorted != c.distorted || len(s.Warnings) != len(sc.Reasons) {
			t.Errorf("%s: summary self-check %+v, warnings %q", c.name, s.SelfCheck, s.Warnings)
		}
	}
}

// cut_at_end requests are counted apart from errors, and the summary says
// how many.
func TestSummaryCountsCutAtEndApart(t *testing.T) {
	m := NewMetrics()
	add := func(kind ErrorKind, n int) {
		for i := 0; i < n; i++ {
			r := &Record{Intended: 0, Sent: time.Microsecond, End: 50 * time.Millisecond, ErrorKind: kind}
			if kind == ErrNone {
				r.Chunks = []Chunk{{At: 10 * time.Millisecond}}
			}
			r.Finalize()
			m.Add(r)
		}
	}
	add(ErrNone, 8)
	add(ErrCutAtEnd, 2)
	add(ErrServer, 1)
	add(ErrCancelled, 1)
	add(ErrDropped, 1)
	s := m.Summary(Info{Grace: 30 * time.Second}, SummaryMeta{})
	if c := s.Requests; c.Sent != 12 || c.OK != 8 || c.Errors != 1 || c.Cancelled != 1 || c.CutAtEnd != 2 || c.Dropped != 1 ||
		c.ErrorsByKind["cut_at_end"] != 2 {
		t.Errorf("counts %+v", c)
	}
	if !strings.Contains(strings.Join(s.Warnings, "\n"), "2 requests cut at the end: still in flight 30s after the schedule ended") {
		t.Errorf("warnings %q", s.Warnings)
	}
	if s.Run.GraceS != 30 {
		t.Errorf("grace_s %v", s.Run.GraceS)
	}
}

// Offered and sent rates are over the scheduled window, the completion
// rate over the measured window with its drain.
func TestSummaryRates(t *testing.T) {
	m := NewMetrics()
	// 10/s for 2 s: 20 due, 2 of them dropped; each answer takes 1 s, so
	// the measured window runs to 2.9 s.
	for i := 0; i < 20; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		r := &Record{Intended: at, Sent: at, End: at + time.Second, Stage: []string{"lo", "hi"}[i/10],
			Chunks: []Chunk{{At: at + 100*time.Millisecond}}}
		if i == 5 || i == 15 {
			r.ErrorKind, r.End = ErrDropped, at
		}
		r.Finalize()
		m.Add(r)
	}
	info := Info{Scheduled: Window{From: 0, To: 2 * time.Second},
		StageScheduled: map[string]time.Duration{"lo": time.Second, "hi": time.Second},
		Stopped:        errors.New("disk full")}
	s := m.Summary(info, SummaryMeta{})
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-9 }
	if tp := s.Throughput; !near(tp.OfferedPerS, 10) || !near(tp.SentPerS, 9) || !near(tp.ScheduledWindowS, 2) ||
		!near(tp.MeasuredWindowS, 2.9) || !near(tp.RequestsPerS, 18/2.9) {
		t.Errorf("throughput %+v", tp)
	}
	if lo := s.Stages["lo"].Throughput; !near(lo.OfferedPerS, 10) || !near(lo.SentPerS, 9) || !near(lo.MeasuredWindowS, 1.9) {
		t.Errorf("stage lo throughput %+v", lo)
	}
	if s.Run.Stopped != "disk full" {
		t.Errorf("run.stopped %q", s.Run.Stopped)
	}
	for _, k := range []string{"offered_per_s", "sent_per_s", "scheduled_window", "measured_window", "cut_at_end", "self_check", "ttft"} {
		if s.Definitions[k] == "" {
			t.Errorf("definitions lack %q", k)
		}
	}
	// Built offline, without a schedule, the rates are left out.
	if tp := m.Summary(Info{}, SummaryMeta{}).Throughput; tp.OfferedPerS != 0 || tp.ScheduledWindowS != 0 || tp.RequestsPerS == 0 {
		t.Errorf("no schedule: %+v", tp)
	}
}

// The Wilson bound against values computed apart (Python, same formula).
func TestWilsonLower(t *testing.T) {
	for _, c := range []struct {
		k, n int64
		want float64
	}{{0, 10, 0}, {1, 45, 0.00393}, {2, 45, 0.01227}, {10, 500, 0.01090}, {5, 500, 0.00428}, {4, 6, 0.30000}, {0, 0, 0}} {
		if got := wilsonLower(c.k, c.n, 1.96); math.Abs(got-c.want) > 5e-5 {
			t.Errorf("wilsonLower(%d, %d) = %.5f, want %.5f", c.k, c.n, got, c.want)
		}
	}
}
