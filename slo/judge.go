package slo

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// Judge judges a run's objectives from running counts as records arrive,
// so memory stays flat however long a stage runs: per objective and stage
// it keeps the events meeting the threshold and all events (latency), the
// failed and counted requests (ratio), or the work done (floor), plus the
// stage's window and counts for validity. Verdicts come from those exact
// counts; only the reported quantile (Verdict.QuantileMs) comes from an HDR
// histogram (µs, 3 significant digits, 1 µs to 1 h) and is marked so.
//
// A Judge is not safe for concurrent use: one goroutine calls Add.
type Judge struct {
	plan     *Plan
	spec     *Spec
	validity Validity
	stages   map[string]*stageJudge
	last     *stageJudge // the stage of the previous record: most records share it
	// sessions rolls session calls up for session objectives; nil when
	// the spec has none.
	sessions *loadgen.SessionRoller
}

// NewJudge returns a judge of spec's objectives over plan's stages. With a
// nil plan every objective applies to every stage found in the records and
// the default validity bounds hold.
func NewJudge(plan *Plan, spec *Spec) *Judge {
	j := &Judge{plan: plan, spec: spec, validity: defaultValidityTable, stages: map[string]*stageJudge{}}
	for _, o := range spec.Objectives {
		if o.perSession() {
			j.sessions = &loadgen.SessionRoller{}
		}
	}
	if plan != nil {
		j.validity = plan.Validity
		for i := range plan.Stages {
			st := &plan.Stages[i]
			if !st.Manual {
				j.stages[st.Name] = j.newStage(st.Name, st)
			}
		}
	}
	return j
}

// SetValidity sets the bounds the run is held to (the plan's, or
// DefaultValidity, until set): the bounds a run saved, for check, or the
// flags' over the plan's.
func (j *Judge) SetValidity(v Validity) { j.validity = v }

// Validity is the bounds the judge holds the run to.
func (j *Judge) Validity() Validity { return j.validity }

// stageJudge is the running state of one stage.
type stageJudge struct {
	name     string
	firstSeq int64 // lowest Seq seen, warm-up included: stage order without a plan
	counts   StageCounts
	win      loadgen.Window
	seen     bool // win holds a sent request
	// Schedule lag of sent requests: how many were within the validity
	// bound, exactly, and a histogram for the reported p99.
	lagWithin, lagTotal uint64
	lagHist             *hdrhistogram.Histogram
	objs                []*objectiveJudge // in spec order, those that apply
}

func (j *Judge) newStage(name string, st *Stage) *stageJudge {
	s := &stageJudge{name: name, firstSeq: -1}
	for i := range j.spec.Objectives {
		o := &j.spec.Objectives[i]
		if st != nil && !st.Applies(o.Name) {
			continue
		}
		oj := &objectiveJudge{o: o, metric: o.latency(), rate: o.rateRow(), cons: j.spec.Goodput, conf: ConfidenceOf(j.spec)}
		if o.Constraints != nil {
			oj.cons = *o.Constraints
		}
		s.objs = append(s.objs, oj)
	}
	return s
}

func (j *Judge) stage(name string) *stageJudge {
	if j.last != nil && j.last.name == name {
		return j.last
	}
	s, ok := j.stages[name]
	if !ok {
		if j.plan != nil {
			return nil // not a stage of the plan
		}
		s = j.newStage(name, nil)
		j.stages[name] = s
	}
	j.last = s
	return s
}

// Add counts one record of any stage. Warm-up records are counted as such
// and judged by nothing; records of a stage the plan does not have are
// ignored. Add keeps no reference to r and, once every histogram of the
// stage exists, allocates nothing.
func (j *Judge) Add(r *loadgen.Record) {
	s := j.stage(r.Stage)
	if s == nil {
		return
	}
	if s.firstSeq < 0 || r.Seq < s.firstSeq {
		s.firstSeq = r.Seq
	}
	s.counts.add(r)
	if j.sessions != nil {
		// Before the warm-up return: a session's last record may be a
		// warm-up call's, and the roll-up leaves warm-up calls out itself.
		if f, done := j.sessions.Add(r); done && f.Calls > 0 {
			for _, oj := range s.objs {
				if oj.o.perSession() {
					oj.addSession(f)
				}
			}
		}
	}
	if r.Warmup {
		return
	}
	if r.ErrorKind != loadgen.ErrDropped && r.ErrorKind != loadgen.ErrNotDue {
		start, end := trunc(r.Intended), trunc(r.End)
		if !s.seen || start < s.win.From {
			s.win.From = start
		}
		if !s.seen || end > s.win.To {
			s.win.To = end
		}
		s.seen = true
		lag := scheduleLag(r)
		s.lagTotal++
		if lag <= j.validity.MaxScheduleLag {
			s.lagWithin++
		}
		if s.lagHist == nil {
			s.lagHist = measure.NewHistogram()
		}
		s.lagHist.RecordValue(histMicros(lag))
	}
	for _, oj := range s.objs {
		if oj.o.applies(r) {
			oj.add(r)
		}
	}
}

// addSession counts one session for a session objective, credited to the
// stage of its last record. session_duration counts the sessions that ran
// their course; one cut by the generator is right-censored as a request
// is (a miss once it had run past the threshold, else counted apart), and
// one that failed is session_success's business. session_success counts
// failed among finished sessions; cut ones are left out.
func (oj *objectiveJudge) addSession(f *loadgen.SessionFigures) {
	o := oj.o
	switch o.Kind() {
	case KindLatency: // session_duration
		if !f.Sent() {
			oj.cut++
			return
		}
		d := trunc(f.End) - trunc(f.Start)
		switch f.Outcome() {
		case loadgen.SessionFailed:
			oj.bad++
		case loadgen.SessionCut:
			if d > o.Threshold {
				oj.censoredMiss++
				oj.lat.add(d, false, 1)
			} else {
				oj.censoredBefore++
			}
		default:
			oj.ok++
			oj.lat.add(d, o.meets(d), 1)
		}
	case KindRatio: // session_success
		switch f.Outcome() {
		case loadgen.SessionCut:
			oj.cut++
			return
		case loadgen.SessionFailed:
			oj.bad++
		}
		oj.counted++
	}
}

// histMicros is d in µs within the standard histogram bounds.
func histMicros(d time.Duration) int64 {
	v := int64(d / time.Microsecond)
	if v < 0 {
		return 0
	}
	return min(v, int64(time.Hour/time.Microsecond))
}

// objectiveJudge is the running state of one objective on one stage.
type objectiveJudge struct {
	o      *Objective
	metric *measure.LatencyMetric // latency objectives judged from records
	rate   *measure.RateMetric    // floors and ratios
	cons   Constraints            // goodput_per_s
	lat    latencyCount
	// ok counts successful records, unstreamed those of them whose answer
	// came as one body: together they explain a latency objective's empty
	// population.
	ok, unstreamed uint64
	// compact counts successful records read from a compact requests.jsonl
	// (no chunk instants: no ICL or ITL samples).
	compact uint64
	// ratio: failed of counted requests; cut, dropped and cancelled were
	// left out, and out those a row's own rule does not count.
	bad, counted, cut, dropped, cancelled, out uint64
	// censoredMiss counts requests cut, timed out or cancelled after a
	// latency threshold had passed (counted as misses), censoredBefore
	// those cut before it (counted apart: their value is unknown).
	censoredMiss, censoredBefore uint64
	// emptyMiss counts answers with no token, or more than asked for
	// (empty_answer, over_generation): misses with no value.
	emptyMiss uint64
	// unjudged counts successful requests goodput could not judge: a TPOT
	// bound on an answer that came as one body.
	unjudged uint64
	// floor: requests or tokens of successful requests; offered the
	// requests offered (failed and dropped too), maxTokens the largest
	// max_tokens sent, unbounded when a request was sent without one.
	work, offered uint64
	maxTokens     int
	unbounded     bool
	// conf is the confidence verdicts are decided at (confidence.go).
	conf float64
	// lagMissed: latency events that missed only by their schedule lag
	// (lagflip.go).
	lagMissed uint64
}

// latencyCount is an exact count of events meeting a threshold, with an HDR
// histogram for the reported quantile.
type latencyCount struct {
	good, total uint64
	hist        *hdrhistogram.Histogram
}

func (c *latencyCount) add(v time.Duration, good bool, n uint64) {
	c.total += n
	if good {
		c.good += n
	}
	if c.hist == nil {
		c.hist = measure.NewHistogram()
	}
	c.hist.RecordValues(histMicros(v), int64(n))
}

// add counts r by the per-record rules of events.go (one definition for
// the verdict here and for the operate phase's SLI events).
func (oj *objectiveJudge) add(r *loadgen.Record) {
	o := oj.o
	if o.perSession() {
		return // counted per session (addSession)
	}
	switch o.Kind() {
	case KindLatency:
		if oj.metric == nil {
			return
		}
		if !r.OK() {
			switch c, v := o.censor(r); c {
			case censoredSeen:
				oj.lat.add(v, o.meets(v), 1)
			case censoredMiss:
				oj.censoredMiss++
				oj.lat.add(v, false, 1)
			case censoredBefore:
				oj.censoredBefore++
			case answeredEmpty:
				// A miss with no value: it counts, the quantile shown
				// comes from the answers that had one.
				oj.emptyMiss++
				oj.lat.total++
			}
			return
		}
		oj.ok++
		if r.Unstreamed {
			oj.unstreamed++
		}
		if r.Compact {
			oj.compact++
		}
		for s := oj.metric.Samples(r); s.Next(); {
			oj.lat.add(s.Value(), o.meets(s.Value()), uint64(s.Weight()))
		}
		oj.countLagMiss(r) // lagflip.go
	case KindRatio:
		switch o.ratioEvent(r) {
		case ratioCut:
			oj.cut++
			return
		case ratioDropped:
			oj.dropped++
			return
		case ratioCancelled:
			oj.cancelled++
			return
		case ratioOut:
			oj.out++
			return
		case ratioBad:
			oj.bad++
		}
		oj.counted++
	case KindFloor:
		if r.ErrorKind != loadgen.ErrNotDue && r.ErrorKind != loadgen.ErrCancelledByDependency {
			oj.offered++
		}
		if r.ErrorKind != loadgen.ErrDropped && !r.NotSent {
			oj.maxTokens = max(oj.maxTokens, r.MaxTokens)
			oj.unbounded = oj.unbounded || r.MaxTokens <= 0
		}
		if !r.OK() {
			return
		}
		switch rate := oj.rate; {
		case rate == nil:
		case rate.Goodput:
			switch good, judged := oj.cons.judge(r); {
			case !judged:
				oj.unjudged++ // no TPOT without a stream: not a miss either
			case good:
				oj.work++
			}
		case rate.Work != nil:
			oj.work += uint64(max(rate.Work(r), 0))
		}
	}
}

// Assess judges the run so far, as the package-level Assess does from
// records; in.Records is ignored (Add has seen them).
func (j *Judge) Assess(in Input) *Report {
	r := &Report{Schema: ReportSchema, SLO: j.spec.Name, EvaluatedAt: in.Now.UTC(), Counts: map[Status]int{}}
	var stages []Stage
	var extra []Waiver
	if j.plan != nil {
		r.Plan = j.plan.Name
		stages = j.plan.Stages
		extra = j.plan.Waivers
	} else {
		for _, name := range j.stageOrder() {
			stages = append(stages, Stage{Name: name})
		}
	}
	manual := map[string]ManualRecord{}
	for _, m := range in.Manual {
		manual[m.Stage] = m
	}
	waivers := append(append([]Waiver(nil), j.spec.Waivers...), extra...)
	for i := range stages {
		st := &stages[i]
		sr := StageReport{Name: st.Name, Manual: st.Manual}
		if st.Manual {
			v, sr := manualStage(st, manual, waivers, in.Now)
			r.Verdicts = append(r.Verdicts, v)
			r.Stages = append(r.Stages, sr)
			continue
		}
		s := j.stages[st.Name]
		if s == nil { // a plan stage is always there; be safe
			s = j.newStage(st.Name, st)
		}
		sr.Counts = s.counts
		vs := j.evaluate(s, in.Now, in.QueueDelay[st.Name], extra, in.Demand[st.Name])
		for _, v := range vs {
			if v.Kind == KindFloor && v.WindowS > 0 {
				sr.WindowS = v.WindowS
			}
		}
		if sr.WindowS == 0 {
			sr.WindowS = s.win.Duration().Seconds()
		}
		cpu, ok := in.ClientCPU[st.Name]
		if ok {
			c := cpu
			sr.ClientCPU = &c
		} else {
			cpu = -1
		}
		r.Problems = append(r.Problems, s.problems(j.validity, cpu, in.Facts[st.Name])...)
		if !j.validity.DistortionWarns {
			r.Problems = append(r.Problems, s.lagFlips(vs, cpu)...) // lagflip.go
		}
		r.Verdicts = append(r.Verdicts, vs...)
		r.Stages = append(r.Stages, sr)
	}
	if f, ok := in.Facts[""]; ok {
		// Facts of the whole run (one pipeline over several stages).
		r.Problems = append(r.Problems, j.validity.factProblems("", f)...)
	}
	if len(stages) == 0 && len(j.spec.Objectives) > 0 {
		// No stage at all: without a plan the stages are those found in
		// the records, so nothing was sent. Nothing is decided from
		// nothing: no verdict is not a PASS.
		r.Problems = append(r.Problems, Problem{Check: "no_data",
			Detail: "no request was recorded: the run sent nothing, so no objective can be judged"})
	}
	v := j.validity
	r.Validity = &v
	r.finish()
	return r
}

// manualStage is a manual stage's verdict and report: the last result
// recorded for it, or PENDING.
func manualStage(st *Stage, manual map[string]ManualRecord, waivers []Waiver, now time.Time) (Verdict, StageReport) {
	sr := StageReport{Name: st.Name, Manual: true}
	v := Verdict{Objective: string(ManualResult), Stage: st.Name, Kind: KindManual, Metric: ManualResult,
		ThresholdText: "pass", Result: Pending, Note: "not recorded yet: tailgate validate --record " + st.Name + "=pass|fail --by NAME"}
	if m, ok := manual[st.Name]; ok {
		mc := m
		sr.ManualResult = &mc
		v.Result, v.Note = Fail, m.Note
		if m.Pass {
			v.Result = Pass
		}
		v.Source = "recorded by " + m.By + " at " + m.At.UTC().Format(time.RFC3339)
	}
	applyWaivers(&v, waivers, now)
	return v, sr
}

// stageOrder lists the stages seen, ordered by each stage's first request
// (lowest Seq), then by name.
func (j *Judge) stageOrder() []string {
	names := make([]string, 0, len(j.stages))
	for n := range j.stages {
		names = append(names, n)
	}
	sortStages(names, func(n string) int64 { return j.stages[n].firstSeq })
	return names
}

// evaluate gives the verdicts of the stage's objectives, the spec's
// waivers and extra applied at now; qd is the stage's server queue delay.
func (j *Judge) evaluate(s *stageJudge, now time.Time, qd *promhist.Histogram, extra []Waiver, d *Demand) []Verdict {
	waivers := append(append([]Waiver(nil), j.spec.Waivers...), extra...)
	out := make([]Verdict, 0, len(s.objs))
	for _, oj := range s.objs {
		v := oj.verdict(s.name, s.win, qd)
		oj.applyDemand(&v, d) // demand.go
		applyWaivers(&v, waivers, now)
		out = append(out, v)
	}
	return out
}
