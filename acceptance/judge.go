package acceptance

import (
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/slo"
)

// Judge is the SLO judge fed as records arrive.
// TODO(merge): slo.NewJudge (exact streaming counts) replaces this copy.
type Judge struct {
	plan *slo.Plan
	spec *slo.Spec
	recs []loadgen.Record
}

// NewJudge judges records against spec (and plan, which may be nil).
func NewJudge(plan *slo.Plan, spec *slo.Spec) *Judge { return &Judge{plan: plan, spec: spec} }

func (j *Judge) Add(r *loadgen.Record) { j.recs = append(j.recs, *r) }

func (j *Judge) Assess(in slo.Input) *slo.Report {
	in.Records = j.recs
	return slo.Assess(j.plan, j.spec, in)
}
