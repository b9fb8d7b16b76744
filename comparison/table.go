package comparison

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable prints the comparison: the changes recorded on each side,
// demand changes, then one row per stage × metric × percentile.
func WriteTable(w io.Writer, r *Report) {
	fmt.Fprintf(w, "baseline:  %s (%d requests)", r.Baseline, r.BaselineRequests)
	if len(r.BaselineChanges) > 0 {
		fmt.Fprintf(w, ", changes %s", strings.Join(r.BaselineChanges, ", "))
	}
	fmt.Fprintf(w, "\ncandidate: %s (%d requests)", r.Candidate, r.CandidateRequests)
	if len(r.CandidateChanges) > 0 {
		fmt.Fprintf(w, ", changes %s", strings.Join(r.CandidateChanges, ", "))
	}
	fmt.Fprintf(w, "\nintervals: %.0f%% simultaneous (%.2f%% per row), %s; tolerance %.1f%%\n", 100*r.Confidence, 100*r.RowLevel, r.Method, 100*r.Tolerance)
	for _, d := range r.Demand {
		fmt.Fprintf(w, "demand: %s\n", d)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "stage\tmetric\tpct\tbaseline\tcandidate\tchange\tinterval\tverdict")
	for _, row := range r.Rows {
		num := func(v float64, f string) string {
			if row.Verdict == NotEnoughData {
				return "-"
			}
			return fmt.Sprintf(f, v)
		}
		v := row.Verdict
		if row.Gates {
			v += fmt.Sprintf(" (beyond %.1f%%)", 100*r.Tolerance)
		}
		if row.Note != "" {
			v += " (" + row.Note + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\tp%s\t%s\t%s\t%s\t[%s, %s]\t%s\n", row.Stage, row.Metric, pctLabel(row.Percentile),
			num(row.BaselineMs, "%.1f ms"), num(row.CandidateMs, "%.1f ms"), num(row.ChangePct, "%+.1f%%"),
			num(row.CILowPct, "%+.1f%%"), num(row.CIHighPct, "%+.1f%%"), v)
	}
	tw.Flush()
	if len(r.Rates) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "stage\trate\tbaseline\tcandidate\tchange\t(shown, not judged)")
		for _, row := range r.Rates {
			change := "-"
			if row.ChangePct != nil {
				change = fmt.Sprintf("%+.1f%%", *row.ChangePct)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", row.Stage, row.Metric, rateValue(row.Baseline, row.Unit), rateValue(row.Candidate, row.Unit), change)
		}
		tw.Flush()
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
	fmt.Fprintf(w, "\n%d regressions, %d improvements: exit %d\n", r.Regressions, r.Improvements, r.ExitCode)
}

// rateValue is a rate row's value with its unit; a ratio has none and
// shows as a percentage.
func rateValue(v float64, unit string) string {
	if unit == "" {
		return fmt.Sprintf("%.2f%%", 100*v)
	}
	return fmt.Sprintf("%.1f %s", v, unit)
}

func pctLabel(q float64) string {
	s := fmt.Sprintf("%g", 100*q)
	return strings.ReplaceAll(s, ".", "")
}
