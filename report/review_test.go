package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/comparison"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// reviewRun writes a run that started at, with 60 requests whose TTFT is
// ttftMs (spread ±20%), and GPU telemetry.
func reviewRun(t *testing.T, dir string, at time.Time, ttftMs float64, changes ...string) {
	t.Helper()
	d := results.Dir(dir)
	if err := d.Create(); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	for i := 0; i < 60; i++ {
		start := time.Duration(i) * 100 * time.Millisecond
		ttft := time.Duration(ttftMs * (0.8 + 0.4*float64(i%10)/9) * float64(time.Millisecond))
		r := loadgen.Record{Seq: int64(i), Stage: "main", Class: "chat", Intended: start, Sent: start, OutputTokens: 2,
			Chunks: []loadgen.Chunk{{At: start + ttft, Tokens: 1}, {At: start + ttft + 10*time.Millisecond, Tokens: 1}}}
		r.End = r.Chunks[1].At
		b, _ := json.Marshal(&r)
		buf.Write(append(b, '\n'))
	}
	os.WriteFile(d.Path(results.RecordsFile), buf.Bytes(), 0o644)
	idle := 0.25
	s := &results.Summary{Telemetry: &telemetry.Summary{GPUIdleShare: &idle, GPUUtilization: &telemetry.Stats{N: 10, Mean: 0.6}}, Changes: changes}
	s.Schema, s.Run.Started = schema.SummarySchema, at.UTC().Format(time.RFC3339Nano)
	s.Run.Load = map[string]any{"mode": "open", "arrival": "poisson", "stages": "10@6s"}
	s.Validity.Valid = true
	if err := d.WriteSummary(s); err != nil {
		t.Fatal(err)
	}
}

func TestReviewOfAMonth(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	root := t.TempDir()
	reviewRun(t, filepath.Join(root, "runs", "a"), now.Add(-10*24*time.Hour), 50, "CHG-1")
	reviewRun(t, filepath.Join(root, "runs", "b"), now.Add(-5*24*time.Hour), 150, "CHG-2")
	reviewRun(t, filepath.Join(root, "old"), now.Add(-60*24*time.Hour), 50, "CHG-0")
	// A validate with a waiver that expires in 20 days.
	acc := results.Dir(filepath.Join(root, "acc"))
	reviewRun(t, string(acc.Stage("normal")), now.Add(-3*24*time.Hour), 50)
	rep := &slo.Report{Schema: slo.ReportSchema, Status: slo.ReportPass, EvaluatedAt: now.Add(-3 * 24 * time.Hour),
		Stages: []slo.StageReport{{Name: "normal"}},
		Verdicts: []slo.Verdict{{Objective: "tpot-p90", Stage: "normal", Result: slo.Fail, Status: slo.Waived,
			Waiver: &slo.Waiver{Objective: "tpot-p90", Owner: "bob", Reason: "INF-7", Expires: now.Add(20 * 24 * time.Hour)}}}}
	results.WriteJSON(acc.Path(results.VerdictFile), rep)
	// A sweep with a forecast.
	reach := now.Add(190 * 24 * time.Hour)
	sw := results.Dir(filepath.Join(root, "capacity", "nov"))
	reviewRun(t, string(sw.Level("r40")), now.Add(-2*24*time.Hour), 80)
	results.WriteJSON(sw.Path(results.SweepFile), &results.Sweep{Schema: results.SweepSchema, Started: now.Add(-2 * 24 * time.Hour), Mode: "open",
		Levels:   []results.SweepLevel{{Name: "r40", RatePerS: 40, Pass: true, Valid: true}},
		SLOMax:   &results.SweepPoint{Level: "r40", RatePerS: 40, AchievedPerS: 39.8},
		Headroom: &results.SweepHeadroom{Note: "100% headroom", ReachesAt: &reach}})
	// A canary's saved /status.
	st := results.CanaryStatus{Schema: results.CanaryStatusSchema, EvaluatedAt: now.Add(-time.Hour), Targets: []results.CanaryTargetStatus{{Name: "pool-a",
		Objectives: []results.CanaryObjectiveStatus{{Name: "ttft-p99", Objective: 0.99, BudgetRemaining: -0.5,
			SLOWindow: results.CanaryWindowStatus{Good: 9800, Bad: 200, SeenS: 20 * 86400}}}}}}
	b, _ := json.Marshal(st)
	os.WriteFile(filepath.Join(root, "canary-status.json"), b, 0o644)

	rv, err := ReadReview(root, 30*24*time.Hour, now, comparison.Brief)
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for _, e := range rv.Results {
		dirs = append(dirs, strings.TrimPrefix(e.Dir, root+"/")+" "+e.Status)
	}
	if strings.Join(dirs, ", ") != "runs/a not judged, runs/b not judged, acc PASS, capacity/nov SLO-max r40" {
		t.Errorf("results in the period, in time order: %v", dirs)
	}
	if len(rv.Changes) != 2 || rv.Changes[0].ID != "CHG-1" || rv.Changes[1].ID != "CHG-2" {
		t.Errorf("changes %+v (CHG-0 is older than the period)", rv.Changes)
	}
	if len(rv.Regressions) != 1 || !strings.HasSuffix(rv.Regressions[0].Candidate, "runs/b") || !strings.Contains(rv.Regressions[0].Verdict, "regressions") {
		t.Errorf("regressions %+v: b's TTFT is 3× a's", rv.Regressions)
	}
	if len(rv.Waivers) != 1 || rv.Waivers[0].DaysLeft != 20 || rv.Waivers[0].Owner != "bob" {
		t.Errorf("open waivers %+v", rv.Waivers)
	}
	if len(rv.Capacity) != 1 || rv.Capacity[0].SLOMaxRate != 40 || rv.Capacity[0].ReachesAt == nil {
		t.Errorf("capacity %+v", rv.Capacity)
	}
	if len(rv.Canaries) != 1 || rv.Canaries[0].Total != 10000 || rv.Canaries[0].BudgetRemaining != -0.5 {
		t.Errorf("canaries %+v", rv.Canaries)
	}
	if len(rv.Skipped) > 0 {
		t.Errorf("skipped %q", rv.Skipped)
	}
	if len(rv.Efficiency) != 4 {
		t.Errorf("efficiency rows %+v", rv.Efficiency)
	}
	for _, format := range []string{FormatHTML, FormatMarkdown} {
		var out bytes.Buffer
		if err := WriteReview(&out, rv, format, Options{Version: "test", Now: func() time.Time { return now }}); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"SLO performance", "pool-a", "98.00% of 10000", "-50.0%", "CHG-2", "SLO-max", "r40", "2027-06-11",
			"Efficiency", "25%", "regressions", "INF-7", "2026-11-03 to 2026-12-03"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s review lacks %q:\n%s", format, want, out.String())
			}
		}
	}
	// An empty period says so in every section.
	rv, _ = ReadReview(root, 24*time.Hour, now.Add(365*24*time.Hour), comparison.Brief)
	var out bytes.Buffer
	WriteReview(&out, rv, FormatMarkdown, Options{})
	for _, want := range []string{"No canary status", "No change ids", "No sweep in the period", "not measured", "No two results", "No waiver"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("empty review lacks %q:\n%s", want, out.String())
		}
	}
}

// A baseline the comparer refuses (another plan or mix) is passed over for
// an earlier one; any other error leaves the candidate without one.
func TestReviewRegressionsSkipNotComparable(t *testing.T) {
	t.Parallel()
	es := []Entry{{Dir: "a", Kind: KindRun}, {Dir: "b", Kind: KindRun}, {Dir: "c", Kind: KindRun}, {Dir: "d", Kind: KindRun}}
	var asked []string
	cmp := func(base, cand string) (*results.ComparisonOutcome, error) {
		asked = append(asked, base+">"+cand)
		switch {
		case base == "b" && cand == "c":
			return nil, fmt.Errorf("%w: another mix", results.ErrNotComparable)
		case cand == "d":
			return nil, errors.New("d: unreadable")
		}
		return &results.ComparisonOutcome{Regressions: 1, Judged: 4, Rows: []string{base + cand}}, nil
	}
	got := regressions(es, cmp)
	if strings.Join(asked, " ") != "a>b b>c a>c c>d" {
		t.Errorf("compared %v, want a>b b>c a>c c>d", asked)
	}
	if len(got) != 2 || got[1].Baseline != "a" || got[1].Candidate != "c" || got[1].Verdict != "1 regressions" || got[1].Rows[0] != "ac" {
		t.Errorf("regressions %+v: c's baseline is a (b ran another mix), d has none", got)
	}
	if r := regressions(es, nil); r != nil {
		t.Errorf("no comparer: %+v", r)
	}
}
