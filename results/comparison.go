package results

import "errors"

// ComparisonOutcome is, in brief, what comparing a result with a baseline
// found (package comparison compares; the periodic review reads this, so
// that report, an output package, imports no use case).
type ComparisonOutcome struct {
	// Regressions are the rows shown slower beyond the tolerance; Judged
	// the rows with enough requests to judge.
	Regressions int
	Judged      int
	// DemandChanged: the candidate was offered other work (rows then
	// compare latencies under other demand).
	DemandChanged bool
	// Rows are the regressed rows (slower, or slower under changed
	// demand), one line each.
	Rows []string
}

// ErrNotComparable says the baseline cannot serve for the candidate (another
// plan or mix, or it cannot be read); an earlier one may.
var ErrNotComparable = errors.New("not a comparable baseline")
