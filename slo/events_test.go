package slo

import (
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
)

const eventsSpec = `
kind: SLO
name: chat
owner: a@example.com
objectives:
  - {name: ttft, metric: ttft, threshold: 100ms, target: 99%}
  - {name: itl, metric: itl, threshold: 10ms, target: 95%}
  - {name: chat-e2e, metric: e2e, class: chat, threshold: 1s, target: 90%}
  - {name: errors, metric: error_rate, threshold: 1%}
  - {name: limited, metric: error_rate, threshold: 1%, error_kinds: [rate_limited]}
  - {name: queue, metric: queue_delay, threshold: 300ms, target: 99%}
  - {name: tokens, metric: output_tokens_per_s, threshold: 10}
`

func eventsRecords() []loadgen.Record {
	recs := []loadgen.Record{
		okRec("s", 0, 50*ms1, 250*ms1, 11),  // ttft good, itl 20ms gaps: bad
		okRec("s", 0, 100*ms1, 150*ms1, 51), // ttft exactly at the threshold: good; itl 1ms: good
		okRec("s", 0, 101*ms1, 2000*ms1, 2), // ttft bad
		errRec("s", 0, loadgen.ErrServer),   // a failure
		errRec("s", 0, loadgen.ErrRateLimited),
		errRec("s", 0, loadgen.ErrCutAtEnd),  // left out
		errRec("s", 0, loadgen.ErrDropped),   // left out
		errRec("s", 0, loadgen.ErrCancelled), // left out: the run cancelled it
	}
	recs[0].Class, recs[2].Class = "chat", "chat"
	warm := okRec("s", 0, 900*ms1, 950*ms1, 3)
	warm.Warmup = true
	recs = append(recs, warm)
	for i := range recs {
		recs[i].Finalize()
	}
	return recs
}

// Events must count exactly what the Judge counts: one definition of a
// good event for verdicts and for the operate phase's counters.
func TestEventsAgreeWithJudge(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, eventsSpec)
	j := NewJudge(nil, spec)
	sums := map[string]Events{}
	for _, r := range eventsRecords() {
		j.Add(&r)
		for i := range spec.Objectives {
			o := &spec.Objectives[i]
			e := o.Events(&r)
			s := sums[o.Name]
			s.Good += e.Good
			s.Bad += e.Bad
			sums[o.Name] = s
		}
	}
	rep := j.Assess(Input{Now: t0})
	for _, v := range rep.Verdicts {
		o, _ := spec.Objective(v.Objective)
		got := sums[v.Objective]
		if !o.HasRecordEvents() {
			if got.Total() != 0 {
				t.Errorf("%s: %+v events from records; want none", v.Objective, got)
			}
			continue
		}
		if got.Good != v.Good || got.Total() != v.Total {
			t.Errorf("%s: events good %d of %d; judge %d of %d", v.Objective, got.Good, got.Total(), v.Good, v.Total)
		}
	}
	// Figures worked by hand, so the agreement above is not between two
	// wrong counts.
	want := map[string]Events{
		"ttft":     {Good: 2, Bad: 1},
		"itl":      {Good: 50, Bad: 10 + 1},
		"chat-e2e": {Bad: 1, Good: 1},
		"errors":   {Good: 3, Bad: 2},
		"limited":  {Good: 4, Bad: 1},
	}
	for name, w := range want {
		if sums[name] != w {
			t.Errorf("%s: %+v, want %+v", name, sums[name], w)
		}
	}
}

// In operate, a failed probe is a bad event for latency objectives, and a
// probe the canary cancelled itself counts nowhere.
func TestOperateEvents(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, eventsSpec)
	sums := map[string]Events{}
	for _, r := range eventsRecords() {
		for i := range spec.Objectives {
			o := &spec.Objectives[i]
			e := o.OperateEvents(&r)
			s := sums[o.Name]
			s.Good += e.Good
			s.Bad += e.Bad
			sums[o.Name] = s
		}
	}
	// Failures burning the latency budgets: server_error and rate_limited
	// (cut, dropped and cancelled do not).
	want := map[string]Events{
		"ttft":     {Good: 2, Bad: 1 + 2},
		"itl":      {Good: 50, Bad: 10 + 1 + 2},
		"chat-e2e": {Good: 1, Bad: 1},
		"errors":   {Good: 3, Bad: 2},
		"limited":  {Good: 4, Bad: 1},
	}
	for name, w := range want {
		if sums[name] != w {
			t.Errorf("%s: %+v, want %+v", name, sums[name], w)
		}
	}
	for _, n := range []string{"queue", "tokens"} {
		if sums[n].Total() != 0 {
			t.Errorf("%s: %+v, want no events", n, sums[n])
		}
	}
}

// An answer with no token is a miss for every latency objective of the
// answer (not for schedule lag, the generator's), a failure for the error
// rate, and no goodput, in acceptance and in operate alike: a server that
// answers nothing cannot pass on the answers it did give.
func TestEmptyAnswerMissesEveryLatencyObjective(t *testing.T) {
	t.Parallel()
	spec := mustSpec(t, `
kind: SLO
name: chat
owner: a@example.com
objectives:
  - {name: ttft, metric: ttft, threshold: 100ms, target: 50%}
  - {name: itl, metric: itl, threshold: 30ms, target: 50%}
  - {name: tpot, metric: tpot, threshold: 30ms, target: 50%}
  - {name: e2e, metric: e2e, threshold: 1s, target: 50%}
  - {name: lag, metric: schedule_lag, threshold: 1s, target: 50%}
  - {name: errors, metric: error_rate, threshold: 5%}
  - {name: good, metric: goodput_per_s, threshold: 0.001, constraints: {ttft: 1s}}
`)
	good := okRec("s", 0, 50*ms1, 100*ms1, 3) // meets everything
	good.Finalize()
	var recs []loadgen.Record
	recs = append(recs, good)
	for i := 0; i < 9; i++ {
		r := errRec("s", 0, loadgen.ErrEmptyAnswer)
		r.Finalize()
		recs = append(recs, r)
	}
	vs := judgeStage(spec, "s", recs, Input{Now: t0})
	byName := map[string]Verdict{}
	for _, v := range vs {
		byName[v.Objective] = v
	}
	for _, name := range []string{"ttft", "e2e"} {
		v := byName[name]
		if v.Good != 1 || v.Total != 10 || v.EmptyMisses != 9 || v.Result != Fail {
			t.Errorf("%s: good %d of %d, empty misses %d, %s; want 1 of 10, 9, FAIL (%s)", name, v.Good, v.Total, v.EmptyMisses, v.Result, v.Note)
		}
	}
	// itl: the good record's two gaps (one token each), and one miss per empty answer.
	if v := byName["itl"]; v.Good != 2 || v.Total != 2+9 || v.Result != Fail {
		t.Errorf("itl: good %d of %d, %s; want 2 of 11, FAIL", v.Good, v.Total, v.Result)
	}
	if v := byName["lag"]; v.Total != 1 || v.EmptyMisses != 0 {
		t.Errorf("schedule_lag: %d events, %d empty misses; want the successful record's only", v.Total, v.EmptyMisses)
	}
	if v := byName["errors"]; v.Total != 10 || v.Good != 1 || v.Result != Fail {
		t.Errorf("error_rate: good %d of %d, %s; want 1 of 10, FAIL", v.Good, v.Total, v.Result)
	}
	if v := byName["good"]; v.Good != 1 {
		t.Errorf("goodput: %d good requests; want 1 (empty answers are no goodput)", v.Good)
	}
	for i := range spec.Objectives {
		o := &spec.Objectives[i]
		if o.Name == "lag" || !o.HasRecordEvents() {
			continue
		}
		if e := o.OperateEvents(&recs[1]); e.Bad != 1 || e.Good != 0 {
			t.Errorf("%s: operate events of an empty answer %+v, want one bad", o.Name, e)
		}
		if e := o.Events(&recs[1]); e.Bad != 1 || e.Good != 0 {
			t.Errorf("%s: events of an empty answer %+v, want one bad", o.Name, e)
		}
	}
}
