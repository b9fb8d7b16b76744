package acceptance

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
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
	// Disagree says, per records file, how it disagrees with the
	// summary.json beside it (results.RecordsDisagree): records lost or
	// changed after the run, which no verdict may PASS.
	Disagree []string
}

// Check re-judges the saved run in dir against spec (and plan, which may be
// nil), with waivers judged at now, reading requests.jsonl as a stream. A
// torn last line is skipped and said; a run that was cut short (no
// summary.json or verdict.json: killed) is judged on what it wrote and
// marked invalid.
//
// The run is held to the validity bounds saved with it (summary.json,
// verdict.json or histograms.json; the plan's or the defaults for a run
// saved before the bounds were) and to the facts its summaries saved
// (interrupted, the self-check), so check of a run directory gives the
// verdict and exit code the run gave.
func Check(dir results.Dir, spec *slo.Spec, plan *slo.Plan, now time.Time) (*slo.Report, *Saved, error) {
	return CheckDemand(dir, spec, plan, now, nil)
}

// CheckDemand is Check of a run whose one stage offered demand by itself
// (a sweep level's rate; nil: none), so a floor that load could not reach
// is N/A, as the sweep judged it.
func CheckDemand(dir results.Dir, spec *slo.Spec, plan *slo.Plan, now time.Time, demand *slo.Demand) (*slo.Report, *Saved, error) {
	j := slo.NewJudge(plan, spec)
	sv, err := readSaved(dir, j.Add)
	if err != nil {
		return nil, sv, err
	}
	facts := savedJudgement(dir, j, plan, sv)
	in := slo.Input{Now: now, ClientCPU: map[string]float64{}, Facts: facts}
	if demand != nil && len(sv.Stages) == 1 {
		in.Demand = map[string]*slo.Demand{sv.Stages[0]: demand}
	}
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
	markDisagree(rep, sv)
	return rep, sv, nil
}

// markDisagree makes the report invalid when the records read are not
// those the run wrote: nothing is decided from records that disagree with
// the summary.
func markDisagree(rep *slo.Report, sv *Saved) {
	for _, d := range sv.Disagree {
		rep.Problems = append(rep.Problems, slo.Problem{Check: "records_disagree", Detail: d})
		rep.Status, rep.ExitCode = slo.ReportInvalid, slo.ExitInvalid
	}
}

// savedJudgement sets j's bounds to those saved with the run in dir and
// returns the validity facts its summaries saved, by stage ("" for a run
// of several stages in one summary).
func savedJudgement(dir results.Dir, j *slo.Judge, plan *slo.Plan, sv *Saved) map[string]slo.Facts {
	facts := map[string]slo.Facts{}
	// The bounds saved with the run win over the plan's: the run may have
	// been held to flags over them. Most specific first: a stage's own
	// summary, the run's summary, histograms.json, verdict.json.
	var bounds *slo.Validity
	for _, name := range sv.Stages {
		if s, err := dir.Stage(name).ReadSummary(); err == nil {
			if s.Validity.Bounds != nil && bounds == nil {
				bounds = s.Validity.Bounds
			}
			facts[name] = summaryFacts(s)
		}
	}
	if s, err := dir.ReadSummary(); err == nil {
		if s.Validity.Bounds != nil && bounds == nil {
			bounds = s.Validity.Bounds
		}
		key := ""
		if len(sv.Stages) == 1 {
			key = sv.Stages[0]
		}
		facts[key] = summaryFacts(s)
	}
	if h, err := dir.ReadHistograms(); err == nil && bounds == nil {
		b := h.Bounds()
		bounds = &b
	}
	if sv.Previous != nil && sv.Previous.Validity != nil && bounds == nil {
		bounds = sv.Previous.Validity
	}
	if plan != nil && bounds == nil {
		b := plan.Validity
		bounds = &b
	}
	if bounds != nil {
		j.SetValidity(*bounds)
	}
	return facts
}

// summaryFacts are the validity facts a saved summary holds: those records
// cannot show (interrupted, the self-check, results not written).
func summaryFacts(s *results.Summary) slo.Facts {
	f := pipeline.RunFacts(s, s.Run.Interrupted)
	for _, r := range s.Validity.Reasons {
		if _, d, ok := strings.Cut(r, "results_incomplete: "); ok {
			f.Incomplete = d
		}
	}
	return f
}

// readSaved streams dir's records to add (a run's, or every stage's of a
// validate) and says what it found.
func readSaved(dir results.Dir, add func(*loadgen.Record)) (*Saved, error) {
	sv := &Saved{}
	seen := map[string]bool{}
	st, err := dir.ReadRunRecords(func(r *loadgen.Record) error {
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
			return sv, &field.Error{Field: "Records", Hint: "{} none",
				Err: fmt.Errorf("%s: the run kept no records: its figures are in %s, but nothing can be re-judged", dir, results.SummaryFile)}
		}
	}
	if err != nil {
		return sv, err
	}
	for _, fd := range st.Files {
		if d := results.RecordsDisagree(fd); d != "" {
			sv.Disagree = append(sv.Disagree, d)
		}
	}
	if st.TornTail {
		sv.Notes = append(sv.Notes, fmt.Sprintf("%s: line %d is torn (the run was killed or the disk filled while writing it); judged the %d records before it",
			st.TornPath, st.TornLine, st.Records))
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
		sv.Notes = append(sv.Notes, "the run was interrupted ("+results.SummaryFile+" run.interrupted): the verdict covers what ran")
	}
}

// RecordManual adds a person's result for a manual stage of plan to the
// saved acceptance run in dir and re-judges it.
func RecordManual(dir results.Dir, plan *slo.Plan, m slo.ManualRecord, version string) (*slo.Report, error) {
	st, found := plan.Stage(m.Stage)
	if !found || !st.Manual {
		return nil, field.Errorf("Record", "%q: not a manual stage of %s", m.Stage, plan.File)
	}
	j := slo.NewJudge(plan, plan.SLO)
	sv, err := readSaved(dir, j.Add)
	if err != nil {
		return nil, field.Errorf("Record", "needs the run's results: %w", err)
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
	in := slo.Input{Now: m.At, Manual: manual, ClientCPU: map[string]float64{}, QueueDelay: queue,
		Facts: savedJudgement(dir, j, plan, sv)}
	if sv.Previous != nil {
		for _, s := range sv.Previous.Stages {
			if s.ClientCPU != nil {
				in.ClientCPU[s.Name] = *s.ClientCPU
			}
		}
	}
	rep := j.Assess(in)
	markDisagree(rep, sv)
	if err := Finish(dir, rep, readEnvironment(dir), version); err != nil {
		return rep, err
	}
	return rep, nil
}
