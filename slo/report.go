package slo

import (
	"github.com/tailgate-llm/tailgate/internal/version"
	"sort"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
)

// ReportSchema is verdict.json's schema name.
const ReportSchema = "tailgate.verdict/v1"

// Overall results of a report.
const (
	ReportPass    = "PASS"
	ReportFail    = "FAIL"
	ReportInvalid = "INVALID"
	// ReportInconclusive: no objective failed, but some verdict is
	// INCONCLUSIVE (confidence.go).
	ReportInconclusive = "INCONCLUSIVE"
)

// Exit codes: tailgate's one set, documented in docs/exit-codes.md, for every
// command (cmd/tailgate), every report (Report.ExitCode) and compare.
// They live here, not in results, because a Report carries its code and
// results imports slo. results.Exit is the one precedence rule:
// invalid (3) > failed (1) > inconclusive (4) > pass (0).
const (
	// ExitOK: ran, and every objective passed or was waived.
	ExitOK = 0
	// ExitFailed: an objective failed (or a manual stage is pending).
	ExitFailed = 1
	// ExitUsage: bad flags or configuration.
	ExitUsage = 2
	// ExitInvalid: the run itself is invalid (unreachable server, too
	// many errors, client bottleneck, results not written).
	ExitInvalid = 3
	// ExitInconclusive: the sample decided no failure but did not decide
	// every objective.
	ExitInconclusive = 4
)

// Report is verdict.json: every verdict of an acceptance run and the
// overall result.
type Report struct {
	Schema string       `json:"schema"`
	Tool   version.Tool `json:"tool"`
	Plan   string       `json:"plan,omitempty"`
	SLO    string       `json:"slo"`
	// EvaluatedAt is the instant waivers were judged at.
	EvaluatedAt time.Time `json:"evaluated_at"`
	// Status is PASS, FAIL, INCONCLUSIVE or INVALID; ExitCode 0, 1, 4 or
	// 3 to match.
	Status   string         `json:"status"`
	ExitCode int            `json:"exit_code"`
	Counts   map[Status]int `json:"counts"`
	Stages   []StageReport  `json:"stages"`
	Verdicts []Verdict      `json:"verdicts"`
	Problems []Problem      `json:"problems,omitempty"`
	// Validity is the bounds the run was held to (the problems above);
	// nil in reports written before the bounds were saved.
	Validity *Validity `json:"validity,omitempty"`
}

// StageReport is one stage of a report.
type StageReport struct {
	Name    string      `json:"name"`
	Manual  bool        `json:"manual,omitempty"`
	Counts  StageCounts `json:"counts"`
	WindowS float64     `json:"window_s"`
	// Started is when the stage began (its summary's run.started), the
	// instant junit.xml gives the stage; zero when not known.
	Started      time.Time     `json:"started,omitzero"`
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
	// Records are judged by the package-level Assess; Judge.Assess ignores
	// them (it has been given its records one by one).
	Records []loadgen.Record
	// Now is the instant waivers are judged at.
	Now time.Time
	// Manual holds recorded results of manual stages (the last per stage
	// counts).
	Manual []ManualRecord
	// QueueDelay is the server's queue-delay histogram by stage: its
	// increase over the stage (queuedelay.go).
	QueueDelay map[string]*promhist.Histogram
	// ClientCPU is the load generator's CPU use by stage, 0–1 (absent:
	// unknown).
	ClientCPU map[string]float64
	// Facts are what validity is judged on beyond the records, by stage
	// ("" for the whole run).
	Facts map[string]Facts
	// Demand is the load a stage offered by itself (an open loop's rate),
	// by stage: a floor it could not reach is NotApplicable there
	// (demand.go). Absent: every floor applies.
	Demand map[string]*Demand
}

// Assess judges a whole run: every applicable objective on every stage, the
// manual stages, and the run's validity. With a nil plan the stages are
// those found in the records (in order of their first request), every
// objective applies, and the default validity bounds hold. It is a Judge
// fed in.Records; a caller that has the records as a stream should use the
// Judge itself.
func Assess(p *Plan, spec *Spec, in Input) *Report {
	j := NewJudge(p, spec)
	for i := range in.Records {
		j.Add(&in.Records[i])
	}
	return j.Assess(in)
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
	case r.Counts[Inconclusive] > 0:
		r.Status, r.ExitCode = ReportInconclusive, ExitInconclusive
	case len(r.Verdicts) > 0 && r.Counts[NotApplicable] == len(r.Verdicts):
		// Nothing is decided from nothing: no objective applied.
		r.Status, r.ExitCode = ReportInconclusive, ExitInconclusive
	default:
		r.Status, r.ExitCode = ReportPass, ExitOK
	}
}

// sortStages orders stage names by their first Seq, then by name.
func sortStages(names []string, first func(string) int64) {
	sort.Slice(names, func(i, j int) bool {
		if a, b := first(names[i]), first(names[j]); a != b {
			return a < b
		}
		return names[i] < names[j]
	})
}
