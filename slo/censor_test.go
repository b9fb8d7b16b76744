package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// cut is a request cut (kind) after running for elapsed from its intended
// start, with no token yet.
func cut(kind loadgen.ErrorKind, elapsed time.Duration) loadgen.Record {
	return loadgen.Record{Stage: "s", Intended: 0, Sent: 0, End: elapsed, ErrorKind: kind, Error: string(kind)}
}

// Requests cut at the end, timed out or cancelled after a latency
// threshold are known misses, not silent exclusions: 90 fast survivors
// and 10 cut at 3 s fail a p95 TTFT ≤ 1 s (survivors alone would pass).
func TestCensoredRequestsAreMissesAfterTheThreshold(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: t
owner: o
objectives:
  - {name: ttft, metric: ttft, threshold: 1s, target: 95%}
  - {name: e2e, metric: e2e, threshold: 5s, target: 95%}
  - {name: itl, metric: itl, threshold: 1s, target: 95%}
`)
	var recs []loadgen.Record
	for range 90 {
		recs = append(recs, okRec("s", 0, 100*ms1, 500*ms1, 5))
	}
	for _, k := range []loadgen.ErrorKind{loadgen.ErrCutAtEnd, loadgen.ErrTimeout, loadgen.ErrCancelled} {
		for range 3 {
			recs = append(recs, cut(k, 3*time.Second))
		}
	}
	recs = append(recs, cut(loadgen.ErrCutAtEnd, 3*time.Second))
	vs := judgeStage(spec, "s", recs, Input{})
	ttft, e2e, itl := vs[0], vs[1], vs[2]
	if ttft.Status != Fail || ttft.Total != 100 || ttft.Good != 90 || ttft.CensoredMisses != 10 || ttft.Censored != 0 ||
		!strings.Contains(ttft.Note, "10 requests cut at the end, timed out or cancelled after 1s counted as misses") {
		t.Errorf("ttft: %+v", ttft)
	}
	if ttft.QuantileMs == nil || *ttft.QuantileMs < 1000 {
		t.Errorf("ttft p95 %v: the misses must show in the quantile", ttft.QuantileMs)
	}
	// E2E ≤ 5 s: cut at 3 s, their E2E is unknown: counted apart, and had
	// they missed the objective would not pass (90 of 100 < 95%): the
	// survivors' PASS is not decided, INCONCLUSIVE.
	if e2e.Status != Inconclusive || e2e.Total != 90 || e2e.Censored != 10 || e2e.CensoredMisses != 0 ||
		!strings.Contains(e2e.Note, "10 requests cut at the end, timed out or cancelled before 5s are not counted") ||
		!strings.Contains(e2e.Note, "this sample does not decide it") {
		t.Errorf("e2e: %+v", e2e)
	}
	// ITL is not measured from the intended start: no censoring.
	if itl.Censored != 0 || itl.CensoredMisses != 0 {
		t.Errorf("itl: %+v", itl)
	}
	// A cut request whose first token came before the cut has a known TTFT.
	seen := cut(loadgen.ErrCutAtEnd, 3*time.Second)
	seen.Chunks = []loadgen.Chunk{{At: 200 * ms1, Tokens: 1}}
	v := judgeStage(spec, "s", []loadgen.Record{seen}, Input{})[0]
	if v.Total != 1 || v.Good != 1 || v.CensoredMisses != 0 {
		t.Errorf("seen ttft: %+v", v)
	}
	// Operate's events are the judge's: Events agrees.
	o, _ := spec.Objective("ttft")
	var ev Events
	for i := range recs {
		e := o.Events(&recs[i])
		ev.Good += e.Good
		ev.Bad += e.Bad
	}
	if ev.Good != ttft.Good || ev.Total() != ttft.Total {
		t.Errorf("events %+v, judge %d of %d", ev, ttft.Good, ttft.Total)
	}
}

// A goodput rule with a TPOT limit cannot judge answers that came as one
// body: NO_DATA naming the limit, not 0/s FAIL.
func TestUnstreamedGoodputIsNoData(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: t
owner: o
goodput: {ttft: 1s, tpot: 50ms}
objectives:
  - {name: good, metric: goodput_per_s, threshold: 1}
`)
	var recs []loadgen.Record
	for i := range 20 {
		r := okRec("s", time.Duration(i)*100*ms1, 300*ms1, 300*ms1, 1)
		r.Unstreamed, r.OutputTokens = true, 40
		recs = append(recs, r)
	}
	v := judgeStage(spec, "s", recs, Input{})[0]
	if v.Status != NoData || !strings.Contains(v.Note, "tpot ≤ 50ms") || !strings.Contains(v.Note, "20 successful answers came as one body") {
		t.Errorf("unstreamed goodput: %+v", v)
	}
	// Streamed answers are judged as before.
	var streamed []loadgen.Record
	for i := range 20 {
		streamed = append(streamed, okRec("s", time.Duration(i)*100*ms1, 100*ms1, 300*ms1, 5))
	}
	if v := judgeStage(spec, "s", streamed, Input{})[0]; v.Status != Pass || v.Good != 20 {
		t.Errorf("streamed goodput: %+v", v)
	}
}
