package slo

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// TestMetricTable: every row of loadgen's metric table is an objective
// metric of kind latency that parses, is listed in the unknown-metric
// error, and is judged from a streamed record; and every row is a
// latency_ms key of the summary with a definition.
func TestMetricTable(t *testing.T) {
	t.Parallel()
	r := okRec("s", 0, 100*ms1, 400*ms1, 4)
	r.Sent = 2 * ms1
	sum := measure.NewMetrics()
	sum.Add(&r)
	s := sum.Summary(loadgen.Info{}, schema.SummaryMeta{})
	_, err := ParseSpec("slo.yaml", []byte("kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: o, metric: nope, threshold: 1s, target: 1}\n"))
	if err == nil {
		t.Fatal("unknown metric parsed")
	}
	for _, m := range measure.LatencyMetrics() {
		if Metric(m.Name).Kind() != KindLatency {
			t.Errorf("%s: kind %q", m.Name, Metric(m.Name).Kind())
		}
		if !strings.Contains(err.Error(), m.Name+",") {
			t.Errorf("%s missing from the known metrics: %v", m.Name, err)
		}
		spec := latencySpec(t, m.Name, "1s", "100%")
		v := one(t, judgeStage(spec, "s", []loadgen.Record{r}, Input{}, "o"))
		if v.Metric != Metric(m.Name) || v.Total == 0 || v.Status != Pass {
			t.Errorf("%s not judged: %+v", m.Name, v)
		}
		if h, ok := s.LatencyMs[m.Name]; !ok || h.Count == 0 {
			t.Errorf("%s: latency_ms %+v (present %v)", m.Name, h, ok)
		}
		if s.Definitions[m.Name] == "" || m.Events == "" {
			t.Errorf("%s: no definition or event name", m.Name)
		}
	}
	if len(s.LatencyMs) != len(measure.LatencyMetrics()) {
		t.Errorf("latency_ms has %d keys, the table %d rows", len(s.LatencyMs), len(measure.LatencyMetrics()))
	}
}

// TestUnstreamedNoStreamMetrics: answers that came as one body give TTFT
// and E2E but no ICL, ITL or TPOT: those objectives are NO_DATA saying why,
// never PASS at 0 µs.
func TestUnstreamedNoStreamMetrics(t *testing.T) {
	t.Parallel()
	var recs []loadgen.Record
	for i := 0; i < 10; i++ {
		// One body at 300 ms holding 50 tokens: one "chunk" at the end.
		r := loadgen.Record{Stage: "s", Intended: time.Duration(i) * ms1, Sent: time.Duration(i) * ms1,
			End: time.Duration(i)*ms1 + 300*ms1, OutputTokens: 50, Unstreamed: true, TokenSource: loadgen.TokensFromUsage}
		r.Chunks = []loadgen.Chunk{{At: r.End, Tokens: 50}}
		recs = append(recs, r)
	}
	for _, c := range []struct {
		metric string
		want   Status
	}{{"ttft", Pass}, {"e2e", Pass}, {"tpot", NoData}, {"itl", NoData}, {"icl", NoData}} {
		v := one(t, judgeStage(latencySpec(t, c.metric, "100ms", "90%"), "s", recs, Input{}, "o"))
		if c.want == Pass {
			c.want = Fail // 300 ms > 100 ms: judged, and failed
		}
		if v.Status != c.want {
			t.Errorf("%s: %s, want %s (%+v)", c.metric, v.Status, c.want, v)
		}
		if c.want == NoData && !strings.Contains(v.Note, "no streamed responses: "+strings.ToUpper(c.metric)+" needs a stream") {
			t.Errorf("%s note: %q", c.metric, v.Note)
		}
	}
	// One streamed response among them: judged on it alone, and the note
	// says how many gave nothing.
	recs = append(recs, okRec("s", 0, 50*ms1, 50*ms1+9*10*ms1, 10))
	v := one(t, judgeStage(latencySpec(t, "tpot", "10ms", "100%"), "s", recs, Input{}, "o"))
	if v.Status != Pass || v.Total != 1 || !strings.Contains(v.Note, "10 of 11 successful responses came unstreamed") {
		t.Errorf("mixed: %+v", v)
	}
}

// TestQueueDelayVLLMBuckets: vLLM's first queue bucket is 300 ms. A
// quantile in it prints as "≤ 300ms, first bucket"; a threshold inside it
// is exact where the bucket decides and interpolated (and said to be)
// where it does not; missing telemetry gives NO_DATA with its reason.
func TestQueueDelayVLLMBuckets(t *testing.T) {
	t.Parallel()
	q := queueHist(qb(0.3, 990), qb(0.5, 1000), qb(0.8, 1000), qb(inf, 1000))
	q.Source = "vllm:request_queue_time_seconds"
	v := one(t, judgeStage(latencySpec(t, "queue_delay", "300ms", "99%"), "s", nil, queueIn(q), "o"))
	if v.Status != Inconclusive || v.Good != 990 || v.MeasuredText() != "99% (p99 ≤ 300ms, first bucket)" { // at the target: undecided
		t.Errorf("first bucket: %q %+v", v.MeasuredText(), v)
	}
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "300ms", "99.5%"), "s", nil, queueIn(q), "o"))
	if v.Status != Fail || v.MeasuredText() != "99% (p99.5 in 300ms–500ms bucket)" {
		t.Errorf("second bucket: %q %+v", v.MeasuredText(), v)
	}
	// 100 ms is below the first bound: 0 to 990 of 1000 met it. 50% is
	// decided by neither end, and inside the first bucket the buckets say
	// nothing (with no queueing every event is there): no verdict, and
	// the note says why.
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "100ms", "50%"), "s", nil, queueIn(q), "o"))
	if v.Status != NoData || !strings.Contains(v.Note, "cannot judge below the first bucket") || !strings.Contains(v.Note, "first bound 300ms") {
		t.Errorf("below the first bucket: %+v", v)
	}
	// 400 ms inside (300ms, 500ms]: 990 to 1000 met it; 99.5% is decided
	// by neither end: interpolated, 990 + 10·100/200 = 995.
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "400ms", "99.5%"), "s", nil, queueIn(q), "o"))
	if v.Status != Inconclusive || v.Good != 995 || !strings.Contains(v.Note, "estimated") || !strings.Contains(v.Note, "(300ms, 500ms]") {
		t.Errorf("interpolated: %+v", v)
	}
	// 99.5% is missed even if the whole bucket met it: an exact FAIL.
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "100ms", "99.5%"), "s", nil, queueIn(q), "o"))
	if v.Status != Fail || strings.Contains(v.Note, "estimate") {
		t.Errorf("decided: %+v", v)
	}
	// Every event in the +Inf bucket.
	allInf := queueHist(qb(0.3, 0), qb(inf, 10))
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "300ms", "99%"), "s", nil, queueIn(allInf), "o"))
	if v.Status != Fail || v.MeasuredText() != "0% (p99 > 300ms, +Inf bucket)" {
		t.Errorf("+Inf: %q %+v", v.MeasuredText(), v)
	}
	missing := &promhist.Histogram{Source: "llama.cpp", Missing: "llama.cpp exposes no queue-time histogram"}
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "300ms", "99%"), "s", nil, queueIn(missing), "o"))
	if v.Status != NoData || !strings.Contains(v.Note, "llama.cpp exposes no queue-time histogram") {
		t.Errorf("missing: %+v", v)
	}
	// Triton's mean-only counter: no buckets to judge on.
	meanOnly := &promhist.Histogram{Source: "nv_inference_queue_duration_us", Buckets: []promhist.Bucket{qb(inf, 4)}, Sum: 2, Count: 4,
		Missing: "mean only"}
	v = one(t, judgeStage(latencySpec(t, "queue_delay", "300ms", "99%"), "s", nil, queueIn(meanOnly), "o"))
	if v.Status != NoData || !strings.HasSuffix(v.Note, ": mean only") {
		t.Errorf("mean only: %+v", v)
	}
	if bucketBound(0.3) != 300*ms1 || bucketBound(posInf) != infBound {
		t.Error("bucketBound")
	}
}

var posInf = BurnRate(1, 0) // +Inf

// TestJudgeAddAllocatesNothing: once a stage's histograms exist, Add keeps
// no per-record memory: zero allocations per record.
func TestJudgeAddAllocatesNothing(t *testing.T) {
	spec := mustSpec(t, judgeSLO)
	recs := randomRecords(7, 1000, []string{"normal", "peak"}, 5)
	j := NewJudge(nil, spec)
	for i := range recs {
		j.Add(&recs[i])
	}
	i := 0
	if a := testing.AllocsPerRun(5000, func() { j.Add(&recs[i%len(recs)]); i++ }); a != 0 {
		t.Errorf("Add: %v allocations per record", a)
	}
}

// BenchmarkJudgeAdd: go test -bench JudgeAdd -benchmem ./slo/ shows
// 0 allocs/op (memory per record O(1): nothing kept).
func BenchmarkJudgeAdd(b *testing.B) {
	spec, err := ParseSpec("slo.yaml", []byte(strings.TrimLeft(judgeSLO, "\n")))
	if err != nil {
		b.Fatal(err)
	}
	recs := randomRecords(8, 4096, []string{"normal", "peak"}, 5)
	j := NewJudge(nil, spec)
	for i := range recs {
		j.Add(&recs[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j.Add(&recs[i%len(recs)])
	}
}

// TestJudgeIncremental: the judge keeps no record (reusing the record
// after Add changes nothing), can be assessed mid-run and again later (a
// canary's running verdict), and ignores stages the plan does not have.
func TestJudgeIncremental(t *testing.T) {
	t.Parallel()
	p, spec := reportPlan(t)
	j := NewJudge(p, spec)
	var r loadgen.Record
	for i, ttft := range []time.Duration{50 * ms1, 60 * ms1} {
		r = okRec("normal", time.Duration(i)*ms1, ttft, time.Second, 3)
		r.Seq = int64(i)
		j.Add(&r)
	}
	stray := okRec("elsewhere", 0, time.Hour, time.Hour, 2)
	j.Add(&stray)
	mid := j.Assess(Input{Now: t0})
	if v := mid.Verdicts[0]; v.Stage != "normal" || v.Objective != "lat" || v.Status != Pass || v.Total != 2 {
		t.Fatalf("mid-run: %+v", v)
	}
	if len(mid.Stages) != 3 || mid.Stages[0].Counts.Requests != 2 {
		t.Fatalf("stages: %+v", mid.Stages)
	}
	r.Chunks[0].At = time.Hour // the caller reuses its record
	r = okRec("normal", 5*ms1, 150*ms1, time.Second, 3)
	j.Add(&r)
	end := j.Assess(Input{Now: t0})
	if v := end.Verdicts[0]; v.Status != Fail || v.Good != 2 || v.Total != 3 {
		t.Fatalf("end: %+v", v)
	}
	if again := j.Assess(Input{Now: t0}); !reflect.DeepEqual(again, end) {
		t.Error("a second Assess differs: Assess changed the judge")
	}
}

func TestAssessNothingSentIsNoData(t *testing.T) {
	t.Parallel()
	target, err := ParseDecimal("0.9")
	if err != nil {
		t.Fatal(err)
	}
	spec := &Spec{Objectives: []Objective{{Name: "ttft", Metric: TTFT, Threshold: time.Second, Target: target}}}
	r := Assess(nil, spec, Input{})
	if r.Status != ReportInvalid || r.ExitCode != ExitInvalid {
		t.Fatalf("status %s exit %d, want INVALID exit %d", r.Status, r.ExitCode, ExitInvalid)
	}
	if len(r.Problems) != 1 || r.Problems[0].Check != "no_data" {
		t.Errorf("problems %+v, want one no_data", r.Problems)
	}
	if r := Assess(nil, &Spec{}, Input{}); r.Status != ReportPass {
		t.Errorf("no objectives, nothing sent: %s, want PASS (nothing was asked)", r.Status)
	}
}
