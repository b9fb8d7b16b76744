package slo

import (
	"sort"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// ReportSchema is verdict.json's schema name.
const ReportSchema = "tailgate.verdict/v1"

// Overall results of a report.
const (
	ReportPass    = "PASS"
	ReportFail    = "FAIL"
	ReportInvalid = "INVALID"
)

// Exit codes (cmd/tailgate).
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitInvalid = 3
)

// Report is verdict.json: every verdict of an acceptance run and the
// overall result.
type Report struct {
	Schema string `json:"schema"`
	Tool   Tool   `json:"tool"`
	Plan   string `json:"plan,omitempty"`
	SLO    string `json:"slo"`
	// EvaluatedAt is the instant waivers were judged at.
	EvaluatedAt time.Time `json:"evaluated_at"`
	// Status is PASS, FAIL or INVALID; ExitCode 0, 1 or 3 to match.
	Status   string         `json:"status"`
	ExitCode int            `json:"exit_code"`
	Counts   map[Status]int `json:"counts"`
	Stages   []StageReport  `json:"stages"`
	Verdicts []Verdict      `json:"verdicts"`
	Problems []Problem      `json:"problems,omitempty"`
}

// Tool names the program that wrote a report.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// StageReport is one stage of a report.
type StageReport struct {
	Name         string        `json:"name"`
	Manual       bool          `json:"manual,omitempty"`
	Counts       StageCounts   `json:"counts"`
	WindowS      float64       `json:"window_s"`
	ManualResult *ManualRecord `json:"manual_result,omitempty"`
	// ClientCPU is the load generator's CPU use during the stage (0–1),
	// when known; check reads it back to judge validity the same way.
	ClientCPU *float64 `json:"client_cpu,omitempty"`
}

// ManualRecord is a person's result for a manual stage.
type ManualRecord struct {
	Stage string    `json:"stage"`
	Pass  bool      `json:"pass"`
	By    string    `json:"by"`
	At    time.Time `json:"at"`
	Note  string    `json:"note,omitempty"`
}

// Input is what Assess judges besides the plan and spec.
type Input struct {
	Records []loadgen.Record
	// Now is the instant waivers are judged at.
	Now time.Time
	// Manual holds recorded results of manual stages (the last per stage
	// counts).
	Manual []ManualRecord
	// QueueDelay is server queue-delay telemetry by stage.
	QueueDelay map[string]*QueueTelemetry
	// ClientCPU is the load generator's CPU use by stage, 0–1 (absent:
	// unknown).
	ClientCPU map[string]float64
	// Windows overrides measured windows by stage.
	Windows map[string]Window
}

// Assess judges a whole run: every applicable objective on every stage, the
// manual stages, and the run's validity. With a nil plan the stages are
// those found in the records (in order of their first request), every
// objective applies, and the default validity bounds hold.
func Assess(p *Plan, spec *Spec, in Input) *Report {
	r := &Report{Schema: ReportSchema, SLO: spec.Name, EvaluatedAt: in.Now.UTC(), Counts: map[Status]int{}}
	var stages []Stage
	validity := DefaultValidity
	var extra []Waiver
	if p != nil {
		r.Plan = p.Name
		stages = p.Stages
		validity = p.Validity
		extra = p.Waivers
	} else {
		for _, name := range StagesOf(in.Records) {
			stages = append(stages, Stage{Name: name})
		}
	}
	manual := map[string]ManualRecord{}
	for _, m := range in.Manual {
		manual[m.Stage] = m
	}
	waivers := append(append([]Waiver(nil), spec.Waivers...), extra...)
	for i := range stages {
		st := &stages[i]
		sr := StageReport{Name: st.Name, Manual: st.Manual}
		if st.Manual {
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
			applyWaivers(&v, waivers, in.Now)
			r.Verdicts = append(r.Verdicts, v)
			r.Stages = append(r.Stages, sr)
			continue
		}
		sr.Counts = CountStage(st.Name, in.Records)
		opt := Options{Now: in.Now, Only: st.Objectives, Waivers: extra, Window: in.Windows[st.Name],
			QueueDelay: in.QueueDelay[st.Name]}
		vs := Evaluate(spec, st.Name, in.Records, opt)
		for _, v := range vs {
			if v.Kind == KindFloor && v.WindowS > 0 {
				sr.WindowS = v.WindowS
			}
		}
		if sr.WindowS == 0 {
			sr.WindowS = measuredWindow(st.Name, in.Records).Duration().Seconds()
		}
		cpu, ok := in.ClientCPU[st.Name]
		if ok {
			c := cpu
			sr.ClientCPU = &c
		} else {
			cpu = -1
		}
		r.Problems = append(r.Problems, CheckValidity(st.Name, in.Records, validity, cpu)...)
		r.Verdicts = append(r.Verdicts, vs...)
		r.Stages = append(r.Stages, sr)
	}
	r.finish()
	return r
}

func measuredWindow(stage string, records []loadgen.Record) Window {
	var w Window
	seen := false
	for i := range records {
		r := &records[i]
		if r.Warmup || r.Stage != stage || r.ErrorKind == loadgen.ErrDropped {
			continue
		}
		s, e := trunc(r.Intended), trunc(r.End)
		if !seen || s < w.Start {
			w.Start = s
		}
		if !seen || e > w.End {
			w.End = e
		}
		seen = true
	}
	return w
}

// finish computes counts, status and exit code.
func (r *Report) finish() {
	for _, v := range r.Verdicts {
		r.Counts[v.Status]++
		if v.Status == NoData {
			r.Problems = append(r.Problems, Problem{Stage: v.Stage, Check: "no_data",
				Detail: "objective " + v.Objective + ": " + v.Note})
		}
	}
	switch {
	case len(r.Problems) > 0:
		r.Status, r.ExitCode = ReportInvalid, ExitInvalid
	case r.Counts[Fail] > 0 || r.Counts[Pending] > 0:
		r.Status, r.ExitCode = ReportFail, ExitFailed
	default:
		r.Status, r.ExitCode = ReportPass, ExitOK
	}
}

// StagesOf lists the stage names in records, ordered by each stage's first
// request (lowest Seq).
func StagesOf(records []loadgen.Record) []string {
	first := map[string]int64{}
	for i := range records {
		r := &records[i]
		if s, ok := first[r.Stage]; !ok || r.Seq < s {
			first[r.Stage] = r.Seq
		}
	}
	names := make([]string, 0, len(first))
	for n := range first {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		if first[names[i]] != first[names[j]] {
			return first[names[i]] < first[names[j]]
		}
		return names[i] < names[j]
	})
	return names
}
