package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// Review is the periodic (monthly) review of a directory of results:
// what a capacity review asks for, from what tailgate wrote in the
// period. Every section says when it has nothing to show.
type Review struct {
	Root        string            `json:"root"`
	From        time.Time         `json:"from"`
	To          time.Time         `json:"to"`
	Results     []Entry           `json:"results"`
	Canaries    []CanaryObjective `json:"canaries"`
	Changes     []Change          `json:"changes"`
	Capacity    []SweepEntry      `json:"capacity"`
	Efficiency  []Efficiency      `json:"efficiency"`
	Regressions []Regression      `json:"regressions"`
	Waivers     []OpenWaiver      `json:"waivers"`
	// Skipped are directories that looked like results but could not be
	// read, with why.
	Skipped []string `json:"skipped,omitempty"`
}

// Entry is one result of the period.
type Entry struct {
	Dir     string    `json:"dir"`
	Kind    string    `json:"kind"`
	At      time.Time `json:"at"`
	Status  string    `json:"status"`
	Changes []string  `json:"changes,omitempty"`
}

// CanaryObjective is one objective of one canary target, from a saved
// /status document.
type CanaryObjective struct {
	File      string  `json:"file"`
	Target    string  `json:"target"`
	Objective string  `json:"objective"`
	Goal      float64 `json:"goal"`
	// Good and Total are the SLO window's events as far as the canary saw
	// it (SeenS seconds of it); BudgetRemaining the share of the error
	// budget left there.
	Good            uint64    `json:"good"`
	Total           uint64    `json:"total"`
	SeenS           float64   `json:"seen_s"`
	BudgetRemaining float64   `json:"budget_remaining"`
	EvaluatedAt     time.Time `json:"evaluated_at"`
}

// Change is a change id recorded on a result of the period.
type Change struct {
	ID  string    `json:"id"`
	Dir string    `json:"dir"`
	At  time.Time `json:"at"`
}

// SweepEntry is a sweep's capacity finding.
type SweepEntry struct {
	Dir        string    `json:"dir"`
	At         time.Time `json:"at"`
	SLOMax     string    `json:"slo_max"`
	SLOMaxRate float64   `json:"slo_max_rate_per_s,omitempty"`
	// LowerBound: the SLO-max is only a lower bound ("≥ r16").
	LowerBound bool       `json:"lower_bound,omitempty"`
	Knee       string     `json:"knee,omitempty"`
	Headroom   string     `json:"headroom,omitempty"`
	ReachesAt  *time.Time `json:"reaches_slo_max_at,omitempty"`
}

// Efficiency is a result's use of its GPUs: the share of time they sat
// idle, when measured.
type Efficiency struct {
	Dir          string   `json:"dir"`
	Part         string   `json:"part"`
	GPUIdleShare *float64 `json:"gpu_idle_share,omitempty"`
	GPUUtilMean  *float64 `json:"gpu_utilization_mean,omitempty"`
	// JoulesPerOutputToken and CostPerMillionOutputTokensUSD are the
	// part's energy figures, when its GPUs' energy was read.
	JoulesPerOutputToken          *float64 `json:"joules_per_output_token,omitempty"`
	CostPerMillionOutputTokensUSD *float64 `json:"cost_per_million_output_tokens_usd,omitempty"`
	OutputTokensPerS              float64  `json:"output_tokens_per_s"`
}

// Regression is a result compared with the previous comparable one of the
// period.
type Regression struct {
	Baseline  string   `json:"baseline"`
	Candidate string   `json:"candidate"`
	Verdict   string   `json:"verdict"`
	Rows      []string `json:"rows,omitempty"`
}

// OpenWaiver is a waiver that still waives at the end of the period.
type OpenWaiver struct {
	Objective string    `json:"objective"`
	Stage     string    `json:"stage,omitempty"`
	Owner     string    `json:"owner"`
	Reason    string    `json:"reason"`
	Expires   time.Time `json:"expires"`
	DaysLeft  int       `json:"days_left"`
	Dir       string    `json:"dir"`
}

// ReadReview reads every results directory under root (itself, its
// children and grandchildren) and every saved canary /status document
// (JSON, schema tailgate.canary.status/v1) whose time falls in
// [now − since, now], and assembles the review; cmp finds the
// regressions between comparable results.
func ReadReview(root string, since time.Duration, now time.Time, cmp Comparer) (*Review, error) {
	rv := &Review{Root: root, From: now.Add(-since).UTC(), To: now.UTC()}
	in := func(t time.Time) bool { return !t.Before(rv.From) && !t.After(rv.To) }
	var dirs []string
	var statusFiles []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		depth := 0
		if rel != "." {
			depth = strings.Count(rel, string(filepath.Separator)) + 1
		}
		if d.IsDir() {
			if depth > 2 || (depth > 0 && isResultsPart(p)) {
				return filepath.SkipDir
			}
			if isResults(results.Dir(p)) {
				dirs = append(dirs, p)
				return filepath.SkipDir // its stages and levels belong to it
			}
			return nil
		}
		if strings.HasSuffix(p, ".json") && depth <= 3 {
			statusFiles = append(statusFiles, p)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	type found struct {
		e   Entry
		src *Source
	}
	var all []found
	for _, d := range dirs {
		e, src, err := readEntry(d)
		if err != nil {
			rv.Skipped = append(rv.Skipped, fmt.Sprintf("%s: %v", d, err))
			continue
		}
		if !in(e.At) {
			continue
		}
		all = append(all, found{e, src})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].e.At.Before(all[j].e.At) })
	for _, f := range all {
		rv.Results = append(rv.Results, f.e)
		for _, c := range f.e.Changes {
			rv.Changes = append(rv.Changes, Change{ID: c, Dir: f.e.Dir, At: f.e.At})
		}
		if f.src.Sweep != nil {
			rv.Capacity = append(rv.Capacity, sweepEntry(f.e, f.src.Sweep))
		}
		for _, p := range f.src.Parts {
			if s := p.Summary; s != nil && s.Telemetry != nil && (s.Telemetry.GPUIdleShare != nil || s.Telemetry.GPUUtilization != nil || s.Energy != nil) {
				ef := Efficiency{Dir: f.e.Dir, Part: p.Name, GPUIdleShare: s.Telemetry.GPUIdleShare, OutputTokensPerS: s.Throughput.OutputTokensPerS}
				if u := s.Telemetry.GPUUtilization; u != nil {
					m := u.Mean
					ef.GPUUtilMean = &m
				}
				for _, e := range s.Energy { // a part is one stage
					ef.JoulesPerOutputToken, ef.CostPerMillionOutputTokensUSD = e.JoulesPerOutputToken, e.CostPerMillionOutputTokensUSD
				}
				rv.Efficiency = append(rv.Efficiency, ef)
			}
		}
		if f.src.Verdict != nil {
			rv.Waivers = append(rv.Waivers, openWaivers(f.e.Dir, f.src.Verdict, rv.To)...)
		}
	}
	rv.Waivers = dedupeWaivers(rv.Waivers)
	es := make([]Entry, len(all))
	for i, f := range all {
		es[i] = f.e
	}
	rv.Regressions = regressions(es, cmp)
	for _, p := range statusFiles {
		objs, ok := readCanaryStatus(p)
		if !ok {
			continue
		}
		for _, o := range objs {
			if in(o.EvaluatedAt) {
				rv.Canaries = append(rv.Canaries, o)
			}
		}
	}
	return rv, nil
}

// isResults reports whether d is a run's, a validate's or a sweep's
// results directory.
func isResults(d results.Dir) bool {
	return d.HasSweep() || exists(d.Path(results.SummaryFile)) || exists(d.Path(results.VerdictFile))
}

// isResultsPart: a stage or level directory belongs to the results above
// it, and is not a result of its own.
func isResultsPart(p string) bool {
	parent := filepath.Base(filepath.Dir(p))
	return parent == results.StagesDir || parent == results.LevelsDir
}

// readEntry reads one results directory and when it ran.
func readEntry(dir string) (Entry, *Source, error) {
	src, err := Read(dir)
	if err != nil {
		return Entry{}, nil, err
	}
	e := Entry{Dir: dir, Kind: src.Kind}
	changes := map[string]bool{}
	for _, p := range src.Parts {
		if s := p.Summary; s != nil {
			if t, err := time.Parse(time.RFC3339, s.Run.Started); err == nil && (e.At.IsZero() || t.Before(e.At)) {
				e.At = t
			}
			for _, c := range s.Changes {
				changes[c] = true
			}
		}
	}
	switch {
	case src.Sweep != nil:
		e.At = src.Sweep.Started
		for _, c := range src.Sweep.Changes {
			changes[c] = true
		}
		e.Status = "no SLO-max"
		if m := src.Sweep.SLOMax; m != nil {
			e.Status = "SLO-max " + m.Level
			if m.LowerBound {
				e.Status = "SLO-max ≥ " + m.Level
			}
		}
	case src.Verdict != nil:
		e.Status = src.Verdict.Status
		if e.At.IsZero() {
			e.At = src.Verdict.EvaluatedAt
		}
	default:
		e.Status = "not judged"
		if p := src.Parts[0].Summary; p != nil && !p.Validity.Valid {
			e.Status = "INVALID"
		}
	}
	if e.At.IsZero() {
		return e, nil, fmt.Errorf("no time recorded (%s run.started, %s or %s)", results.SummaryFile, results.VerdictFile, results.SweepFile)
	}
	e.At = e.At.UTC()
	for c := range changes {
		e.Changes = append(e.Changes, c)
	}
	sort.Strings(e.Changes)
	return e, src, nil
}

func sweepEntry(e Entry, sw *results.Sweep) SweepEntry {
	s := SweepEntry{Dir: e.Dir, At: e.At, SLOMax: "none: no level met every objective"}
	if m := sw.SLOMax; m != nil {
		s.SLOMax, s.LowerBound = m.Label(), m.LowerBound
		s.SLOMaxRate = m.RatePerS
		if m.Concurrency > 0 {
			s.SLOMaxRate = m.AchievedPerS
		}
	}
	if k := sw.Knee; k != nil {
		s.Knee = fmt.Sprintf("%s (%.1f req/s achieved)", k.Level, k.AchievedPerS)
	}
	if h := sw.Headroom; h != nil {
		s.Headroom, s.ReachesAt = h.Note, h.ReachesAt
	}
	return s
}

// openWaivers are the waivers of a verdict that still waive at now.
func openWaivers(dir string, rep *slo.Report, now time.Time) []OpenWaiver {
	var out []OpenWaiver
	for _, v := range rep.Verdicts {
		w := v.Waiver
		if w == nil || w.Expired(now) {
			continue
		}
		out = append(out, OpenWaiver{Objective: w.Objective, Stage: w.Stage, Owner: w.Owner, Reason: w.Reason,
			Expires: w.Expires, DaysLeft: int(w.Expires.Sub(now).Hours() / 24), Dir: dir})
	}
	return out
}

// dedupeWaivers keeps the latest result's copy of each waiver, soonest
// expiry first.
func dedupeWaivers(ws []OpenWaiver) []OpenWaiver {
	seen := map[string]int{}
	var out []OpenWaiver
	for _, w := range ws {
		k := w.Objective + "\x00" + w.Stage + "\x00" + w.Owner + "\x00" + w.Reason
		if i, ok := seen[k]; ok {
			out[i] = w
			continue
		}
		seen[k] = len(out)
		out = append(out, w)
	}
	slices.SortStableFunc(out, func(a, b OpenWaiver) int { return a.Expires.Compare(b.Expires) })
	return out
}

// Comparer compares a candidate result with a baseline one as tailgate
// compare does (comparison.Brief). The review takes it as an argument so
// that report, an output package, imports no use case. An error wrapping
// results.ErrNotComparable: the baseline cannot serve, an earlier one may.
type Comparer func(baseline, candidate string) (*results.ComparisonOutcome, error)

// regressions compares each run or validate of the period with the
// latest earlier one that compare accepts as the same plan or mix (none
// without a Comparer).
func regressions(es []Entry, cmp Comparer) []Regression {
	var out []Regression
	if cmp == nil {
		return nil
	}
	for i, cand := range es {
		if cand.Kind == KindSweep {
			continue
		}
		for j := i - 1; j >= 0; j-- {
			base := es[j]
			if base.Kind != cand.Kind {
				continue
			}
			o, err := cmp(base.Dir, cand.Dir)
			if errors.Is(err, results.ErrNotComparable) {
				continue // another plan or mix: not its baseline
			}
			if err != nil {
				break
			}
			r := Regression{Baseline: base.Dir, Candidate: cand.Dir, Verdict: "not shown to differ", Rows: o.Rows}
			switch {
			case o.Regressions > 0:
				r.Verdict = fmt.Sprintf("%d regressions", o.Regressions)
			case o.Judged == 0:
				r.Verdict = "too few requests to judge"
			case o.DemandChanged:
				r.Verdict = "demand changed"
			}
			out = append(out, r)
			break
		}
	}
	return out
}

// readCanaryStatus reads a saved canary /status document (false when the
// file is not one).
func readCanaryStatus(path string) ([]CanaryObjective, bool) {
	b, err := os.ReadFile(path)
	if err != nil || !strings.Contains(string(b[:min(len(b), 200)]), results.CanaryStatusSchema) {
		return nil, false
	}
	var st results.CanaryStatus
	if json.Unmarshal(b, &st) != nil || st.Schema != results.CanaryStatusSchema {
		return nil, false
	}
	var out []CanaryObjective
	for _, t := range st.Targets {
		for _, o := range t.Objectives {
			out = append(out, CanaryObjective{File: path, Target: t.Name, Objective: o.Name, Goal: o.Objective,
				Good: o.SLOWindow.Good, Total: o.SLOWindow.Good + o.SLOWindow.Bad, SeenS: o.SLOWindow.SeenS,
				BudgetRemaining: o.BudgetRemaining, EvaluatedAt: st.EvaluatedAt.UTC()})
		}
	}
	return out, true
}
