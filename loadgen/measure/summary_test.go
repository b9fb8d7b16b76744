package measure

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/selfcheck"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// lagRun returns metrics of n OK records whose server took ttft to the
// first token (E2E = TTFT + 10 ms) from the send; late of them were sent
// lateBy after their intended start, the rest 100 µs after.
func lagRun(n, late int, ttft, lateBy time.Duration) *Metrics {
	return lagRunOn(n, late, ttft, lateBy, 100*time.Microsecond)
}

// lagRunOn is lagRun with on-time sends onTime late.
func lagRunOn(n, late int, ttft, lateBy, onTime time.Duration) *Metrics {
	m := NewMetrics()
	for i := 0; i < n; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		lag := onTime
		if i < late {
			lag = lateBy
		}
		sent := at + lag
		r := &loadgen.Record{Intended: at, Sent: sent, End: sent + ttft + 10*time.Millisecond, OutputTokens: 2,
			Chunks: []loadgen.Chunk{{At: sent + ttft}, {At: sent + ttft + 10*time.Millisecond}}}
		r.Finalize()
		m.Add(r)
	}
	return m
}

// The figure-shift rule on constructed records: the lag is judged by how
// far it moved each reported figure.
func TestSelfCheck(t *testing.T) {
	t.Parallel()
	busy := selfcheck.HostLoad{WindowS: 10, Cores: 2, OwnCores: 0.04, BusyCores: 2, OtherCores: 1.96, CPUPressure: 0.7, Source: "test"}
	for _, c := range []struct {
		name      string
		m         *Metrics
		host      selfcheck.HostLoad
		distorted bool
		warned    bool
		contains  string
	}{
		// 30 of 200 sends 10 ms late on a 20 ms TTFT: p90 is 30 ms where
		// on-time sends would give 20 ms.
		{"p90 moved 33%", lagRun(200, 30, 20*time.Millisecond, 10*time.Millisecond), busy, true, false,
			"TTFT p90 30.02 ms would be 20.02 ms had every request been sent on time (moved 10.00 ms, 33%, past the corrected figure's 95% sampling interval, up to 20.02 ms)"},
		// The same lag beside a 1 s TTFT is 1%: a warning naming the cause.
		{"1% of a 1 s TTFT", lagRun(200, 30, time.Second, 10*time.Millisecond), busy, false, true,
			"cause: the machine's run queue (other processes)"},
		// A busy box that moves a figure by under a millisecond is noise.
		{"0.8 ms on 2 ms", lagRun(200, 30, 2*time.Millisecond, 800*time.Microsecond), busy, false, false, ""},
		// One outlier of 45 (make demo): only p50 is resolved, and it holds.
		{"one outlier of 45", lagRun(45, 1, 20*time.Millisecond, 30*time.Millisecond), busy, false, false, ""},
		// 20 requests of 20 to 39 ms, all 4 ms late, move the p50 from 29
		// to 33 ms (12%), but the p50 of 20 such requests could be up to
		// 33 ms (rank 14.4) had they been on time: the sample cannot tell.
		{"unresolved p50 of 20", spreadRun(20, 4*time.Millisecond), busy, false, true,
			"the sample cannot tell the shift from the server's own spread"},
		// 15 requests resolve no quantile: nothing is judged.
		{"15 all late", lagRun(15, 15, 20*time.Millisecond, 50*time.Millisecond), busy, false, false, ""},
		// Most sends late: p50 moves too.
		{"all late", lagRun(200, 200, 20*time.Millisecond, 20*time.Millisecond), busy, true, false, "TTFT p50"},
		{"CPU saturated", lagRun(100, 0, 20*time.Millisecond, 0), selfcheck.HostLoad{WindowS: 5, Cores: 2, OwnCores: 1.9, OtherCores: 0.05, CPUPressure: 0.9},
			true, false, "load generator CPU saturated: 95% of 2 cores"},
	} {
		sc := c.m.CheckSelf(loadgen.Info{Host: c.host}, 0)
		if sc.Distorted != c.distorted || (len(sc.Warnings) > 0) != c.warned || c.distorted != (len(sc.Reasons) > 0) {
			t.Errorf("%s: distorted %v warned %q, want %v %v; %+v", c.name, sc.Distorted, sc.Warnings, c.distorted, c.warned, sc)
		}
		if all := strings.Join(append(sc.Reasons, sc.Warnings...), "\n"); c.contains != "" && !strings.Contains(all, c.contains) {
			t.Errorf("%s: %q lacks %q", c.name, all, c.contains)
		}
		if sc.MaxShift != selfcheck.DefaultMaxShift {
			t.Errorf("%s: stated share %v", c.name, sc.MaxShift)
		}
		s := c.m.Summary(loadgen.Info{Host: c.host}, schema.SummaryMeta{})
		if s.SelfCheck.Distorted != c.distorted || len(s.Warnings) != len(sc.Reasons)+len(sc.Warnings) {
			t.Errorf("%s: summary self-check %+v, warnings %q", c.name, s.SelfCheck, s.Warnings)
		}
	}
	// The stated share is a parameter: 40% lets the 33% shift through.
	if sc := lagRun(200, 30, 20*time.Millisecond, 10*time.Millisecond).CheckSelf(loadgen.Info{Host: busy}, 0.4); sc.Distorted || len(sc.Warnings) != 1 {
		t.Errorf("share 40%%: %+v", sc)
	}
	// Without lag-corrected histograms (results of an older tailgate) no
	// figure is judged.
	m := lagRun(200, 200, 20*time.Millisecond, 20*time.Millisecond)
	m.LagCorrected = map[string]*hdrhistogram.Histogram{}
	if sc := m.CheckSelf(loadgen.Info{Host: busy}, 0); sc.Distorted || len(sc.Shifts) != 0 {
		t.Errorf("no corrected histograms: %+v", sc)
	}
}

// spreadRun is n OK records whose server took 20 + i ms to the first
// token, each sent lag late.
func spreadRun(n int, lag time.Duration) *Metrics {
	m := NewMetrics()
	for i := 0; i < n; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		sent := at + lag
		ttft := time.Duration(20+i) * time.Millisecond
		r := &loadgen.Record{Intended: at, Sent: sent, End: sent + ttft + 10*time.Millisecond, OutputTokens: 2,
			Chunks: []loadgen.Chunk{{At: sent + ttft}, {At: sent + ttft + 10*time.Millisecond}}}
		r.Finalize()
		m.Add(r)
	}
	return m
}

// cut_at_end requests are counted apart from errors, and the summary says
// how many.
func TestSummaryCountsCutAtEndApart(t *testing.T) {
	t.Parallel()
	m := NewMetrics()
	add := func(kind loadgen.ErrorKind, n int) {
		for i := 0; i < n; i++ {
			r := &loadgen.Record{Intended: 0, Sent: time.Microsecond, End: 50 * time.Millisecond, ErrorKind: kind}
			if kind == loadgen.ErrNone {
				r.Chunks = []loadgen.Chunk{{At: 10 * time.Millisecond}}
			}
			r.Finalize()
			m.Add(r)
		}
	}
	add(loadgen.ErrNone, 8)
	add(loadgen.ErrCutAtEnd, 2)
	add(loadgen.ErrServer, 1)
	add(loadgen.ErrCancelled, 1)
	add(loadgen.ErrDropped, 1)
	s := m.Summary(loadgen.Info{Grace: 30 * time.Second}, schema.SummaryMeta{})
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
	t.Parallel()
	m := NewMetrics()
	// 10/s for 2 s: 20 due, 2 of them dropped; each answer takes 1 s, so
	// the measured window runs to 2.9 s.
	for i := 0; i < 20; i++ {
		at := time.Duration(i) * 100 * time.Millisecond
		r := &loadgen.Record{Intended: at, Sent: at, End: at + time.Second, Stage: []string{"lo", "hi"}[i/10],
			Chunks: []loadgen.Chunk{{At: at + 100*time.Millisecond}}}
		if i == 5 || i == 15 {
			r.ErrorKind, r.End = loadgen.ErrDropped, at
		}
		r.Finalize()
		m.Add(r)
	}
	info := loadgen.Info{Scheduled: loadgen.Window{From: 0, To: 2 * time.Second},
		StageScheduled: map[string]time.Duration{"lo": time.Second, "hi": time.Second},
		Stopped:        errors.New("disk full")}
	s := m.Summary(info, schema.SummaryMeta{})
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
	if tp := m.Summary(loadgen.Info{}, schema.SummaryMeta{}).Throughput; tp.OfferedPerS != 0 || tp.ScheduledWindowS != 0 || tp.RequestsPerS == 0 {
		t.Errorf("no schedule: %+v", tp)
	}
}
