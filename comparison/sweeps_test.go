package comparison

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/results"
)

// sweepDir writes a sweep.json whose levels pass up to and including
// maxPass and fail above; invalid levels neither pass nor bound.
func sweepDir(t *testing.T, mode string, rates []float64, maxPass float64, invalid ...float64) string {
	t.Helper()
	dir := t.TempDir()
	r := &results.Sweep{Schema: results.SweepSchema, Mode: mode, SLO: "chat", Arrival: "poisson"}
	for i, v := range rates {
		l := results.SweepLevel{Name: fmt.Sprintf("r%g", v), RatePerS: v, Order: i + 1, Valid: true, AchievedPerS: v}
		l.Pass = v <= maxPass
		for _, x := range invalid {
			if x == v {
				l.Valid, l.Pass = false, false
			}
		}
		r.Levels = append(r.Levels, l)
		if l.Pass && (r.SLOMax == nil || v > r.SLOMax.RatePerS) {
			r.SLOMax = &results.SweepPoint{Level: l.Name, RatePerS: v, AchievedPerS: v}
		}
	}
	if err := results.WriteJSON(filepath.Join(dir, results.SweepFile), r); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestCompareSweepsSLOMax(t *testing.T) {
	t.Parallel()
	base := sweepDir(t, "open", []float64{30, 50, 40, 42}, 40)
	// 20% less capacity: the candidate's whole interval lies below.
	slower := sweepDir(t, "open", []float64{30, 50, 40, 32, 34}, 32)
	rep, err := CompareSweeps(base, slower, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	WriteSweepTable(&b, rep)
	m := rep.SLOMax
	if m.Verdict != CapacityLower || rep.ExitCode != 1 || m.Baseline.String() != "[40, 42)" || m.Candidate.String() != "[32, 34)" {
		t.Fatalf("20%% slower:\n%s", b.String())
	}
	if m.ChangeLowPct == nil || m.ChangeHighPct == nil || fmt.Sprintf("%.1f %.1f", *m.ChangeLowPct, *m.ChangeHighPct) != "-23.8 -15.0" {
		t.Errorf("change interval %v %v, want 32/42−1 to 34/40−1", m.ChangeLowPct, m.ChangeHighPct)
	}
	if !strings.Contains(b.String(), "verdict   LOWER: change between -24% and -15%") {
		t.Errorf("table:\n%s", b.String())
	}
	if len(rep.Levels) != 3 || rep.Levels[2].Level != "r50" { // 30, 40 and 50 ran in both
		t.Errorf("shared levels %+v", rep.Levels)
	}
	// The same sweep twice: nothing moved.
	rep, _ = CompareSweeps(base, base, Options{})
	if rep.SLOMax.Verdict != CapacitySame || rep.ExitCode != 0 || *rep.SLOMax.ChangeLowPct > 0 || *rep.SLOMax.ChangeHighPct < 0 {
		t.Errorf("same sweep: %+v exit %d", rep.SLOMax, rep.ExitCode)
	}
	// More capacity.
	rep, _ = CompareSweeps(slower, base, Options{})
	if rep.SLOMax.Verdict != CapacityHigher || rep.ExitCode != 0 {
		t.Errorf("faster: %+v exit %d", rep.SLOMax, rep.ExitCode)
	}
	// A candidate that failed even below the baseline's SLO-max has a
	// lower one, though it found none.
	none := sweepDir(t, "open", []float64{30, 50}, 0)
	if rep, _ = CompareSweeps(base, none, Options{}); rep.SLOMax.Verdict != CapacityLower || rep.ExitCode != 1 {
		t.Errorf("no passing level below: %+v", rep.SLOMax)
	}
	// An invalid level (the generator's fault, an interrupt) bounds
	// nothing: the baseline's interval stays open above 40 until a valid
	// failure.
	inv := sweepDir(t, "open", []float64{30, 40, 41, 50}, 40, 41)
	if rep, _ = CompareSweeps(inv, base, Options{}); rep.SLOMax.Baseline.String() != "[40, 50)" {
		t.Errorf("invalid level bounded the interval: %s", rep.SLOMax.Baseline)
	}
	// Another load mode is refused unless forced.
	closed := sweepDir(t, "closed", []float64{30}, 30)
	var me *MismatchSweepError
	if _, err := CompareSweeps(base, closed, Options{}); !errors.As(err, &me) || !strings.Contains(err.Error(), "load mode open vs closed") {
		t.Errorf("mode mismatch: %v", err)
	}
}
