package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// lagRecs is 300 records of stage "s": TTFT from the intended start is
// ttft for the first slow of them (sent lag after their intended start,
// so their TTFT less the lag is ttft − lag) and 50 ms for the rest.
func lagRecs(slow int, ttft, lag time.Duration) []loadgen.Record {
	var recs []loadgen.Record
	for i := 0; i < 300; i++ {
		start := time.Duration(i) * 10 * ms1
		r := okRec("s", start, 50*ms1, 200*ms1, 3)
		if i < slow {
			r = okRec("s", start, ttft, 200*ms1, 3)
			r.Sent = start + lag
		}
		r.Seq = int64(i)
		recs = append(recs, r)
	}
	return recs
}

// The lag-flip rule on constructed records: a FAIL or INCONCLUSIVE that
// the lag-only misses could turn is a client_bottleneck problem; one they
// could not turn, or a PASS, is not.
func TestLagFlip(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: ttft, metric: ttft, threshold: 100ms, target: 90%}\n")
	for _, c := range []struct {
		name    string
		recs    []loadgen.Record
		result  Status
		missed  uint64
		problem bool
	}{
		// 50 of 300 at 110 ms, each sent 30 ms late: all missed only by
		// their lag; counted as met, none missed: FAIL would be PASS.
		{"flips", lagRecs(50, 110*ms1, 30*ms1), Fail, 50, true},
		// The same 50 misses, sent 5 ms late: 105 ms less 5 is still over
		// 100 ms. The lag did not cause them.
		{"lag too small", lagRecs(50, 110*ms1, 5*ms1), Fail, 0, false},
		// 50 misses, 5 only by their lag (the first 5 sent 30 ms late):
		// 45 of 300 still FAIL 90%, so the verdict stands.
		{"stands", append(lagRecs(5, 110*ms1, 30*ms1)[:5], lagRecs(50, 110*ms1, 0)[5:]...), Fail, 5, false},
		// 30 misses of 300 is the limit itself: INCONCLUSIVE; all lag-only,
		// counted as met it would PASS.
		{"inconclusive flips", lagRecs(30, 110*ms1, 30*ms1), Inconclusive, 30, true},
		// A PASS never flips, though some missed by lag alone.
		{"pass", lagRecs(3, 110*ms1, 30*ms1), Pass, 3, false},
	} {
		rep := Assess(nil, spec, Input{Records: c.recs, Now: t0})
		v := one(t, rep.Verdicts)
		if v.Result != c.result || v.LagMissed != c.missed {
			t.Errorf("%s: %s lag-missed %d, want %s %d (%+v)", c.name, v.Result, v.LagMissed, c.result, c.missed, v)
		}
		var got []Problem
		for _, p := range rep.Problems {
			if p.Check == "client_bottleneck" {
				got = append(got, p)
			}
		}
		if (len(got) > 0) != c.problem {
			t.Errorf("%s: problems %v, want a client_bottleneck: %v", c.name, rep.Problems, c.problem)
			continue
		}
		if c.problem {
			d := got[0].Detail
			if got[0].Stage != "s" || !strings.Contains(d, "only by the load generator's schedule lag") || !strings.Contains(d, "would be PASS") ||
				!strings.Contains(v.Note, d) || rep.Status != ReportInvalid {
				t.Errorf("%s: problem %+v, note %q, report %s", c.name, got[0], v.Note, rep.Status)
			}
		}
	}
	// Metrics that do not run from the intended start never count lag.
	itl := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: itl, metric: itl, threshold: 1ms, target: 90%}\n")
	if v := one(t, Assess(nil, itl, Input{Records: lagRecs(50, 110*ms1, 30*ms1), Now: t0}).Verdicts); v.LagMissed != 0 {
		t.Errorf("itl counted lag: %+v", v)
	}
}
