package acceptance

import (
	"time"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// Rejudge judges the records saved in dir (its stages' requests.jsonl, any
// form; see results.Dir.ReadRunRecords) under plan, exactly as Run judges
// its own at the end, and writes the verdicts, env and a new manifest
// (Finish). cpu is each stage's client
// CPU use, 0–1. It is how a directory assembled from the shards of a
// sharded validate gets its one verdict.
func Rejudge(dir results.Dir, plan *slo.Plan, cpu map[string]float64, env *evidence.Environment, version string, now time.Time) (*slo.Report, error) {
	j := slo.NewJudge(plan, plan.SLO)
	sv, err := readSaved(dir, j.Add)
	if err != nil {
		return nil, err
	}
	queue, err := dir.ReadQueueDelay(sv.Stages)
	if err != nil {
		return nil, err
	}
	manual, err := dir.ReadManual()
	if err != nil {
		return nil, err
	}
	if cpu == nil {
		cpu = map[string]float64{}
	}
	facts := savedJudgement(dir, j, plan, sv)
	rep := j.Assess(slo.Input{Now: now, Manual: manual, ClientCPU: cpu, QueueDelay: queue, Facts: facts})
	markDisagree(rep, sv)
	return rep, Finish(dir, rep, env, version)
}
