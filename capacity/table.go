package capacity

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// WriteTable prints the sweep: one row per level, by load, then the
// SLO-max, the knee and the headroom.
func WriteTable(w io.Writer, r *results.Sweep) {
	writeTable(w, r, measure.LatencyMetrics(), measure.RateMetrics())
}

// writeTable is WriteTable with the latency columns of a metric table and
// the rate columns of a rate table (measure.TableSweep); the rate columns
// come after goodput/s.
func writeTable(w io.Writer, r *results.Sweep, rows []measure.LatencyMetric, rateRows []measure.RateMetric) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cols := measure.ColumnsOf(rows, measure.TableSweep)
	rateCols := measure.RateColumnsOf(rateRows, measure.TableSweep)
	head := ""
	for _, c := range rateCols {
		head += c.Label + "\t"
	}
	for _, c := range cols {
		head += c.Label + "\t"
	}
	fmt.Fprintln(tw, "level\toffered/s\tachieved/s\tgoodput/s\t"+head+"GPU util\tqueue p99\tverdict\t")
	ls := slices.Clone(r.Levels)
	slices.SortFunc(ls, func(a, b results.SweepLevel) int { return cmpFloat(a.Value(), b.Value()) })
	lat := func(l results.SweepLevel) string {
		out := ""
		for _, c := range rateCols {
			v, ok := l.Rates[c.Name]
			if !ok {
				out += "-\t"
				continue
			}
			out += fmt.Sprintf("%.1f\t", v)
		}
		for _, c := range cols {
			h, ok := l.LatencyMs[c.Metric]
			if !ok || h.Count == 0 {
				out += "-\t"
				continue
			}
			out += fmt.Sprintf("%.1f ms\t", h.Quantile(c.Q))
		}
		return out
	}
	for _, l := range ls {
		offered := "-"
		if l.OfferedPerS > 0 {
			offered = fmt.Sprintf("%.1f", l.OfferedPerS)
		}
		gpu, queue := "-", "-"
		if l.GPUUtilization != nil {
			gpu = fmt.Sprintf("%.0f%%", 100*l.GPUUtilization.Mean)
		}
		if q := l.QueueDelay; q != nil && q.P99Ms != nil {
			queue = fmt.Sprintf("%.1f ms", *q.P99Ms)
			if len(q.P99Bkt) == 2 && q.P99Bkt[0] != nil && *q.P99Bkt[0] == 0 && q.P99Bkt[1] != nil {
				queue = fmt.Sprintf("≤ %.0f ms", *q.P99Bkt[1]) // in the first bucket: only its bound is known
			}
		}
		verdict := "PASS"
		switch {
		case !l.Valid:
			verdict = "INVALID"
			for _, p := range l.Problems {
				if !serverSide[p.Check] && p.Check != "no_data" {
					verdict += " (" + p.Check + ")"
					break
				}
			}
		case l.Saturated:
			verdict = "FAIL saturated"
		case l.Short:
			verdict = "FAIL short"
		case l.FloorsOnly:
			verdict = "FAIL floors"
		case !l.Pass:
			verdict = "FAIL"
		}
		if len(l.NotApplicable) > 0 {
			verdict += fmt.Sprintf(" (%d N/A)", len(l.NotApplicable))
		}
		goodput := "-" // not judged
		if l.GoodputPerS != nil {
			goodput = fmt.Sprintf("%.1f", *l.GoodputPerS)
		}
		fmt.Fprintf(tw, "%s\t%s\t%.1f\t%s\t%s%s\t%s\t%s\t\n", l.Name, offered, l.AchievedPerS, goodput,
			lat(l), gpu, queue, verdict)
	}
	tw.Flush()
	fmt.Fprintln(w)
	if r.SLOMax != nil {
		sep := ":" // "SLO-max: r40 (…)", a bound "SLO-max ≥ r16 (…)"
		if r.SLOMax.LowerBound {
			sep = ""
		}
		fmt.Fprintf(w, "SLO-max%s %s: %s\n", sep, r.SLOMax.Label(), r.SLOMax.Note)
	} else {
		fmt.Fprintln(w, "SLO-max: none: "+noSLOMax(r))
	}
	if line := energyLine(ls); line != "" {
		fmt.Fprintln(w, line)
	}
	if r.Knee != nil {
		fmt.Fprintf(w, "knee:    %s (%.1f req/s achieved): %s\n", r.Knee.Level, r.Knee.AchievedPerS, r.Knee.Note)
	} else {
		fmt.Fprintln(w, "knee:    not found among the levels run (latency grew no faster than throughput)")
	}
	if r.Headroom != nil {
		fmt.Fprintf(w, "headroom: %s\n", r.Headroom.Note)
	}
	for _, s := range r.Warnings {
		fmt.Fprintf(w, "warning: %s\n", s)
	}
}

// energyLine lists each level's energy per output token and cost per
// million output tokens ("" when no level read energy).
func energyLine(ls []results.SweepLevel) string {
	var parts []string
	why := ""
	for _, l := range ls {
		e := l.Energy
		if e == nil {
			why = l.EnergyUnavailable
			continue
		}
		p := l.Name + " -"
		if e.JoulesPerOutputToken != nil {
			p = fmt.Sprintf("%s %.3g J", l.Name, *e.JoulesPerOutputToken)
		}
		if e.CostPerMillionOutputTokensUSD != nil {
			p += fmt.Sprintf(" ($%.3g/M)", *e.CostPerMillionOutputTokensUSD)
		}
		if e.Source != telemetry.EnergyCounter {
			p += " (estimate)"
		}
		parts = append(parts, p)
	}
	switch {
	case len(parts) > 0:
		return "energy per output token: " + strings.Join(parts, ", ")
	case why != "":
		return "energy: " + why
	}
	return ""
}
