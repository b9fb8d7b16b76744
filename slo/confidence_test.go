package slo

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Tail values checked against exact sums of binomial terms (Python's
// math.comb).
func TestBinomTails(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		k, n    uint64
		p       float64
		cdf, sf float64
	}{
		{4, 1000, 0.01, 0.02868639999900447, 0.9899273452279858},
		{17, 1000, 0.01, 0.9861674182699829, 0.026391035409616403},
		{0, 299, 0.01, 0.04953625663766235, 1},
		{5, 10, 0.5, 0.623046875, 0.623046875},
		{1, 100, 0.01, 0.7357619789229557, 0.6339676587267709},
	} {
		if got := BinomCDF(c.k, c.n, c.p); math.Abs(got-c.cdf) > 1e-9*max(1, c.cdf) {
			t.Errorf("P(X ≤ %d | %d, %g) = %.15g, want %.15g", c.k, c.n, c.p, got, c.cdf)
		}
		if got := BinomSF(c.k, c.n, c.p); math.Abs(got-c.sf) > 1e-9 {
			t.Errorf("P(X ≥ %d | %d, %g) = %.15g, want %.15g", c.k, c.n, c.p, got, c.sf)
		}
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		k, n uint64
		p0   float64
		want Status
		need uint64
	}{
		{0, 50, 0.01, Inconclusive, 299},  // ⌈ln 0.05 / ln 0.99⌉
		{0, 299, 0.01, Pass, 0},           // 0.99²⁹⁹ = 0.0495
		{0, 298, 0.01, Inconclusive, 299}, // 0.99²⁹⁸ = 0.0500
		{4, 1000, 0.01, Pass, 0},          // P(X ≤ 4) = 0.029
		{5, 1000, 0.01, Inconclusive, 1182},
		{17, 1000, 0.01, Fail, 0},         // P(X ≥ 17) = 0.026
		{2, 100, 0.01, Inconclusive, 450}, // 2% observed against 1%
		{10, 1000, 0.01, Inconclusive, 0}, // the limit itself: nothing decides
		{0, 10, 0.5, Pass, 0},
		{0, 3, 0, Pass, 0}, {1, 3, 0, Fail, 0}, // "no misses at all": the sample as is
	} {
		s, need := Decide(c.k, c.n, c.p0, 0.95)
		if s != c.want || need != c.need {
			t.Errorf("%d of %d against %g: %s need %d, want %s need %d", c.k, c.n, c.p0, s, need, c.want, c.need)
		}
	}
	if s, _ := Decide(0, 0, 0.01, 0.95); s != NoData {
		t.Errorf("no events: %s", s)
	}
	// A higher confidence needs more: 0 misses of 299 decide 99% at 95%,
	// not at 99%.
	if s, need := Decide(0, 299, 0.01, 0.99); s != Inconclusive || need != 459 {
		t.Errorf("99%% confidence: %s need %d, want INCONCLUSIVE need 459", s, need)
	}
}

func TestMinDecisive(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		p0, conf float64
		want     uint64
	}{{0.01, 0.95, 299}, {0.001, 0.95, 2995}, {0.05, 0.95, 59}, {0.01, 0.99, 459}, {0, 0.95, 0}} {
		if got := MinDecisive(c.p0, c.conf); got != c.want {
			t.Errorf("MinDecisive(%g, %g) = %d, want %d", c.p0, c.conf, got, c.want)
		}
	}
}

// A p99 objective judged on 50 requests, none missing, is INCONCLUSIVE and
// says how many requests would decide it; the report exits 4.
func TestP99On50RequestsInconclusive(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: p99, metric: ttft, threshold: 500ms, target: 99%}\n")
	var recs []loadgen.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, okRec("s", time.Duration(i)*ms1, 100*ms1, 200*ms1, 5))
	}
	rep := Assess(nil, spec, Input{Records: recs})
	v := one(t, rep.Verdicts)
	if v.Status != Inconclusive || v.NeedRequests != 299 || v.Confidence != 0.95 {
		t.Fatalf("%+v", v)
	}
	if want := "INCONCLUSIVE: 50 requests, 0 missed; 299 would decide at 95%"; !strings.Contains(v.Note, want) {
		t.Errorf("note %q lacks %q", v.Note, want)
	}
	if rep.Status != ReportInconclusive || rep.ExitCode != ExitInconclusive {
		t.Errorf("report %s exit %d, want %s exit %d", rep.Status, rep.ExitCode, ReportInconclusive, ExitInconclusive)
	}
	// 299 decide it.
	for i := 50; i < 299; i++ {
		recs = append(recs, okRec("s", time.Duration(i)*ms1, 100*ms1, 200*ms1, 5))
	}
	if rep := Assess(nil, spec, Input{Records: recs}); rep.Status != ReportPass || rep.Verdicts[0].NeedRequests != 0 {
		t.Errorf("299 requests: %s %+v", rep.Status, rep.Verdicts[0])
	}
}

// Precedence of a report's status: a failure outranks an inconclusive
// verdict; a waiver covers an inconclusive one.
func TestInconclusivePrecedenceAndWaiver(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n"+
		"  - {name: p99, metric: ttft, threshold: 500ms, target: 99%}\n"+
		"  - {name: p50, metric: ttft, threshold: 50ms, target: 50%}\n")
	var recs []loadgen.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, okRec("s", time.Duration(i)*ms1, 100*ms1, 200*ms1, 5))
	}
	rep := Assess(nil, spec, Input{Records: recs})
	if rep.Status != ReportFail || rep.ExitCode != ExitFailed || rep.Counts[Inconclusive] != 1 || rep.Counts[Fail] != 1 {
		t.Errorf("fail + inconclusive: %s exit %d %v", rep.Status, rep.ExitCode, rep.Counts)
	}
	w := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n"+
		"  - {name: p99, metric: ttft, threshold: 500ms, target: 99%}\n"+
		"waivers:\n  - {objective: p99, owner: ann, reason: small run, expires: 2099-01-01}\n")
	rep = Assess(nil, w, Input{Records: recs, Now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)})
	if v := rep.Verdicts[0]; v.Result != Inconclusive || v.Status != Waived || rep.Status != ReportPass {
		t.Errorf("waived inconclusive: %s %+v", rep.Status, v)
	}
}

func TestConfidenceSetting(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nconfidence: 99%\nobjectives:\n  - {name: p99, metric: ttft, threshold: 500ms, target: 99%}\n")
	if spec.Confidence != 0.99 || ConfidenceOf(spec) != 0.99 || ConfidenceOf(&Spec{}) != DefaultConfidence {
		t.Fatalf("confidence %v", spec.Confidence)
	}
	for _, bad := range []string{"0.3", "100%", "0.9999"} {
		_, err := ParseSpec("slo.yaml", []byte("kind: SLO\nname: x\nowner: o\nconfidence: "+bad+"\nobjectives:\n  - {name: p99, metric: ttft, threshold: 500ms, target: 99%}\n"))
		if err == nil || !strings.Contains(err.Error(), "slo.yaml:4") || !strings.Contains(err.Error(), "confidence") {
			t.Errorf("confidence %s: %v", bad, err)
		}
	}
}
