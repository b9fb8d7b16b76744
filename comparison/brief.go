package comparison

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/results"
)

// Brief compares candidate with baseline as the periodic review does (a
// 5% tolerance, seed 1) and says in brief what it found: the review's
// report.Comparer. A baseline that cannot be read, or that ran another
// plan or mix, is results.ErrNotComparable (an earlier one may serve).
func Brief(baseline, candidate string) (*results.ComparisonOutcome, error) {
	bs, err := Read(baseline)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", results.ErrNotComparable, err)
	}
	cs, err := Read(candidate)
	if err != nil {
		return nil, err
	}
	rep, err := Compare(bs, cs, Options{Tolerance: 0.05, Seed: 1})
	if err != nil {
		return nil, err
	}
	o := &results.ComparisonOutcome{Regressions: rep.Regressions, Judged: rep.Judged, DemandChanged: len(rep.Demand) > 0}
	for _, row := range rep.Rows {
		if row.Verdict == Regression || row.Verdict == SlowerDemand {
			o.Rows = append(o.Rows, fmt.Sprintf("%s %s p%g %+.0f%% [%+.0f%%, %+.0f%%] %s", row.Stage, row.Metric,
				100*row.Percentile, row.ChangePct, row.CILowPct, row.CIHighPct, row.Verdict))
		}
	}
	return o, nil
}
