package comparison

import (
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// SweepSchema names a sweep comparison's JSON.
const SweepSchema = "tailgate.compare-sweeps/v1"

// Verdicts of a sweep's SLO-max.
const (
	CapacityLower  = "lower"               // the candidate holds the SLO to a lower load
	CapacityHigher = "higher"              // to a higher one
	CapacitySame   = "not shown to differ" // the two intervals overlap
	CapacityNone   = "unknown"             // a side found no passing level or ran none
)

// SweepReport compares two sweeps: the SLO-max of each with the interval
// its search leaves it in, the knee of each, and every load level that both
// ran compared as two runs are.
type SweepReport struct {
	Schema    string `json:"schema"`
	Baseline  string `json:"baseline"`
	Candidate string `json:"candidate"`
	// Unit is "req/s" (open loop) or "concurrent" (closed loop).
	Unit   string        `json:"unit"`
	SLOMax SLOMaxChange  `json:"slo_max"`
	Knee   KneeChange    `json:"knee"`
	Levels []LevelChange `json:"levels"`
	Demand []string      `json:"demand_changes,omitempty"`
	// BaselineChanges and CandidateChanges are the change ids each sweep
	// recorded (--change).
	BaselineChanges  []string `json:"baseline_changes,omitempty"`
	CandidateChanges []string `json:"candidate_changes,omitempty"`
	Warnings         []string `json:"warnings,omitempty"`
	Regressions      int      `json:"regressions"`
	ExitCode         int      `json:"exit_code"`
}

// Interval is where a sweep's search leaves the true SLO-max: at least
// Low (the highest level that passed; 0 when none did) and below High (the
// lowest level above it that failed; +Inf, written as null, when none
// did).
type Interval struct {
	Low       float64  `json:"low"`
	High      *float64 `json:"high"`
	LowLevel  string   `json:"low_level,omitempty"`
	HighLevel string   `json:"high_level,omitempty"`
}

func (iv Interval) high() float64 {
	if iv.High == nil {
		return math.Inf(1)
	}
	return *iv.High
}

// String is "[40, 42)" or "[40, ∞)".
func (iv Interval) String() string {
	h := "∞"
	if iv.High != nil {
		h = fmt.Sprintf("%g", *iv.High)
	}
	return fmt.Sprintf("[%g, %s)", iv.Low, h)
}

// SLOMaxChange is the SLO-max of each sweep and how it moved:
// ChangeLowPct and ChangeHighPct bound candidate/baseline − 1 given both
// intervals (null: unbounded).
type SLOMaxChange struct {
	Baseline      Interval `json:"baseline"`
	Candidate     Interval `json:"candidate"`
	ChangeLowPct  *float64 `json:"change_low_pct"`
	ChangeHighPct *float64 `json:"change_high_pct"`
	Verdict       string   `json:"verdict"`
	Note          string   `json:"note,omitempty"`
}

// KneeChange is each sweep's knee: the lower level of the first pair
// where latency grows faster than load, so it lies between that level and
// the next one run.
type KneeChange struct {
	Baseline  *results.SweepPoint `json:"baseline"`
	Candidate *results.SweepPoint `json:"candidate"`
	Note      string              `json:"note,omitempty"`
}

// LevelChange is one load level both sweeps ran, compared as two runs.
type LevelChange struct {
	Level           string  `json:"level"`
	Load            float64 `json:"load"`
	BaselinePass    bool    `json:"baseline_pass"`
	CandidatePass   bool    `json:"candidate_pass"`
	BaselineStatus  string  `json:"baseline_status"`
	CandidateStatus string  `json:"candidate_status"`
	// Compare is the two levels' records compared (nil when a level kept
	// no records to read).
	Compare *Report `json:"compare,omitempty"`
	Note    string  `json:"note,omitempty"`
}

// MismatchSweepError refuses sweeps that cannot be compared: another SLO,
// another load mode. CompareSweeps returns it inside a *field.Error about
// Force (errors.As finds it).
type MismatchSweepError struct{ Reasons []string }

func (e *MismatchSweepError) Error() string {
	return "not comparable sweeps: " + strings.Join(e.Reasons, "; ")
}

// CompareSweeps compares the candidate sweep in candDir against the
// baseline in baseDir: the SLO-max intervals, the knees, and every level
// both ran (matched by load) with Compare over its records. A lower
// SLO-max (the candidate's interval wholly at or below the baseline's) or a
// regression at a shared level not explained by demand gates (exit 1).
func CompareSweeps(baseDir, candDir string, opt Options) (*SweepReport, error) {
	base, err := results.Dir(baseDir).ReadSweep()
	if err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	cand, err := results.Dir(candDir).ReadSweep()
	if err != nil {
		return nil, fmt.Errorf("candidate: %w", err)
	}
	var mism []string
	if base.Mode != cand.Mode {
		mism = append(mism, fmt.Sprintf("load mode %s vs %s", base.Mode, cand.Mode))
	}
	if base.SLO != cand.SLO {
		mism = append(mism, fmt.Sprintf("SLO %q vs %q: the SLO-max is defined by the SLO", base.SLO, cand.SLO))
	}
	if len(mism) > 0 && !opt.Force {
		return nil, &field.Error{Field: "Force", Hint: "{} to compare anyway", Err: &MismatchSweepError{mism}}
	}
	rep := &SweepReport{Schema: SweepSchema, Baseline: baseDir, Candidate: candDir, Unit: "req/s",
		BaselineChanges: base.Changes, CandidateChanges: cand.Changes}
	if base.Mode == "closed" {
		rep.Unit = "concurrent"
	}
	if len(mism) > 0 {
		rep.Warnings = append(rep.Warnings, "compared with --force: "+strings.Join(mism, "; "))
	}
	if base.Arrival != cand.Arrival {
		rep.Demand = append(rep.Demand, fmt.Sprintf("arrivals %s vs %s", base.Arrival, cand.Arrival))
	}
	rep.SLOMax = sloMaxChange(base, cand)
	rep.Knee = KneeChange{Baseline: base.Knee, Candidate: cand.Knee}
	if base.Knee != nil && cand.Knee != nil && base.Knee.AchievedPerS > 0 {
		rep.Knee.Note = fmt.Sprintf("achieved throughput at the knee %.3g → %.3g req/s (%+.0f%%); each knee is only as fine as the levels run",
			base.Knee.AchievedPerS, cand.Knee.AchievedPerS, 100*(cand.Knee.AchievedPerS/base.Knee.AchievedPerS-1))
	}
	for _, w := range []*results.Sweep{base, cand} {
		if w.Interrupted {
			rep.Warnings = append(rep.Warnings, "a sweep was interrupted: its SLO-max interval covers only the levels it ran")
		}
	}
	rep.Levels = levelChanges(base, cand, baseDir, candDir, opt)
	for _, l := range rep.Levels {
		if l.Compare != nil {
			rep.Regressions += l.Compare.Regressions
			rep.Demand = append(rep.Demand, l.Compare.Demand...)
		}
	}
	if rep.SLOMax.Verdict == CapacityLower {
		rep.Regressions++
	}
	switch {
	case rep.Regressions > 0:
		rep.ExitCode = slo.ExitFailed
	case rep.SLOMax.Verdict == CapacityNone && len(rep.Levels) == 0:
		rep.ExitCode = slo.ExitInconclusive
		rep.Warnings = append(rep.Warnings, "neither an SLO-max nor a shared level to compare: the comparison cannot say whether the candidate regressed")
	}
	return rep, nil
}

// interval is where the sweep's search leaves its SLO-max.
func interval(r *results.Sweep) (Interval, bool) {
	var iv Interval
	found := r.SLOMax != nil
	if found {
		iv.Low, iv.LowLevel = r.SLOMax.Value(), r.SLOMax.Level
	}
	for i := range r.Levels {
		l := &r.Levels[i]
		v := l.Value()
		if l.Pass || v <= iv.Low || (!l.Valid && !l.Saturated) {
			continue // an invalid level says nothing of the server
		}
		if iv.High == nil || v < *iv.High {
			h := v
			iv.High, iv.HighLevel = &h, l.Name
		}
	}
	return iv, found
}

func sloMaxChange(base, cand *results.Sweep) SLOMaxChange {
	bi, bok := interval(base)
	ci, cok := interval(cand)
	c := SLOMaxChange{Baseline: bi, Candidate: ci, Verdict: CapacitySame}
	if bok && cok {
		// candidate/baseline − 1 over every pair of points in the two
		// intervals.
		lo := 100 * (ci.Low/bi.high() - 1)
		c.ChangeLowPct = &lo
		if !math.IsInf(ci.high(), 1) && bi.Low > 0 {
			hi := 100 * (ci.high()/bi.Low - 1)
			c.ChangeHighPct = &hi
		}
	}
	switch {
	case !bok && !cok:
		c.Verdict, c.Note = CapacityNone, "neither sweep found a level that met every objective"
	case ci.high() <= bi.Low:
		// Even the candidate's best case is at or below the baseline's
		// worst: the SLO-max went down (also when no candidate level
		// passed at all).
		c.Verdict = CapacityLower
	case bok && ci.Low >= bi.high():
		c.Verdict = CapacityHigher
	case !bok || !cok:
		c.Verdict, c.Note = CapacityNone, "one sweep found no level that met every objective, and its failures do not bound the other's SLO-max"
	default:
		c.Note = "the two intervals overlap: run denser levels (--precision) to tell them apart"
	}
	return c
}

// levelChanges compares the last run of every load both sweeps ran.
func levelChanges(base, cand *results.Sweep, baseDir, candDir string, opt Options) []LevelChange {
	last := func(r *results.Sweep) map[float64]*results.SweepLevel {
		m := map[float64]*results.SweepLevel{}
		for i := range r.Levels {
			m[r.Levels[i].Value()] = &r.Levels[i]
		}
		return m
	}
	bm, cm := last(base), last(cand)
	var loads []float64
	for v := range bm {
		if _, ok := cm[v]; ok {
			loads = append(loads, v)
		}
	}
	slices.Sort(loads)
	var out []LevelChange
	for _, v := range loads {
		b, c := bm[v], cm[v]
		lc := LevelChange{Level: b.Name, Load: v, BaselinePass: b.Pass, CandidatePass: c.Pass,
			BaselineStatus: levelStatus(b), CandidateStatus: levelStatus(c)}
		if b.Dir == "" || c.Dir == "" {
			lc.Note = "no results directory recorded for the level"
			out = append(out, lc)
			continue
		}
		sb, err := Read(filepath.Join(baseDir, b.Dir))
		if err == nil {
			var sc *Side
			if sc, err = Read(filepath.Join(candDir, c.Dir)); err == nil {
				lopt := opt
				lopt.Force = true // the same load by construction; the sweeps' identity was checked
				lc.Compare, err = Compare(sb, sc, lopt)
			}
		}
		if err != nil {
			lc.Note = "not compared: " + err.Error()
		}
		out = append(out, lc)
	}
	return out
}

func levelStatus(l *results.SweepLevel) string {
	switch {
	case !l.Valid && !l.Saturated:
		return "INVALID"
	case l.Pass:
		return "PASS"
	}
	return "FAIL"
}

// WriteSweepTable prints a sweep comparison: the SLO-max and knee of each
// side, then each shared level's status and its significant changes.
func WriteSweepTable(w io.Writer, r *SweepReport) {
	fmt.Fprintf(w, "baseline sweep:  %s", r.Baseline)
	if len(r.BaselineChanges) > 0 {
		fmt.Fprintf(w, " (changes %s)", strings.Join(r.BaselineChanges, ", "))
	}
	fmt.Fprintf(w, "\ncandidate sweep: %s", r.Candidate)
	if len(r.CandidateChanges) > 0 {
		fmt.Fprintf(w, " (changes %s)", strings.Join(r.CandidateChanges, ", "))
	}
	m := r.SLOMax
	fmt.Fprintf(w, "\n\nSLO-max (%s; the true boundary lies in each interval):\n  baseline  %s\n  candidate %s\n  verdict   %s",
		r.Unit, m.Baseline, m.Candidate, strings.ToUpper(m.Verdict))
	if m.ChangeLowPct != nil {
		hi := "+∞"
		if m.ChangeHighPct != nil {
			hi = fmt.Sprintf("%+.0f%%", *m.ChangeHighPct)
		}
		fmt.Fprintf(w, ": change between %+.0f%% and %s", *m.ChangeLowPct, hi)
	}
	if m.Note != "" {
		fmt.Fprintf(w, " (%s)", m.Note)
	}
	fmt.Fprintln(w)
	knee := func(p *results.SweepPoint) string {
		if p == nil {
			return "none found"
		}
		return fmt.Sprintf("%s (%.3g req/s achieved)", p.Level, p.AchievedPerS)
	}
	fmt.Fprintf(w, "knee: baseline %s, candidate %s\n", knee(r.Knee.Baseline), knee(r.Knee.Candidate))
	if r.Knee.Note != "" {
		fmt.Fprintf(w, "      %s\n", r.Knee.Note)
	}
	for _, d := range r.Demand {
		fmt.Fprintf(w, "demand: %s\n", d)
	}
	if len(r.Levels) > 0 {
		fmt.Fprintf(w, "\nlevels both sweeps ran:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "level\tbaseline\tcandidate\tchanges")
		for _, l := range r.Levels {
			var ch []string
			if l.Compare != nil {
				for _, row := range l.Compare.Rows {
					if row.Verdict != NoChange && row.Verdict != NotEnoughData {
						ch = append(ch, fmt.Sprintf("%s p%s %+.0f%% %s", row.Metric, pctLabel(row.Percentile), row.ChangePct, row.Verdict))
					}
				}
				if len(ch) == 0 {
					ch = append(ch, fmt.Sprintf("not shown to differ (%d rows judged)", l.Compare.Judged))
				}
			}
			if l.Note != "" {
				ch = append(ch, l.Note)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", l.Level, l.BaselineStatus, l.CandidateStatus, strings.Join(ch, "; "))
		}
		tw.Flush()
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	fmt.Fprintf(w, "\n%d regressions: exit %d\n", r.Regressions, r.ExitCode)
}
