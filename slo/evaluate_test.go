package slo

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

const us1 = time.Microsecond

func latencySpec(t *testing.T, metric, threshold, target string) *Spec {
	return mustSpec(t, fmt.Sprintf("kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: o, metric: %s, threshold: %s, target: %q}\n  - {name: e, metric: error_rate, threshold: 1}\n", metric, threshold, target))
}

// TestLatencyBoundaries: for each latency metric, one record exactly at the
// threshold meets it (≤), one microsecond over does not, one under does.
func TestLatencyBoundaries(t *testing.T) {
	t.Parallel()
	const th = 500 * ms1
	// Each builder makes a record whose metric equals v.
	builders := map[string]func(v time.Duration) loadgen.Record{
		"ttft": func(v time.Duration) loadgen.Record { return okRec("s", 0, v, v+time.Second, 10) },
		"ttfat": func(v time.Duration) loadgen.Record {
			r := okRec("s", 0, 10*ms1, 2*time.Second, 10)
			r.FirstAnswer = v
			return r
		},
		"e2e": func(v time.Duration) loadgen.Record { return okRec("s", 0, 10*ms1, v, 2) },
		// TPOT = (E2E − TTFT) / (tokens − 1) with 11 tokens: 10 gaps.
		"tpot": func(v time.Duration) loadgen.Record { return okRec("s", 0, 100*ms1, 100*ms1+10*v, 11) },
		"schedule_lag": func(v time.Duration) loadgen.Record {
			r := okRec("s", 0, time.Second, 2*time.Second, 2)
			r.Sent = v
			return r
		},
		// One chunk gap of v carrying 1 token (itl) / one gap (icl).
		"itl": func(v time.Duration) loadgen.Record { return okRec("s", 0, 10*ms1, 10*ms1+v, 2) },
		"icl": func(v time.Duration) loadgen.Record { return okRec("s", 0, 10*ms1, 10*ms1+v, 2) },
	}
	for metric, build := range builders {
		spec := latencySpec(t, metric, "500ms", "100%")
		for _, c := range []struct {
			name string
			v    time.Duration
			want Status
		}{
			{"at", th, Pass}, {"just over", th + us1, Fail}, {"just under", th - us1, Pass},
			// Below the microsecond resolution of requests.jsonl: truncated.
			{"sub-µs over", th + 999, Pass},
		} {
			if c.name == "sub-µs over" && metric == "tpot" {
				continue // a quotient of instants: not on the µs grid
			}
			r := build(c.v)
			v := one(t, judgeStage(spec, "s", []loadgen.Record{r}, Input{}, "o"))
			if v.Status != c.want {
				t.Errorf("%s %s (%v): %s, want %s (%+v)", metric, c.name, c.v, v.Status, c.want, v)
			}
		}
	}
}

// TestITLPerToken: a chunk carrying n tokens is n samples of gap/n.
func TestITLPerToken(t *testing.T) {
	t.Parallel()
	r := okRec("s", 0, 10*ms1, 10*ms1, 1)
	r.Chunks = append(r.Chunks, loadgen.Chunk{At: 10*ms1 + 300*ms1, Tokens: 3}) // 3 tokens at 100ms each
	r.Chunks = append(r.Chunks, loadgen.Chunk{At: 10*ms1 + 300*ms1 + 200*ms1, Tokens: 1})
	r.OutputTokens = 5
	v := one(t, judgeStage(latencySpec(t, "itl", "100ms", "75%"), "s", []loadgen.Record{r}, Input{}, "o"))
	if v.Good != 3 || v.Total != 4 || v.Status != Inconclusive || *v.QuantileMs != 100 { // 4 events decide nothing
		t.Fatalf("itl: %+v", v)
	}
	// icl counts chunk gaps, not tokens: 300ms and 200ms.
	v = one(t, judgeStage(latencySpec(t, "icl", "250ms", "50%"), "s", []loadgen.Record{r}, Input{}, "o"))
	if v.Good != 1 || v.Total != 2 || v.Status != Inconclusive {
		t.Fatalf("icl: %+v", v)
	}
}

// TestTargetFailsByOneRequest: 99% of 100 needs 99 good; 98 fails. 99.9%
// of 1000 needs 999 (where a float comparison would get it wrong). The
// counts are exact; one request either side of the target decides nothing
// at 95% confidence, so each verdict is INCONCLUSIVE, and the reported
// quantile sits on the side of the threshold the observed counts are on.
func TestTargetFailsByOneRequest(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		target    string
		n, good   int
		met       bool // the observed fraction meets the target
		quantileV time.Duration
	}{
		{"99%", 100, 99, true, 400 * ms1}, {"99%", 100, 98, false, 600 * ms1},
		{"99.9%", 1000, 999, true, 400 * ms1}, {"99.9%", 1000, 998, false, 600 * ms1},
		{"0.5", 10, 5, true, 400 * ms1}, {"0.5", 10, 4, false, 600 * ms1},
	} {
		var recs []loadgen.Record
		for i := 0; i < c.n; i++ {
			v := 400 * ms1
			if i >= c.good {
				v = 600 * ms1
			}
			recs = append(recs, okRec("normal", time.Duration(i)*ms1, v, time.Second, 5))
		}
		got := one(t, judgeStage(latencySpec(t, "ttft", "500ms", c.target), "normal", recs, Input{}, "o"))
		if got.Status != Inconclusive || got.Good != uint64(c.good) || got.Total != uint64(c.n) {
			t.Errorf("%s %d/%d: %s, want %s", c.target, c.good, c.n, got.Status, Inconclusive)
		}
		// The nearest-rank quantile at the target, from the HDR histogram:
		// within its 3 significant digits of the exact value, and on the
		// verdict's side of the threshold.
		if got.QuantileMs == nil || got.QuantileFrom != QuantileFromHDR {
			t.Fatalf("%s %d/%d: no HDR quantile: %+v", c.target, c.good, c.n, got)
		}
		q, want := *got.QuantileMs, ms(c.quantileV)
		if q < want || q > want*1.001 || (q <= 500) != c.met {
			t.Errorf("%s %d/%d: quantile %vms, want %vms within 0.1%%", c.target, c.good, c.n, q, want)
		}
	}
}

func TestLatencyPopulation(t *testing.T) {
	t.Parallel()
	spec := latencySpec(t, "ttft", "500ms", "100%")
	warm := okRec("s", 0, time.Minute, time.Minute, 2)
	warm.Warmup = true
	other := okRec("t", 0, time.Minute, time.Minute, 2)
	recs := []loadgen.Record{
		okRec("s", 0, 100*ms1, time.Second, 2),
		errRec("s", 0, loadgen.ErrServer),  // failures: error_rate's business
		errRec("s", 0, loadgen.ErrDropped), //
		okRec("s", 0, 0, time.Second, 0),   // no token: no TTFT
		warm, other,                        // warm-up, another stage
	}
	v := one(t, judgeStage(spec, "s", recs, Input{}, "o"))
	if v.Status != Pass || v.Total != 1 {
		t.Fatalf("%+v", v)
	}
	v = one(t, judgeStage(spec, "empty", recs, Input{}, "o"))
	if v.Status != NoData {
		t.Fatalf("empty stage: %+v", v)
	}
	// TPOT needs two tokens.
	tp := latencySpec(t, "tpot", "1ms", "1")
	v = one(t, judgeStage(tp, "s", []loadgen.Record{okRec("s", 0, 100*ms1, 5*time.Second, 1)}, Input{}, "o"))
	if v.Status != NoData {
		t.Fatalf("tpot with one token: %+v", v)
	}
}

func TestClassFilter(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: x
owner: o
objectives:
  - {name: chat, metric: ttft, threshold: 500ms, target: 1, class: chat}
  - {name: all, metric: ttft, threshold: 500ms, target: 1}
  - {name: e, metric: error_rate, threshold: 0, class: chat}
`)
	a, b := okRec("s", 0, 100*ms1, time.Second, 2), okRec("s", 0, 900*ms1, time.Second, 2)
	a.Class, b.Class = "chat", "batch"
	c := errRec("s", 0, loadgen.ErrTimeout)
	c.Class = "batch"
	vs := judgeStage(spec, "s", []loadgen.Record{a, b, c}, Input{})
	if vs[0].Status != Pass || vs[0].Class != "chat" || vs[0].Total != 1 || vs[1].Status != Fail || vs[2].Status != Pass {
		t.Fatalf("%+v", vs)
	}
}

// TestErrorRateBoundaries: threshold 1% over 1000 requests: 4 failures
// decide a pass at 95% (P(X ≤ 4 | 1000, 1%) = 0.029), 10 are the limit
// itself and decide nothing, 17 decide a failure (P(X ≥ 17) = 0.026);
// dropped and cut_at_end
// requests (the generator's, not the server's) are left out of both counts
// and the verdict says so.
func TestErrorRateBoundaries(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: e, metric: error_rate, threshold: 1%}\n")
	build := func(bad int, kind loadgen.ErrorKind) []loadgen.Record {
		var recs []loadgen.Record
		for i := 0; i < 1000; i++ {
			if i < bad {
				recs = append(recs, errRec("s", time.Duration(i)*ms1, kind))
			} else {
				recs = append(recs, okRec("s", time.Duration(i)*ms1, 10*ms1, 20*ms1, 2))
			}
		}
		return recs
	}
	for _, c := range []struct {
		name string
		bad  int
		kind loadgen.ErrorKind
		want Status
	}{
		{"under", 4, loadgen.ErrServer, Pass}, {"at", 10, loadgen.ErrServer, Inconclusive}, {"over", 17, loadgen.ErrServer, Fail},
		{"none", 0, "", Pass},
	} {
		v := one(t, judgeStage(spec, "s", build(c.bad, c.kind), Input{}))
		if v.Status != c.want || v.Total != 1000 || v.Good != uint64(1000-c.bad) || v.Measured != float64(c.bad)/1000 || v.LeftOut != 0 {
			t.Errorf("%s: %+v", c.name, v)
		}
	}
	// Cancelled by the run itself (Ctrl-C): never a failure of the server.
	if v := one(t, judgeStage(spec, "s", build(2, loadgen.ErrCancelled), Input{})); v.Status != Pass || v.Total != 998 || v.LeftOut != 2 || !strings.Contains(v.Note, "2 cancelled") {
		t.Errorf("cancelled: %+v", v)
	}
	for _, kind := range []loadgen.ErrorKind{loadgen.ErrDropped, loadgen.ErrCutAtEnd} {
		recs := append(build(4, loadgen.ErrServer), errRec("s", 0, kind), errRec("s", 0, kind), errRec("s", 0, kind))
		v := one(t, judgeStage(spec, "s", recs, Input{}))
		if v.Status != Pass || v.Total != 1000 || v.Good != 996 || v.LeftOut != 3 || !strings.Contains(v.Note, "left out: 3 "+string(kind)) {
			t.Errorf("%s left out: %+v", kind, v)
		}
		// Named in error_kinds, they count.
		named := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: e, metric: error_rate, threshold: 1%, error_kinds: ["+string(kind)+"]}\n")
		for range 17 {
			recs = append(recs, errRec("s", 0, kind))
		}
		if v := one(t, judgeStage(named, "s", recs, Input{})); v.Status != Fail || v.Total != 1020 || v.Good != 1000 || v.LeftOut != 0 {
			t.Errorf("%s named: %+v", kind, v)
		}
	}
	// error_kinds narrows what counts.
	k := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: e, metric: error_rate, threshold: 1%, error_kinds: [http_5xx]}\n")
	if v := one(t, judgeStage(k, "s", build(5, loadgen.ErrRateLimited), Input{})); v.Status != Pass {
		t.Errorf("429s counted against a 5xx-only objective: %+v", v)
	}
	if v := one(t, judgeStage(spec, "none", nil, Input{})); v.Status != NoData {
		t.Errorf("no requests: %+v", v)
	}
}

// TestFloorBoundaries: over a 10 s window, ≥ 10 requests/s needs 100
// requests; 99 fail, 101 pass. Output tokens and goodput alike.
func TestFloorBoundaries(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: x
owner: o
goodput: {ttft: 200ms}
objectives:
  - {name: rps, metric: requests_per_s, threshold: 10}
  - {name: tps, metric: output_tokens_per_s, threshold: 50}
  - {name: good, metric: goodput_per_s, threshold: 9.9}
  - {name: in, metric: input_tokens_per_s, threshold: 1000}
`)
	build := func(n int, slowTTFT int) []loadgen.Record {
		recs := []loadgen.Record{
			// Window: the first intended start (0) to the last end (10 s).
			okRec("s", 0, 100*ms1, 100*ms1+time.Second, 5),
			okRec("s", 9*time.Second, 100*ms1, time.Second, 5),
		}
		for i := 2; i < n; i++ {
			ttft := 100 * ms1
			if i < 2+slowTTFT {
				ttft = 300 * ms1
			}
			recs = append(recs, okRec("s", time.Duration(i)*10*ms1, ttft, time.Second, 5))
		}
		// A failure contributes neither requests nor tokens.
		recs = append(recs, errRec("s", 5*time.Second, loadgen.ErrServer))
		return recs
	}
	for _, c := range []struct {
		n, slow int
		want    [4]Status
	}{
		{100, 1, [4]Status{Pass, Pass, Pass, Pass}}, // exactly 10/s, 50 tokens/s, 9.9 good/s, 1000 in/s
		{99, 0, [4]Status{Fail, Fail, Pass, Fail}},  // 9.9/s
		{101, 3, [4]Status{Pass, Pass, Fail, Pass}}, // 98 good: 9.8/s
	} {
		vs := judgeStage(spec, "s", build(c.n, c.slow), Input{})
		for i, v := range vs {
			if v.Status != c.want[i] || v.WindowS != 10 {
				t.Errorf("n=%d slow=%d %s: %s (%.2f/s over %.1fs), want %s", c.n, c.slow, v.Objective, v.Status, v.Measured, v.WindowS, c.want[i])
			}
		}
	}
	if v := one(t, judgeStage(spec, "s", []loadgen.Record{errRec("s", 0, loadgen.ErrDropped)}, Input{}, "rps")); v.Status != NoData {
		t.Errorf("no window: %+v", v)
	}
}

func TestGoodputConstraints(t *testing.T) {
	t.Parallel()
	c := Constraints{TTFT: 500 * ms1, TPOT: 50 * ms1}
	for _, x := range []struct {
		r    loadgen.Record
		want bool
	}{
		{okRec("s", 0, 500*ms1, 500*ms1+10*50*ms1, 11), true},         // both exactly at
		{okRec("s", 0, 500*ms1+us1, 500*ms1+10*50*ms1, 11), false},    // ttft 1 µs over
		{okRec("s", 0, 100*ms1, 100*ms1+10*50*ms1+10*us1, 11), false}, // tpot 1 µs over
		{okRec("s", 0, 100*ms1, 100*ms1, 1), true},                    // one token: tpot undefined
		{okRec("s", 0, 0, 100*ms1, 0), false},                         // no token
		{errRec("s", 0, loadgen.ErrTimeout), false},
		{unstreamed(okRec("s", 0, 100*ms1, 100*ms1, 11)), false}, // one body: no TPOT to show
		{unstreamed(okRec("s", 0, 100*ms1, 100*ms1, 1)), true},   // one token: tpot undefined anyway
	} {
		if got := c.Met(&x.r); got != x.want {
			t.Errorf("%+v: Met = %v", x.r, got)
		}
	}
}

func TestQueueDelay(t *testing.T) {
	t.Parallel()
	spec := latencySpec(t, "queue_delay", "100ms", "90%")
	only := []string{"o"}
	if v := one(t, judgeStage(spec, "s", nil, Input{}, only...)); v.Status != NoData || !strings.Contains(v.Note, "telemetry") {
		t.Fatalf("no telemetry: %+v", v)
	}
	// Buckets 50ms: 85, 100ms: 90, +Inf: 100 → 90% ≤ 100ms, exactly the target.
	q := queueHist(qb(0.05, 85), qb(0.1, 90), qb(inf, 100))
	q.Source = "test"
	v := one(t, judgeStage(spec, "s", nil, queueIn(q), only...))
	if v.Status != Inconclusive || v.Source != "test" || v.NeedRequests != 0 || v.Good != 90 || v.Total != 100 || !strings.HasPrefix(v.Note, "INCONCLUSIVE") || *v.QuantileMs != 100 {
		t.Fatalf("buckets at a bound: %+v", v)
	}
	// Threshold between bounds, where the bounds disagree (85 < 90 ≤ 90):
	// interpolated, 85 + 5·25/50 = 87, and the note says it is an estimate.
	s2 := latencySpec(t, "queue_delay", "75ms", "90%")
	v = one(t, judgeStage(s2, "s", nil, queueIn(q), only...))
	if v.Status != Inconclusive || v.Good != 87 || !strings.Contains(v.Note, "interpolated linearly") || !strings.Contains(v.Note, "estimate") {
		t.Fatalf("buckets between bounds: %+v", v)
	}
	// Where both bounds agree the verdict is exact: 85% target is met
	// counting none of the (50ms, 100ms] bucket.
	s3 := latencySpec(t, "queue_delay", "75ms", "85%")
	v = one(t, judgeStage(s3, "s", nil, queueIn(q), only...))
	if v.Status != Inconclusive || v.Good != 85 || strings.Contains(v.Note, "estimate") || !strings.Contains(v.Note, "same at either end") {
		t.Fatalf("buckets that decide: %+v", v)
	}
	v = one(t, judgeStage(spec, "s", nil, queueIn(queueHist(q.Buckets[:2]...)), only...))
	if v.Status != NoData {
		t.Fatalf("no +Inf bucket: %+v", v)
	}
}

// TestWaiverExpiry: a date waives through the end of that day (UTC); at the
// next midnight the waiver no longer waives, the verdict says so, and the
// failure stays visible either way.
func TestWaiverExpiry(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: x
owner: o
objectives:
  - {name: lat, metric: ttft, threshold: 100ms, target: 1}
  - {name: e, metric: error_rate, threshold: 0}
waivers:
  - objective: lat
    stage: peak
    owner: alice
    reason: INF-123
    expires: 2026-06-30
`)
	recs := []loadgen.Record{okRec("peak", 0, 200*ms1, time.Second, 2), okRec("normal", 0, 200*ms1, time.Second, 2)}
	for _, c := range []struct {
		now  time.Time
		want Status
	}{
		{time.Date(2026, 6, 30, 23, 59, 59, 999999999, time.UTC), Waived},
		{time.Date(2026, 7, 1, 0, 0, 0, 0, time.UTC), Fail},
		{time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), Waived},
	} {
		v := judgeStage(spec, "peak", recs, Input{Now: c.now})[0]
		if v.Status != c.want || v.Result != Fail || v.Waiver == nil || v.Waiver.Owner != "alice" {
			t.Errorf("now %v: %+v, want %s", c.now, v, c.want)
		}
		if c.want == Waived && (v.WaiverExpired || v.Note != "waived by alice until 2026-06-30: INF-123") {
			t.Errorf("waived note: %q", v.Note)
		}
		if c.want == Fail && (!v.WaiverExpired || !strings.Contains(v.Note, "expired 2026-06-30") || !strings.Contains(v.Note, "no longer waives")) {
			t.Errorf("expired note: %+v", v)
		}
	}
	// The waiver names stage peak: normal is not waived.
	if v := judgeStage(spec, "normal", recs, Input{Now: t0})[0]; v.Status != Fail || v.Waiver != nil {
		t.Errorf("other stage: %+v", v)
	}
	// An RFC 3339 time expires at that instant.
	w := Waiver{Objective: "lat", Owner: "a", Reason: "r"}
	w.Expires, _ = ParseExpiry("2026-06-30T12:00:00+02:00")
	if w.Expired(time.Date(2026, 6, 30, 9, 59, 59, 0, time.UTC)) || !w.Expired(time.Date(2026, 6, 30, 10, 0, 0, 0, time.UTC)) {
		t.Error("RFC 3339 expiry")
	}
	// A waiver on a passing objective is noted, not applied.
	pass := []loadgen.Record{okRec("peak", 0, 50*ms1, time.Second, 2)}
	if v := judgeStage(spec, "peak", pass, Input{Now: t0})[0]; v.Status != Pass || !strings.Contains(v.Note, "not needed") {
		t.Errorf("passing: %+v", v)
	}
	// Class narrowing.
	cw := Waiver{Objective: "lat", Class: "batch", Owner: "a", Reason: "r", Expires: t0.Add(time.Hour)}
	plan := &Plan{Stages: []Stage{{Name: "normal"}}, Waivers: []Waiver{cw}, Validity: defaultValidityTable}
	if v := Assess(plan, spec, Input{Records: recs, Now: t0}).Verdicts[0]; v.Status != Fail {
		t.Errorf("class waiver on an all-class objective: %+v", v)
	}
}

// TestSavedRecordsSameVerdict: judging the live records (nanosecond
// instants) and their requests.jsonl copy gives identical verdicts.
func TestSavedRecordsSameVerdict(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, chatSLO)
	rng := rand.New(rand.NewPCG(1, 2))
	var live []loadgen.Record
	for i := 0; i < 2000; i++ {
		stage := []string{"normal", "peak"}[i%2]
		start := time.Duration(i)*5*ms1 + time.Duration(rng.IntN(1000))
		var r loadgen.Record
		switch rng.IntN(20) {
		case 0:
			r = errRec(stage, start, loadgen.ErrServer)
		case 1:
			r = errRec(stage, start, loadgen.ErrDropped)
		default:
			ttft := 490*ms1 + time.Duration(rng.IntN(20000))*us1 + time.Duration(rng.IntN(1000))
			r = okRec(stage, start, ttft, ttft+time.Duration(rng.IntN(2000))*ms1+time.Duration(rng.IntN(1000)), 1+rng.IntN(40))
		}
		r.Seq = int64(i)
		r.Class = []string{"chat", "batch"}[rng.IntN(2)]
		r.Sent = r.Intended + time.Duration(rng.IntN(3000))
		live = append(live, r)
	}
	var buf bytes.Buffer
	for i := range live {
		b, err := json.Marshal(&live[i])
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	var saved []loadgen.Record
	for _, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
		var r loadgen.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		saved = append(saved, r)
	}
	for _, stage := range []string{"normal", "peak"} {
		a := judgeStage(spec, stage, live, Input{Now: t0})
		b := judgeStage(spec, stage, saved, Input{Now: t0})
		if !reflect.DeepEqual(a, b) {
			for i := range a {
				if !reflect.DeepEqual(a[i], b[i]) {
					t.Errorf("%s %s:\nlive  %+v\nsaved %+v", stage, a[i].Objective, a[i], b[i])
				}
			}
		}
	}
	ra, rb := Assess(nil, spec, Input{Records: live, Now: t0}), Assess(nil, spec, Input{Records: saved, Now: t0})
	if !reflect.DeepEqual(ra, rb) {
		t.Error("Assess differs between live and saved records")
	}
}

func unstreamed(r loadgen.Record) loadgen.Record {
	r.Unstreamed = true
	return r
}
