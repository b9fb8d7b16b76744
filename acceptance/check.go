package acceptance

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// Saved is what Check and RecordManual read from a results directory
// besides the records, and what they noticed about it.
type Saved struct {
	Records int64
	Stages  []string // in order of first record
	// Notes say what was odd about the directory (a torn last line, a run
	// cut short); each also appears in the report's problems when it makes
	// the verdict invalid.
	Notes []string
	// Previous is the verdict.json found there, if any.
	Previous *slo.Report
}

// Check re-judges the saved run in dir against spec (and plan, which may be
// nil), with waivers judged at now, reading requests.jsonl as a stream. A
// torn last line is skipped and said; a run that was cut short (no
// summary.json or verdict.json: killed) is judged on what it wrote and
// marked invalid.
func Check(dir results.Dir, spec *slo.Spec, plan *slo.Plan, now time.Time) (*slo.Report, *Saved, error) {
	j := slo.NewJudge(plan, spec)
	sv, err := readSaved(dir, j.Add)
	if err != nil {
		return nil, sv, err
	}
	in := slo.Input{Now: now, ClientCPU: map[string]float64{}}
	if in.QueueDelay, err = dir.ReadQueueDelay(sv.Stages); err != nil {
		return nil, sv, err
	}
	if in.Manual, err = dir.ReadManual(); err != nil {
		return nil, sv, err
	}
	if sv.Previous != nil {
		for _, st := range sv.Previous.Stages {
			if st.ClientCPU != nil {
				in.ClientCPU[st.Name] = *st.ClientCPU
			}
		}
	} else if s, err := dir.ReadSummary(); err == nil && len(sv.Stages) == 1 {
		in.ClientCPU[sv.Stages[0]] = s.Run.CPUUtilization
	}
	rep := j.Assess(in)
	markIncomplete(rep, dir, sv)
	return rep, sv, nil
}

// readSaved streams dir's records to add and says what it found.
func readSaved(dir results.Dir, add func(*loadgen.Record)) (*Saved, error) {
	sv := &Saved{}
	seen := map[string]bool{}
	st, err := results.ReadRecords(dir.Path(results.RecordsFile), func(r *loadgen.Record) error {
		if !seen[r.Stage] {
			seen[r.Stage] = true
			sv.Stages = append(sv.Stages, r.Stage)
		}
		add(r)
		return nil
	})
	sv.Records = st.Records
	if errors.Is(err, os.ErrNotExist) {
		if h, herr := dir.ReadHistograms(); herr == nil && h.Records == results.RecordsNone {
			return sv, fmt.Errorf("%s: the run kept no records (--records none): its figures are in %s, but nothing can be re-judged", dir, results.SummaryFile)
		}
	}
	if err != nil {
		return sv, err
	}
	if st.TornTail {
		sv.Notes = append(sv.Notes, fmt.Sprintf("%s: line %d is torn (the run was killed or the disk filled while writing it); judged the %d records before it",
			dir.Path(results.RecordsFile), st.TornLine, st.Records))
	}
	if prev, err := dir.ReadReport(); err == nil {
		sv.Previous = prev
	}
	return sv, nil
}

// markIncomplete makes the report invalid when the directory shows the run
// did not finish: no summary.json (run) and no verdict.json (validate).
func markIncomplete(rep *slo.Report, dir results.Dir, sv *Saved) {
	_, errS := os.Stat(dir.Path(results.SummaryFile))
	if sv.Previous == nil && errors.Is(errS, os.ErrNotExist) {
		msg := fmt.Sprintf("the run was cut short: %s has no %s or %s (killed before it could write them?); judged the %d records it wrote",
			dir, results.SummaryFile, results.VerdictFile, sv.Records)
		sv.Notes = append(sv.Notes, msg)
		rep.Problems = append(rep.Problems, slo.Problem{Check: "incomplete", Detail: msg})
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	} else if s, err := dir.ReadSummary(); err == nil && s.Run.Interrupted {
		sv.Notes = append(sv.Notes, "the run was interrupted (summary.json run.interrupted): the verdict covers what ran")
	}
}

// RecordManual adds a person's result for a manual stage of plan to the
// saved acceptance run in dir and re-judges it.
func RecordManual(dir results.Dir, plan *slo.Plan, m slo.ManualRecord, version string) (*slo.Report, error) {
	st, found := plan.Stage(m.Stage)
	if !found || !st.Manual {
		return nil, fmt.Errorf("--record: %q is not a manual stage of %s", m.Stage, plan.File)
	}
	j := slo.NewJudge(plan, plan.SLO)
	sv, err := readSaved(dir, j.Add)
	if err != nil {
		return nil, fmt.Errorf("--record needs the run's results: %w", err)
	}
	manual, err := dir.ReadManual()
	if err != nil {
		return nil, err
	}
	manual = append(manual, m)
	if err := dir.WriteManual(manual); err != nil {
		return nil, err
	}
	queue, err := dir.ReadQueueDelay(sv.Stages)
	if err != nil {
		return nil, err
	}
	in := slo.Input{Now: m.At, Manual: manual, ClientCPU: map[string]float64{}, QueueDelay: queue}
	if sv.Previous != nil {
		for _, s := range sv.Previous.Stages {
			if s.ClientCPU != nil {
				in.ClientCPU[s.Name] = *s.ClientCPU
			}
		}
	}
	rep := j.Assess(in)
	if err := Finish(dir, rep, readEnvironment(dir), version); err != nil {
		return rep, err
	}
	return rep, nil
}
