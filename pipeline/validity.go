package pipeline

import (
	"github.com/tailgate-llm/tailgate/internal/version"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// newJudge is the run's judge: the SLO's objectives (those the plan stage
// applies), or none, for validity alone; held to spec.Validity.
func newJudge(spec Spec) *slo.Judge {
	sloSpec := &slo.Spec{}
	var plan *slo.Plan
	if j := spec.SLO; j != nil {
		sloSpec = j.Spec
		if j.Stage != nil || len(j.Waivers) > 0 {
			plan = &slo.Plan{Waivers: j.Waivers}
			if j.Stage != nil {
				plan.Stages = []slo.Stage{*j.Stage}
			} else {
				for _, st := range spec.Options.Stages {
					plan.Stages = append(plan.Stages, slo.Stage{Name: st.Name})
				}
			}
		}
	}
	judge := slo.NewJudge(plan, sloSpec)
	v := slo.DefaultValidity()
	if spec.Validity != nil {
		v = *spec.Validity
	}
	judge.SetValidity(v)
	return judge
}

// judgeRun judges the run: the records' counts and verdicts, and what the
// pipeline knows beside them (Facts: interruption, the self-check, results
// not written, the run stopped early). With one stage the facts are that
// stage's; with several, the whole run's.
func judgeRun(judge *slo.Judge, spec Spec, res *Result, runErr error) *slo.Report {
	f := RunFacts(res.Summary, res.Info.Interrupted)
	var incomplete []string
	if we := res.WriteErr(); we != nil {
		incomplete = append(incomplete, we.Error())
	}
	if res.Stopped != nil && res.WriteErr() == nil {
		incomplete = append(incomplete, "the run was stopped early: "+res.Stopped.Error())
	}
	if runErr != nil {
		incomplete = append(incomplete, "the run failed: "+runErr.Error())
	}
	f.Incomplete = strings.Join(incomplete, "; ")
	key := ""
	cpu := map[string]float64{}
	if len(spec.Options.Stages) == 1 {
		key = spec.Options.Stages[0].Name
		cpu[key] = res.Info.CPUUtilization
	}
	now := time.Now().UTC()
	if spec.SLO != nil && !spec.SLO.Now.IsZero() {
		now = spec.SLO.Now
	}
	in := slo.Input{Now: now, QueueDelay: results.QueueDelayByStage(res.QueueDelay),
		ClientCPU: cpu, Facts: map[string]slo.Facts{key: f}}
	if spec.SLO != nil && spec.SLO.Demand != nil && key != "" {
		in.Demand = map[string]*slo.Demand{key: spec.SLO.Demand}
	}
	rep := judge.Assess(in)
	rep.Tool = version.NewTool(spec.Meta.Version)
	return rep
}

// RunFacts are the validity facts a summary holds: interruption and the
// self-check (check reads them back from a saved summary.json).
func RunFacts(s *results.Summary, interrupted bool) slo.Facts {
	f := slo.Facts{Interrupted: interrupted}
	if sc := s.SelfCheck; sc.Distorted {
		f.Distorted, f.Distortion = true, sc.Reasons
	}
	return f
}

// Validity judges a merged run's summary as one run: its counts by the
// bounds, with its facts (interruption, self-check, writeErr: the first
// failure to write results).
func Validity(s *results.Summary, bounds slo.Validity, writeErr error) results.Validity {
	f := RunFacts(s, s.Run.Interrupted)
	if writeErr != nil {
		f.Incomplete = writeErr.Error()
	}
	return results.NewValidity(bounds, bounds.Problems("", slo.CountsOf(s.Requests), f))
}
