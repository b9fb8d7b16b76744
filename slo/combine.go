package slo

// Combine makes a plan's report from its stages' reports, each judged by
// the pipeline that ran the stage (its objectives, waivers and validity):
// it adds the manual stages and judges nothing again from records. A stage
// with no report did not run (the plan was stopped before it). in.Now is
// when the manual stages' waivers are judged; in.Manual their results.
func Combine(p *Plan, stages map[string]*Report, bounds Validity, in Input) *Report {
	r := &Report{Schema: ReportSchema, SLO: p.SLO.Name, Plan: p.Name, EvaluatedAt: in.Now.UTC(), Counts: map[Status]int{}}
	b := bounds
	r.Validity = &b
	manual := map[string]ManualRecord{}
	for _, m := range in.Manual {
		manual[m.Stage] = m
	}
	waivers := p.AllWaivers()
	for i := range p.Stages {
		st := &p.Stages[i]
		if st.Manual {
			v, sr := manualStage(st, manual, waivers, in.Now)
			r.Verdicts = append(r.Verdicts, v)
			r.Stages = append(r.Stages, sr)
			continue
		}
		rep := stages[st.Name]
		if rep == nil {
			r.Stages = append(r.Stages, StageReport{Name: st.Name})
			r.Problems = append(r.Problems, Problem{Stage: st.Name, Check: "no_requests", Detail: "the stage did not run"})
			continue
		}
		for _, sr := range rep.Stages {
			if sr.Name == st.Name {
				r.Stages = append(r.Stages, sr)
			}
		}
		r.Verdicts = append(r.Verdicts, rep.Verdicts...)
		for _, pr := range rep.Problems {
			if pr.Check == "no_data" {
				continue // finish says it again, from the verdict
			}
			if pr.Stage == "" {
				pr.Stage = st.Name
			}
			r.Problems = append(r.Problems, pr)
		}
	}
	r.finish()
	return r
}
