package slo

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// referenceEvaluate is the slice-based evaluator the streaming Judge
// replaced (as of cee571c, with the two rules the Judge added: unstreamed
// answers give no streamed-metric samples, error_rate leaves cut_at_end and
// dropped out): it keeps every sample, sorts them, and takes the exact
// nearest-rank quantile. Its counts and verdicts stand; the Judge must
// agree with them exactly, and with its quantile to within the HDR
// histogram's 3 significant digits.
func referenceEvaluate(spec *Spec, stage string, records []loadgen.Record, now time.Time) []Verdict {
	var recs []*loadgen.Record
	win, seen := loadgen.Window{}, false
	for i := range records {
		r := &records[i]
		if r.Warmup || r.Stage != stage {
			continue
		}
		recs = append(recs, r)
		if r.ErrorKind == loadgen.ErrDropped || r.ErrorKind == loadgen.ErrNotDue {
			continue
		}
		s, e := trunc(r.Intended), trunc(r.End)
		if !seen || s < win.From {
			win.From = s
		}
		if !seen || e > win.To {
			win.To = e
		}
		seen = true
	}
	waivers := append([]Waiver(nil), spec.Waivers...)
	var out []Verdict
	for i := range spec.Objectives {
		o := &spec.Objectives[i]
		var sel []*loadgen.Record
		for _, r := range recs {
			if o.Class == "" || r.Class == o.Class {
				sel = append(sel, r)
			}
		}
		v := referenceJudge(o, spec, stage, sel, win)
		applyWaivers(&v, waivers, now)
		out = append(out, v)
	}
	return out
}

type refSample struct {
	v time.Duration
	n uint64
}

func referenceJudge(o *Objective, spec *Spec, stage string, recs []*loadgen.Record, win loadgen.Window) Verdict {
	v := newVerdict(o, stage)
	switch o.Kind() {
	case KindLatency:
		m := o.latency()
		var samples []refSample
		var ok, unstreamed, misses, censored, empty uint64
		for _, r := range recs {
			if (r.ErrorKind == loadgen.ErrEmptyAnswer || r.ErrorKind == loadgen.ErrOverGeneration) && o.Metric != ScheduleLag {
				// No answer: a miss beyond every value.
				samples = append(samples, refSample{time.Duration(math.MaxInt64), 1})
				empty++
				continue
			}
			if !r.OK() {
				// Right-censored: cut, timed out or cancelled; TTFT, TTFAT
				// and E2E run from the intended start.
				cut := r.ErrorKind == loadgen.ErrCutAtEnd || r.ErrorKind == loadgen.ErrTimeout || r.ErrorKind == loadgen.ErrCancelled
				if !cut || (o.Metric != TTFT && o.Metric != TTFAT && o.Metric != E2E) {
					continue
				}
				intended := loadgen.TruncMicros(r.Intended)
				switch {
				case o.Metric == TTFT && len(r.Chunks) > 0:
					samples = append(samples, refSample{loadgen.TruncMicros(r.Chunks[0].At) - intended, 1})
				case o.Metric == TTFAT && r.FirstAnswer > 0:
					samples = append(samples, refSample{loadgen.TruncMicros(r.FirstAnswer) - intended, 1})
				case loadgen.TruncMicros(r.End)-intended > o.Threshold:
					samples = append(samples, refSample{loadgen.TruncMicros(r.End) - intended, 1})
					misses++
				default:
					censored++
				}
				continue
			}
			ok++
			if r.Unstreamed {
				unstreamed++
			}
			for s := m.Samples(r); s.Next(); {
				samples = append(samples, refSample{s.Value(), uint64(s.Weight())})
			}
		}
		var good, total uint64
		for _, s := range samples {
			total += s.n
			if s.v <= o.Threshold {
				good += s.n
			}
		}
		v.Good, v.Total = good, total
		v.CensoredMisses, v.Censored = misses, censored
		if total == 0 {
			v.Result = NoData
			if censored == 0 {
				v.Note = "no " + m.Events + " to measure"
				if m.Streamed && ok > 0 && unstreamed == ok {
					v.Note = fmt.Sprintf("no streamed responses: %s needs a stream (all %d successful responses came as one body)", strings.ToUpper(string(o.Metric)), ok)
				}
			}
			censorNote(&v, o, DefaultConfidence)
			return v
		}
		v.Measured = float64(good) / float64(total)
		sort.Slice(samples, func(i, j int) bool { return samples[i].v < samples[j].v })
		rank := max(o.Target.CeilMul(total), 1)
		var cum uint64
		for _, s := range samples {
			cum += s.n
			if cum >= rank && s.v == time.Duration(math.MaxInt64) {
				break
			}
			if cum >= rank {
				q := ms(s.v)
				v.QuantileMs, v.QuantileFrom = &q, "exact"
				break
			}
		}
		p0, _ := o.ErrorBudget()
		applyConfidence(&v, p0, ConfidenceOf(spec))
		if lagMeasured(o.Metric) {
			for _, r := range recs {
				if d, ok := m.Of(r); ok && d > o.Threshold && d-loadgen.ScheduleLagOf(r) <= o.Threshold {
					v.LagMissed++
				}
			}
		}
		if m.Streamed && unstreamed > 0 {
			addNote(&v, fmt.Sprintf("%d of %d successful responses came unstreamed (one body): they give no %s", unstreamed, ok, o.Metric))
		}
		censorNote(&v, o, DefaultConfidence)
		v.EmptyMisses = empty
		if empty > 0 {
			addNote(&v, fmt.Sprintf("%d answers with no output token, or more than max_tokens (%s, %s), counted as misses", empty, loadgen.ErrEmptyAnswer, loadgen.ErrOverGeneration))
		}
	case KindRatio:
		var bad, total, cut, dropped, cancelled uint64
		for _, r := range recs {
			named := hasKind(o.ErrorKinds, r.ErrorKind)
			if r.ErrorKind == loadgen.ErrCutAtEnd && !named {
				cut++
				continue
			}
			if r.ErrorKind == loadgen.ErrDropped && !named {
				dropped++
				continue
			}
			never := r.ErrorKind == loadgen.ErrNotDue || r.ErrorKind == loadgen.ErrCancelledByDependency
			if (r.ErrorKind == loadgen.ErrCancelled || never) && !named {
				cancelled++
				continue
			}
			total++
			if !r.OK() && (len(o.ErrorKinds) == 0 || named) {
				bad++
			}
		}
		v.Good, v.Total, v.LeftOut = total-bad, total, cut+dropped+cancelled
		var parts []string
		if cut > 0 {
			parts = append(parts, fmt.Sprintf("%d cut_at_end", cut))
		}
		if dropped > 0 {
			parts = append(parts, fmt.Sprintf("%d dropped", dropped))
		}
		if cancelled > 0 {
			parts = append(parts, fmt.Sprintf("%d cancelled by the run", cancelled))
		}
		if len(parts) > 0 {
			v.Note = "left out: " + strings.Join(parts, ", ") + " (the load generator's, not failures of the server)"
		}
		if total == 0 {
			v.Result = NoData
			addNote(&v, "no requests in this stage")
			break
		}
		v.Measured = float64(bad) / float64(total)
		applyConfidence(&v, o.Limit.Float(), ConfidenceOf(spec))
	case KindFloor:
		var count, unjudged uint64
		cons := spec.Goodput
		if o.Constraints != nil {
			cons = *o.Constraints
		}
		for _, r := range recs {
			if !r.OK() {
				continue
			}
			switch o.Metric {
			case RequestsPerS:
				count++
			case OutputTokensPerS:
				count += uint64(max(r.OutputTokens, 0))
			case InputTokensPerS:
				count += uint64(max(r.InputTokens, 0))
			case GoodputPerS:
				switch {
				case cons.TPOT > 0 && r.Unstreamed && r.OutputTokens >= 2:
					unjudged++
				case cons.Met(r):
					count++
				}
			}
		}
		if o.Metric == GoodputPerS {
			v.Note = "good: " + cons.String()
			if unjudged > 0 && count == 0 {
				v.Result = NoData
				v.Note = fmt.Sprintf("goodput needs the tpot ≤ %s limit judged, and no TPOT exists without a stream: %d successful answers came as one body (good: %s)", cons.TPOT, unjudged, cons.String())
				break
			}
			if unjudged > 0 {
				v.Note += fmt.Sprintf("; %d answers came as one body and could not be judged against the tpot limit (not counted)", unjudged)
			}
		}
		v.Good = count
		w := win.Duration()
		if w <= 0 {
			v.Result, v.Note = NoData, "no measured window: no request was sent in this stage"
			break
		}
		v.WindowS = w.Seconds()
		v.Measured = float64(count) / w.Seconds()
		v.Result = Fail
		if rateAtLeast(count, w, o.Limit) {
			v.Result = Pass
		}
	}
	return v
}

// judgeSLO has an objective of every kind, near the values the record
// sets below straddle.
const judgeSLO = `
kind: SLO
name: judge
owner: o
goodput: {ttft: 500ms, tpot: 20ms}
objectives:
  - {name: ttft, metric: ttft, threshold: 500ms, target: 90%}
  - {name: ttft-chat, metric: ttft, threshold: 495ms, target: 99%, class: chat}
  - {name: ttfat, metric: ttfat, threshold: 600ms, target: 50%}
  - {name: icl, metric: icl, threshold: 20ms, target: 95%}
  - {name: itl, metric: itl, threshold: 10ms, target: 90%}
  - {name: tpot, metric: tpot, threshold: 15ms, target: 99.9%}
  - {name: e2e, metric: e2e, threshold: 1500ms, target: 75%}
  - {name: lag, metric: schedule_lag, threshold: 2us, target: 50%}
  - {name: errors, metric: error_rate, threshold: 5%}
  - {name: errors-5xx, metric: error_rate, threshold: 1%, error_kinds: [server_error]}
  - {name: rps, metric: requests_per_s, threshold: 100}
  - {name: out, metric: output_tokens_per_s, threshold: 1000}
  - {name: in, metric: input_tokens_per_s, threshold: 10000}
  - {name: good, metric: goodput_per_s, threshold: 50}
`

// randomRecords is a record set of n records over stages, with failures of
// every kind, warm-up, unstreamed answers, chunks of several tokens and
// nanosecond instants (so truncation matters).
func randomRecords(seed uint64, n int, stages []string, unstreamedShare int) []loadgen.Record {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	jitter := func() time.Duration { return time.Duration(rng.IntN(1000)) }
	var out []loadgen.Record
	for i := 0; i < n; i++ {
		stage := stages[rng.IntN(len(stages))]
		start := time.Duration(i)*3*ms1 + jitter()
		var r loadgen.Record
		switch k := rng.IntN(60); {
		case k < len(loadgen.ErrorKinds):
			r = errRec(stage, start, loadgen.ErrorKinds[k])
		default:
			ttft := 450*ms1 + time.Duration(rng.IntN(100000))*us1 + jitter()
			tokens := rng.IntN(30)
			r = okRec(stage, start, ttft, ttft+time.Duration(tokens)*time.Duration(5+rng.IntN(20))*ms1+jitter(), tokens)
			for c := range r.Chunks {
				r.Chunks[c].At += jitter()
				if rng.IntN(4) == 0 {
					r.Chunks[c].Tokens = 1 + rng.IntN(3)
				}
			}
			if tokens > 0 && rng.IntN(3) == 0 {
				r.FirstAnswer = r.Chunks[rng.IntN(tokens)].At
			}
			if unstreamedShare > 0 && rng.IntN(100) < unstreamedShare {
				r.Unstreamed = true
			}
		}
		r.Seq = int64(i)
		r.Class = []string{"chat", "batch", ""}[rng.IntN(3)]
		r.Sent = r.Intended + time.Duration(rng.IntN(4000))
		r.Warmup = rng.IntN(50) == 0
		out = append(out, r)
	}
	return out
}

// TestJudgeMatchesReference: on a table of record sets, the streaming judge
// gives the reference's verdicts: counts, measured fractions, windows,
// results and notes exactly; the quantile within 0.1% and on the same side
// of the threshold.
func TestJudgeMatchesReference(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, judgeSLO)
	stages := []string{"normal", "peak"}
	for _, c := range []struct {
		name string
		recs []loadgen.Record
	}{
		{"empty", nil},
		{"one", []loadgen.Record{okRec("normal", 0, 400*ms1, time.Second, 5)}},
		{"failures only", []loadgen.Record{errRec("normal", 0, loadgen.ErrServer), errRec("normal", ms1, loadgen.ErrDropped), errRec("peak", 0, loadgen.ErrCutAtEnd)}},
		{"all unstreamed", randomRecords(1, 300, stages, 100)},
		{"some unstreamed", randomRecords(2, 3000, stages, 10)},
		{"streamed", randomRecords(3, 5000, stages, 0)},
		{"one stage", randomRecords(4, 2000, stages[:1], 0)},
		{"large", randomRecords(5, 20000, stages, 1)},
	} {
		j := NewJudge(nil, spec)
		for i := range c.recs {
			j.Add(&c.recs[i])
		}
		for _, stage := range stages {
			want := referenceEvaluate(spec, stage, c.recs, t0)
			s := j.stages[stage]
			if s == nil {
				s = j.newStage(stage, nil)
			}
			got := j.evaluate(s, t0, nil, nil, nil)
			if len(got) != len(want) {
				t.Fatalf("%s/%s: %d verdicts, want %d", c.name, stage, len(got), len(want))
			}
			for i := range want {
				g, w := got[i], want[i]
				if (g.QuantileMs == nil) != (w.QuantileMs == nil) {
					t.Errorf("%s/%s %s: quantile %v, want %v", c.name, stage, w.Objective, g.QuantileMs, w.QuantileMs)
					continue
				}
				if w.QuantileMs != nil {
					q, e := *g.QuantileMs, *w.QuantileMs
					if q < e || q > e*1.001+0.001 || (q <= w.Threshold) != (e <= w.Threshold) {
						t.Errorf("%s/%s %s: quantile %vms, exact %vms (threshold %vms)", c.name, stage, w.Objective, q, e, w.Threshold)
					}
				}
				g.QuantileMs, w.QuantileMs, g.QuantileFrom, w.QuantileFrom = nil, nil, "", ""
				if fmt.Sprintf("%+v", g) != fmt.Sprintf("%+v", w) {
					t.Errorf("%s/%s %s:\njudge     %+v\nreference %+v", c.name, stage, w.Objective, g, w)
				}
			}
		}
		// Assess over the slice is the same judge.
		a, b := Assess(nil, spec, Input{Records: c.recs, Now: t0}), j.Assess(Input{Now: t0})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: Assess(records) and Judge.Assess differ", c.name)
		}
	}
}
