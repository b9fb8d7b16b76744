package slo

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

const floorSpec = `
kind: SLO
apiVersion: tailgate/v1
name: floors
owner: o
goodput: {ttft: 500ms}
objectives:
  - name: ttft
    metric: ttft
    threshold: 500ms
    target: 99%
  - name: tokens
    metric: output_tokens_per_s
    threshold: 300
  - name: goodput
    metric: goodput_per_s
    threshold: 2
`

// steady is n successful records, one every gap, each with maxTokens
// asked and tokens given.
func steady(n int, gap time.Duration, maxTokens, tokens int) []loadgen.Record {
	var out []loadgen.Record
	for i := range n {
		r := okRec("s", time.Duration(i)*gap, 50*ms1, 200*ms1, tokens)
		r.MaxTokens = maxTokens
		out = append(out, r)
	}
	return out
}

func verdictOf(t *testing.T, rep *Report, name string) Verdict {
	t.Helper()
	for _, v := range rep.Verdicts {
		if v.Objective == name {
			return v
		}
	}
	t.Fatalf("no verdict %s in %+v", name, rep.Verdicts)
	return Verdict{}
}

func TestFloorBeyondDemandIsNotApplicable(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, floorSpec)
	recs := steady(100, 500*ms1, 128, 100) // 2 req/s, at most 128 tokens each
	p := &Plan{Stages: []Stage{{Name: "s"}}, Validity: defaultValidityTable}

	// Without a demand (run, validate): the floors are judged and fail.
	rep := Assess(p, spec, Input{Records: recs})
	if v := verdictOf(t, rep, "tokens"); v.Status != Fail {
		t.Errorf("tokens without demand: %s, want FAIL", v.Status)
	}
	if rep.Status != ReportFail {
		t.Errorf("report without demand: %s, want FAIL", rep.Status)
	}

	rep = Assess(p, spec, Input{Records: recs, Demand: map[string]*Demand{"s": {OfferedPerS: 2}}})
	tok := verdictOf(t, rep, "tokens")
	// 100 requests over the 49.7 s window (the last ends 200 ms after
	// its start at 49.5 s): at most 100 × 128 / 49.7 = 257.5 tok/s.
	want := "offered 2 req/s (100 requests in the 49.7 s measured window) × max 128 tokens can reach at most 258 tok/s"
	if tok.Status != NotApplicable || !strings.Contains(tok.Note, want) {
		t.Errorf("tokens: %s %q, want N/A with %q", tok.Status, tok.Note, want)
	}
	if math.Abs(tok.ReachablePerS-12800/49.7) > 1e-9 || tok.Offered != 100 {
		t.Errorf("tokens reachable %g of %d offered, want 257.5 of 100", tok.ReachablePerS, tok.Offered)
	}
	// 100 offered over 49.7 s is 2.01 req/s: a floor of 2 is in reach.
	gp := verdictOf(t, rep, "goodput")
	if gp.Status != Pass || math.Abs(gp.ReachablePerS-100/49.7) > 1e-9 {
		t.Errorf("goodput: %s reach %g %q, want PASS, reach 2.01", gp.Status, gp.ReachablePerS, gp.Note)
	}
	// A floor of 2 over a window that only 1.99 req/s could fill: N/A.
	late := steady(100, 500*ms1, 128, 100)
	late[99].End += 600 * ms1 // the window grows to 50.3 s
	rep2 := Assess(p, spec, Input{Records: late, Demand: map[string]*Demand{"s": {OfferedPerS: 2}}})
	if v := verdictOf(t, rep2, "goodput"); v.Status != NotApplicable || !strings.Contains(v.Note, "can reach at most 1.99 req/s") {
		t.Errorf("goodput over the longer window: %s %q, want N/A", v.Status, v.Note)
	}
	if rep.Status == ReportFail {
		t.Errorf("report with demand: %s (%+v), want no FAIL from floors out of reach", rep.Status, rep.Counts)
	}
	if rep.Counts[NotApplicable] != 1 {
		t.Errorf("counts %v, want one N/A", rep.Counts)
	}

	// Enough demand: the floor applies again and is judged.
	rep = Assess(p, spec, Input{Records: steady(400, 100*ms1, 128, 100), Demand: map[string]*Demand{"s": {OfferedPerS: 10}}})
	if v := verdictOf(t, rep, "tokens"); v.Status != Pass || math.Abs(v.ReachablePerS-400*128/40.1) > 1e-9 {
		t.Errorf("tokens at 10 req/s: %s reach %g, want PASS reach 1277 (400 × 128 over 40.1 s)", v.Status, v.ReachablePerS)
	}
	// Reachable but not reached: a floor in reach that fails is a FAIL.
	rep = Assess(p, spec, Input{Records: steady(400, 100*ms1, 128, 20), Demand: map[string]*Demand{"s": {OfferedPerS: 10}}})
	if v := verdictOf(t, rep, "tokens"); v.Status != Fail {
		t.Errorf("tokens at 10 req/s × 20 tokens: %s, want FAIL", v.Status)
	}
}

func TestFloorWithoutMaxTokensApplies(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, floorSpec)
	recs := steady(100, 500*ms1, 0, 100) // no max_tokens sent: no bound
	p := &Plan{Stages: []Stage{{Name: "s", Objectives: []string{"tokens"}}}, Validity: defaultValidityTable}
	rep := Assess(p, spec, Input{Records: recs, Demand: map[string]*Demand{"s": {OfferedPerS: 2}}})
	if v := verdictOf(t, rep, "tokens"); v.Status != Fail {
		t.Errorf("tokens with no max_tokens: %s %q, want FAIL (no bound known)", v.Status, v.Note)
	}
}

func TestOnlyNotApplicableIsNotPass(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, floorSpec)
	p := &Plan{Stages: []Stage{{Name: "s", Objectives: []string{"tokens"}}}, Validity: defaultValidityTable}
	rep := Assess(p, spec, Input{Records: steady(100, 500*ms1, 128, 100), Demand: map[string]*Demand{"s": {OfferedPerS: 2}}})
	if rep.Status != ReportInconclusive {
		t.Errorf("report of only N/A: %s, want INCONCLUSIVE (nothing decided from nothing)", rep.Status)
	}
}

func TestFloorShareOfOffered(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
apiVersion: tailgate/v1
name: share
owner: o
goodput: {ttft: 500ms}
objectives:
  - name: goodput
    metric: goodput_per_s
    threshold: 95%
    share_of_offered: true
`)
	if !spec.Objectives[0].ShareOfOffered {
		t.Fatal("share_of_offered not read")
	}
	recs := steady(90, 100*ms1, 128, 10)
	for i := range 10 { // 10 of 100 failed: 90% good
		recs = append(recs, errRec("s", time.Duration(90+i)*100*ms1, loadgen.ErrServer))
	}
	p := &Plan{Stages: []Stage{{Name: "s"}}, Validity: defaultValidityTable}
	// A demand never sets a share aside: it scales with the load.
	v := one(t, Assess(p, spec, Input{Records: recs, Demand: map[string]*Demand{"s": {OfferedPerS: 0.1}}}).Verdicts)
	if v.Status != Fail || v.Offered != 100 || v.Measured != 0.9 || v.MeasuredText() != "90% of offered" {
		t.Errorf("share 90%% of 95%%: %s offered %d measured %g %q, want FAIL 100 0.9", v.Status, v.Offered, v.Measured, v.MeasuredText())
	}
	v = one(t, Assess(p, spec, Input{Records: steady(100, 100*ms1, 128, 10)}).Verdicts)
	if v.Status != Pass || v.ThresholdLabel() != "≥ 95% of offered" {
		t.Errorf("share 100%%: %s %q, want PASS", v.Status, v.ThresholdLabel())
	}
}

func TestShareOfOfferedParse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{"metric: output_tokens_per_s\n    threshold: 0.9", "only requests_per_s and goodput_per_s"},
		{"metric: requests_per_s\n    threshold: 5", "not a fraction in (0, 1]"},
	} {
		_, err := ParseSpec("slo.yaml", []byte("kind: SLO\napiVersion: tailgate/v1\nname: x\nowner: o\nobjectives:\n  - name: f\n    "+c.body+"\n    share_of_offered: true\n"))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err %v, want %q", c.body, err, c.want)
		}
	}
}
