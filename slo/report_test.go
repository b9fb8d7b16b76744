package slo

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

func reportPlan(t *testing.T) (*Plan, *Spec) {
	t.Helper()
	spec := mustSpec(t, `
kind: SLO
name: x
owner: o
objectives:
  - {name: lat, metric: ttft, threshold: 100ms, target: 1}
  - {name: e, metric: error_rate, threshold: 10%}
`)
	p, err := ParsePlan("plan.yaml", []byte(`
kind: Plan
name: p
target: http://127.0.0.1:8000
model: m
slo: s.yaml
mix: m.yaml
stages:
  - {name: normal, rate: 1, duration: 10s}
  - {name: peak, rate: 2, duration: 10s, objectives: [e]}
  - {name: failover, manual: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Check(spec); err != nil {
		t.Fatal(err)
	}
	return p, spec
}

func stageRecs(stage string, n int, ttft time.Duration) []loadgen.Record {
	var out []loadgen.Record
	for i := 0; i < n; i++ {
		r := okRec(stage, time.Duration(i)*100*ms1, ttft, time.Second, 3)
		r.Seq = int64(i)
		out = append(out, r)
	}
	return out
}

func TestAssessExitCodes(t *testing.T) {
	t.Parallel()
	p, spec := reportPlan(t)
	// 30 requests without an error decide "≤ 10% errors" at 95% (0.9³⁰ =
	// 0.04); 20 would not.
	passing := append(stageRecs("normal", 30, 50*ms1), stageRecs("peak", 30, 500*ms1)...)
	manualPass := []ManualRecord{{Stage: "failover", Pass: true, By: "carol", At: t0}}

	r := Assess(p, spec, Input{Records: passing, Now: t0, Manual: manualPass})
	if r.ExitCode != ExitOK || r.Status != ReportPass || len(r.Verdicts) != 4 {
		t.Fatalf("passing: %d %s %+v %+v", r.ExitCode, r.Status, r.Verdicts, r.Problems)
	}
	// peak judges only e: its slow TTFT does not count.
	if r.Verdicts[2].Stage != "peak" || r.Verdicts[2].Objective != "e" {
		t.Fatalf("order: %+v", r.Verdicts)
	}
	if r.Verdicts[3].Source != "recorded by carol at 2026-06-01T12:00:00Z" || r.Stages[2].ManualResult == nil {
		t.Fatalf("manual: %+v", r.Verdicts[3])
	}

	// Manual stage not recorded yet: pending, exit 1.
	r = Assess(p, spec, Input{Records: passing, Now: t0})
	if r.ExitCode != ExitFailed || r.Verdicts[3].Status != Pending || !strings.Contains(r.Verdicts[3].Note, "--record failover=pass") {
		t.Fatalf("pending: %d %+v", r.ExitCode, r.Verdicts[3])
	}
	// Recorded as failed: exit 1; waived: exit 0.
	failed := []ManualRecord{{Stage: "failover", Pass: false, By: "carol", At: t0}}
	if r = Assess(p, spec, Input{Records: passing, Now: t0, Manual: failed}); r.ExitCode != ExitFailed {
		t.Fatalf("manual fail: %d", r.ExitCode)
	}
	p.Waivers = []Waiver{{Objective: "manual", Stage: "failover", Owner: "dave", Reason: "no replica", Expires: t0.Add(time.Hour), ExpiresText: "x"}}
	if r = Assess(p, spec, Input{Records: passing, Now: t0, Manual: failed}); r.ExitCode != ExitOK || r.Verdicts[3].Status != Waived {
		t.Fatalf("manual waived: %d %+v", r.ExitCode, r.Verdicts[3])
	}
	p.Waivers = nil

	// One slow request in normal: exit 1.
	slow := append(stageRecs("normal", 19, 50*ms1), okRec("normal", 0, 100*ms1+us1, time.Second, 2))
	slow = append(slow, stageRecs("peak", 20, 50*ms1)...)
	if r = Assess(p, spec, Input{Records: slow, Now: t0, Manual: manualPass}); r.ExitCode != ExitFailed || r.Counts[Fail] != 1 {
		t.Fatalf("one slow: %d %+v", r.ExitCode, r.Counts)
	}

	// Server unreachable in peak: exit 3.
	var down []loadgen.Record
	for i := 0; i < 10; i++ {
		down = append(down, errRec("peak", time.Duration(i)*ms1, loadgen.ErrConnect))
	}
	r = Assess(p, spec, Input{Records: append(stageRecs("normal", 20, 50*ms1), down...), Now: t0, Manual: manualPass})
	if r.ExitCode != ExitInvalid || r.Status != ReportInvalid || r.Problems[0].Check != "unreachable" {
		t.Fatalf("unreachable: %d %+v", r.ExitCode, r.Problems)
	}
	// A stage with no records: invalid (no requests; NO_DATA verdicts).
	r = Assess(p, spec, Input{Records: stageRecs("normal", 20, 50*ms1), Now: t0, Manual: manualPass})
	if r.ExitCode != ExitInvalid || r.Counts[NoData] != 1 {
		t.Fatalf("missing stage: %d %+v %+v", r.ExitCode, r.Counts, r.Problems)
	}
	// No plan: stages from the records, every objective applies.
	r = Assess(nil, spec, Input{Records: passing, Now: t0})
	if len(r.Stages) != 2 || r.Stages[0].Name != "normal" || r.Stages[1].Name != "peak" || r.ExitCode != ExitFailed {
		t.Fatalf("no plan: %+v %d", r.Stages, r.ExitCode)
	}
}

func TestCheckValidity(t *testing.T) {
	t.Parallel()
	v := defaultValidityTable
	// The opt-in bounds a plan may set.
	v.MaxErrorRate, v.MaxScheduleLag, v.MaxClientCPU = MustDecimal("50%"), 50*ms1, MustDecimal("90%")
	ok := stageRecs("s", 100, 10*ms1)
	if p := checkValidity("s", ok, v, 0.2); len(p) != 0 {
		t.Fatalf("healthy: %v", p)
	}
	if p := checkValidity("none", ok, v, -1); len(p) != 1 || p[0].Check != "no_requests" {
		t.Fatalf("empty: %v", p)
	}
	// Dropped: 1 of 100 is at the 1% bound; 2 of 100 is over.
	withDrops := func(n int) []loadgen.Record {
		r := append([]loadgen.Record(nil), ok[:100-n]...)
		for i := 0; i < n; i++ {
			r = append(r, errRec("s", 0, loadgen.ErrDropped))
		}
		return r
	}
	if p := checkValidity("s", withDrops(1), v, -1); len(p) != 0 {
		t.Fatalf("1%% dropped: %v", p)
	}
	if p := checkValidity("s", withDrops(2), v, -1); len(p) != 1 || p[0].Check != "dropped" {
		t.Fatalf("2%% dropped: %v", p)
	}
	// Errors: half of the sent requests is at the 50% bound; more is over.
	half := append(append([]loadgen.Record(nil), ok[:50]...), make([]loadgen.Record, 0)...)
	for i := 0; i < 50; i++ {
		half = append(half, errRec("s", 0, loadgen.ErrServer))
	}
	if p := checkValidity("s", half, v, -1); len(p) != 0 {
		t.Fatalf("50%% errors: %v", p)
	}
	if p := checkValidity("s", append(half, errRec("s", 0, loadgen.ErrTimeout)), v, -1); len(p) != 1 || p[0].Check != "errors" {
		t.Fatalf("51%% errors: %v", p)
	}
	// Refusals for length: 1 of 100 is at the 1% bound; 2 of 100 is over,
	// and the problem names the count, the first calls and the server's
	// words. The error share is well within its own bound.
	withOverflow := func(n int) []loadgen.Record {
		r := append([]loadgen.Record(nil), ok[:100-n]...)
		for i := 0; i < n; i++ {
			e := errRec("s", 0, loadgen.ErrContextLength)
			e.Seq, e.Error = int64(200+i), "HTTP 400: This model's maximum context length is 128 tokens"
			r = append(r, e)
		}
		return r
	}
	if p := checkValidity("s", withOverflow(1), v, -1); len(p) != 0 {
		t.Fatalf("1%% context_length: %v", p)
	}
	p := checkValidity("s", withOverflow(2), v, -1)
	if len(p) != 1 || p[0].Check != "context_length" {
		t.Fatalf("2%% context_length: %v", p)
	}
	for _, want := range []string{"2 of 100", "request 200: HTTP 400: This model's maximum context length is 128 tokens", "request 201:", "max_context_length"} {
		if !strings.Contains(p[0].Detail, want) {
			t.Errorf("context_length problem %q lacks %q", p[0].Detail, want)
		}
	}
	lax := v
	lax.MaxContextLength = MustDecimal("5%")
	if p := checkValidity("s", withOverflow(2), lax, -1); len(p) != 0 {
		t.Fatalf("2%% context_length under a 5%% bound: %v", p)
	}
	// Late sends.
	late := append([]loadgen.Record(nil), ok...)
	for i := 0; i < 2; i++ {
		late[i].Sent = late[i].Intended + 51*ms1
	}
	if p := checkValidity("s", late, v, -1); len(p) != 1 || !strings.Contains(p[0].Detail, "schedule lag") {
		t.Fatalf("late: %v", p)
	}
	if p := checkValidity("s", ok, v, 0.95); len(p) != 1 || !strings.Contains(p[0].Detail, "CPU") {
		t.Fatalf("cpu: %v", p)
	}
	if p := checkValidity("s", ok, v, 0.90); len(p) != 0 {
		t.Fatalf("cpu at bound: %v", p)
	}
}

// checkValidity is the problems Assess finds with stage's records under
// bounds v (no objectives), the generator's CPU use cpu (negative:
// unknown).
func checkValidity(stage string, recs []loadgen.Record, v Validity, cpu float64) []Problem {
	in := Input{Records: recs}
	if cpu >= 0 {
		in.ClientCPU = map[string]float64{stage: cpu}
	}
	return Assess(&Plan{Stages: []Stage{{Name: stage}}, Validity: v}, &Spec{}, in).Problems
}

// Bounds saved before max_context_length existed read back with its
// default; a saved bound reads back as it was.
func TestValidityContextLengthJSON(t *testing.T) {
	t.Parallel()
	var old Validity
	if err := json.Unmarshal([]byte(`{"max_error_rate":"5%","max_dropped":"1%","max_cut_at_end":"5%","max_distortion":"10%"}`), &old); err != nil {
		t.Fatal(err)
	}
	if old.MaxContextLength != defaultValidityTable.MaxContextLength {
		t.Errorf("old bounds: max_context_length %s, want the default %s", old.MaxContextLength, defaultValidityTable.MaxContextLength)
	}
	v := defaultValidityTable
	v.MaxContextLength = MustDecimal("3%")
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var back Validity
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MaxContextLength != v.MaxContextLength {
		t.Errorf("round trip of %s: max_context_length %s, want 3%%", b, back.MaxContextLength)
	}
}
