package exporters

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tailgate-llm/tailgate/slo"
)

// WriteVerdictTable writes a report's verdicts as a table (objective,
// stage, class, measured, threshold, target, good/total, status), then the
// notes of every verdict that is not a plain pass, the validity problems,
// and the overall result with its exit code.
func WriteVerdictTable(w io.Writer, r *slo.Report) error {
	ew := &errWriter{w: w}
	tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECTIVE\tSTAGE\tCLASS\tMEASURED\tTHRESHOLD\tTARGET\tGOOD/TOTAL\tSTATUS")
	var notes []string
	for i := range r.Verdicts {
		v := &r.Verdicts[i]
		class, target, counts := v.Class, v.TargetText, fmt.Sprintf("%d/%d", v.Good, v.Total)
		if class == "" {
			class = "-"
		}
		if target == "" {
			target = "-"
		}
		switch v.Kind {
		case slo.KindFloor:
			counts = fmt.Sprintf("%d in %.1fs", v.Good, v.WindowS)
		case slo.KindManual:
			counts = "-"
		}
		if v.Result == slo.NoData || v.Result == slo.Pending {
			counts = "-"
		}
		status := string(v.Status)
		if v.Status == slo.Waived {
			status += " (" + string(v.Result) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Objective, v.Stage, class, v.MeasuredText(),
			v.ThresholdLabel(), target, counts, status)
		if v.Note != "" || v.Source != "" {
			n := v.Note
			if v.Source != "" {
				n = strings.TrimPrefix(v.Source+"; "+n, "; ")
				n = strings.TrimSuffix(n, "; ")
			}
			notes = append(notes, fmt.Sprintf("  %s/%s: %s", v.Objective, v.Stage, n))
		}
	}
	tw.Flush()
	if len(notes) > 0 {
		fmt.Fprintln(ew, "\nNotes:")
		for _, n := range notes {
			fmt.Fprintln(ew, n)
		}
	}
	if q := quantileSources(r); q != "" {
		fmt.Fprintln(ew, "\n"+q)
	}
	if len(r.Problems) > 0 {
		fmt.Fprintln(ew, "\nThe run is invalid:")
		for _, p := range r.Problems {
			fmt.Fprintln(ew, "  "+p.String())
		}
	}
	if c := confidenceLine(r); c != "" {
		fmt.Fprintln(ew, "\n"+c)
	}
	fmt.Fprintf(ew, "\nResult: %s (exit %d): %s\n", r.Status, r.ExitCode, countLine(r))
	return ew.err
}

func countLine(r *slo.Report) string {
	var parts []string
	for _, s := range []slo.Status{slo.Pass, slo.Fail, slo.Inconclusive, slo.Waived, slo.NoData, slo.Pending, slo.NotApplicable} {
		if n := r.Counts[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, strings.ToLower(strings.ReplaceAll(string(s), "_", " "))))
		}
	}
	if len(parts) == 0 {
		return "no objectives"
	}
	return strings.Join(parts, ", ")
}

// quantileSources says where the quantiles in MEASURED came from, once for
// the table: PASS and FAIL never depend on them.
func quantileSources(r *slo.Report) string {
	var hdr, buckets bool
	for i := range r.Verdicts {
		switch r.Verdicts[i].QuantileFrom {
		case slo.QuantileFromHDR:
			hdr = true
		case slo.QuantileFromBuckets:
			buckets = true
		}
	}
	var parts []string
	if hdr {
		parts = append(parts, "from HDR histograms of the records (3 significant digits)")
	}
	if buckets {
		parts = append(parts, "from server histogram buckets")
	}
	if len(parts) == 0 {
		return ""
	}
	return "Quantiles in MEASURED are " + strings.Join(parts, " and ") + "; PASS and FAIL come from exact counts of events within the threshold."
}

// confidenceLine states the confidence latency and error-rate verdicts
// were decided at ("" when none was).
func confidenceLine(r *slo.Report) string {
	for _, v := range r.Verdicts {
		if v.Confidence > 0 {
			return fmt.Sprintf("PASS and FAIL are decided at %s confidence (one-sided exact binomial test on the miss fraction); otherwise INCONCLUSIVE", strconv.FormatFloat(100*v.Confidence, 'f', -1, 64)+"%")
		}
	}
	return ""
}
