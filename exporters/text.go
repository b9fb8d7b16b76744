package exporters

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// throughputLine is the rates a throughput block holds: those of rows, in
// row order, each by its label ("out tok/s 291.3"), or its Absent text when
// absent, then those no row of rows names (a row made outside the table
// given), by their names; per-session rows and rows summary.json does not
// hold are left out.
func throughputLine(t *schema.Throughput, rows []measure.RateMetric) string {
	var parts []string
	named := make(map[string]bool, len(rows))
	for i := range rows {
		m := &rows[i]
		named[m.Name] = true
		if m.Of == nil || m.PerSession {
			continue
		}
		v, ok := m.Of(t)
		switch {
		case !ok && m.Absent != "":
			parts = append(parts, m.Absent)
		case !ok:
			parts = append(parts, m.Label+" not measured")
		case m.Kind == measure.RateRatio:
			parts = append(parts, fmt.Sprintf("%s %.2f%%", m.Label, 100*v))
		case m.Unit == "req/s":
			parts = append(parts, fmt.Sprintf("%s %.2f", m.Label, v))
		default:
			parts = append(parts, fmt.Sprintf("%s %.1f", m.Label, v))
		}
	}
	// Without its row neither kind nor unit is known: the bare figure.
	for _, n := range slices.Sorted(maps.Keys(t.Extra)) {
		if !named[n] {
			parts = append(parts, n+" "+strconv.FormatFloat(t.Extra[n], 'g', 5, 64))
		}
	}
	return strings.Join(parts, "  ")
}

// WriteText writes the terminal report of a summary: counts, throughput,
// the latency table, a per-class table when there is more than one class,
// and warnings.
func WriteText(w io.Writer, s *results.Summary) error {
	return WriteTextOf(w, s, nil)
}

// WriteTextOf is WriteText with the rate table rates (nil:
// measure.RateMetrics()) labelling the throughput line; a rate the summary
// carries that rates does not name is shown by its name.
func WriteTextOf(w io.Writer, s *results.Summary, rates []measure.RateMetric) error {
	if rates == nil {
		rates = measure.RateMetrics()
	}
	ew := &errWriter{w: w}
	r := s.Run
	fmt.Fprintf(ew, "\ntailgate %s  target %s  api %s  model %s\n", s.Tool.Version, r.Target, r.API, r.Model)
	if len(r.Load) > 0 {
		parts := make([]string, 0, len(r.Load))
		for _, k := range slices.Sorted(maps.Keys(r.Load)) {
			parts = append(parts, fmt.Sprintf("%s=%v", k, r.Load[k]))
		}
		fmt.Fprintf(ew, "load     %s\n", strings.Join(parts, " "))
	}
	status := ""
	if r.Interrupted {
		status = "  INTERRUPTED"
	}
	fmt.Fprintf(ew, "duration %.2fs (measured window %.2fs)%s\n", r.DurationS, r.MeasuredWindowS, status)
	writeScale(ew, r)
	q := s.Requests
	fmt.Fprintf(ew, "requests sent %d  ok %d  errors %d  dropped %d", q.Sent, q.OK, q.Errors, q.Dropped)
	if q.CutAtEnd > 0 {
		fmt.Fprintf(ew, "  cut at end %d", q.CutAtEnd)
	}
	if q.Warmup > 0 {
		fmt.Fprintf(ew, "  (+%d warm-up)", q.Warmup)
	}
	fmt.Fprintln(ew, errorKinds(q.ErrorsByKind))
	writeFirstErrors(ew, q.FirstErrors)
	t := s.Throughput
	fmt.Fprintf(ew, "throughput %s  (measured window %.2fs)\n", throughputLine(&t, rates), r.MeasuredWindowS)
	if t.ScheduledWindowS > 0 {
		fmt.Fprintf(ew, "load     offered %.2f req/s  sent %.2f req/s  (scheduled window %.2fs, warm-up and drain left out)\n",
			t.OfferedPerS, t.SentPerS, t.ScheduledWindowS)
	}
	fmt.Fprintf(ew, "tokens   output %d (%s)  input %d", s.Tokens.Output, sources(s.Tokens.Sources), s.Tokens.Input)
	if s.Tokens.RequestedInput > 0 {
		fmt.Fprintf(ew, "  (requested %d)", s.Tokens.RequestedInput)
	}
	fmt.Fprintln(ew)

	fmt.Fprintln(ew)
	// A metric with no sample is absent, never a row of zeros: zero would
	// read as a measurement.
	var rows, none []string
	for _, name := range measure.MetricNames() {
		h := s.LatencyMs[name]
		switch {
		case name == measure.MetricTTFAT && (h.Count == 0 || h == s.LatencyMs[measure.MetricTTFT]):
			// no reasoning tokens: TTFAT is TTFT
		case h.Count == 0:
			none = append(none, name)
		default:
			rows = append(rows, name)
		}
	}
	if len(rows) > 0 {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "latency ms\tcount\tmean\tmin\tp50\tp90\tp95\tp99\tp99.9\tmax\t")
		for _, name := range rows {
			histRow(tw, name, s.LatencyMs[name])
		}
		tw.Flush()
	}
	if len(none) > 0 {
		fmt.Fprintf(ew, "no sample: %s\n", strings.Join(none, ", "))
	}

	if len(s.Classes) > 1 {
		groupTable(ew, "class", s.Classes)
	}
	if len(s.Stages) > 1 {
		groupTable(ew, "stage", s.Stages)
	}
	if len(s.Turns) > 0 {
		turns := slices.SortedFunc(maps.Keys(s.Turns), naturalLess)
		fmt.Fprintln(ew)
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "turn\tcount\tttft p50\tttft p90\tttft p99\t")
		for _, k := range turns {
			h := s.Turns[k]
			fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t\n", k, h.Count, h.P50, h.P90, h.P99)
		}
		tw.Flush()
	}
	writeSessions(ew, s.Sessions)
	if line := telemetryLine(s.Telemetry); line != "" {
		fmt.Fprintf(ew, "\nserver   %s\n", line)
	}
	for _, line := range energyLines(s) {
		fmt.Fprintf(ew, "energy   %s\n", line)
	}
	for _, warn := range s.Warnings {
		fmt.Fprintf(ew, "WARNING: %s\n", warn)
	}
	return ew.err
}

func errorKinds(m map[string]int64) string {
	if len(m) == 0 {
		return ""
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return "  [" + strings.Join(parts, " ") + "]"
}

// writeFirstErrors gives, per error kind, the first failed request and the
// server's words (scrubbed when recorded), cut to one terminal line or so:
// the words say what the counts cannot, a context limit or a bad
// parameter.
func writeFirstErrors(w io.Writer, m map[string]string) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(w, "  first %s: %s\n", k, transport.Truncate(strings.ReplaceAll(m[k], "\n", " "), firstErrorWidth))
	}
}

// firstErrorWidth bounds a first error's line: enough for a server's
// sentence with its figures, short of a stack trace.
const firstErrorWidth = 200

func sources(m map[string]int64) string {
	if len(m) == 0 {
		return "no data"
	}
	keys := slices.Sorted(maps.Keys(m))
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("from %s: %d req", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// errWriter keeps the first write error so a report is one error check.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return len(p), nil
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, nil
}

// telemetryLine condenses the telemetry summary to one line: queue depth,
// batch, KV and GPU beside each other, which is what a capacity review
// reads first.
func telemetryLine(t *telemetry.Summary) string {
	if t == nil {
		return ""
	}
	var parts []string
	if t.NoMetrics != "" {
		parts = append(parts, t.NoMetrics)
	} else if t.Family != "" {
		f := t.Family
		if t.ServerModel != "" {
			f += " (model " + t.ServerModel + ")"
		}
		parts = append(parts, f)
	}
	if t.Running != nil {
		parts = append(parts, fmt.Sprintf("running %.1f avg/%.0f max", t.Running.Mean, t.Running.Max))
	}
	if t.Waiting != nil {
		parts = append(parts, fmt.Sprintf("waiting %.1f avg/%.0f max", t.Waiting.Mean, t.Waiting.Max))
	}
	if t.KVUsage != nil {
		parts = append(parts, fmt.Sprintf("kv %.0f%% max", t.KVUsage.Max*100))
	}
	if t.GPUUtilization != nil {
		parts = append(parts, fmt.Sprintf("gpu util %.0f%% avg", t.GPUUtilization.Mean*100))
	}
	if qd := t.QueueDelay; qd != nil && qd.MeanMs != nil {
		// Server buckets are coarse (vLLM's first is 300 ms), so show the
		// bucket the p99 fell in rather than an interpolated point.
		q := fmt.Sprintf("queue delay mean %.1f ms", *qd.MeanMs)
		if b := qd.P99Bkt; len(b) == 2 {
			switch {
			case (b[0] == nil || *b[0] == 0) && b[1] != nil:
				q += fmt.Sprintf(", p99 ≤ %.0f ms (below the first bucket bound)", *b[1])
			case b[0] != nil && b[1] != nil:
				q += fmt.Sprintf(", p99 in (%.0f, %.0f] ms", *b[0], *b[1])
			case b[0] != nil:
				q += fmt.Sprintf(", p99 above %.0f ms", *b[0])
			}
		}
		parts = append(parts, q+" (server histogram)")
	}
	if c := t.Capacity; c != nil {
		if c.Preemptions != nil && *c.Preemptions > 0 {
			parts = append(parts, fmt.Sprintf("%.0f preemptions", *c.Preemptions))
		}
		if c.PrefixCacheHitRate != nil {
			parts = append(parts, fmt.Sprintf("prefix cache hits %.0f%%", *c.PrefixCacheHitRate*100))
		}
	}
	if t.ScrapeErrors > 0 {
		parts = append(parts, fmt.Sprintf("%d scrape errors", t.ScrapeErrors))
	}
	if t.LateScrapes > 0 {
		parts = append(parts, fmt.Sprintf("%d late scrapes (answered after their interval)", t.LateScrapes))
	}
	return strings.Join(parts, "  ")
}

// groupTable prints one row per class or stage, in natural order (stage10
// after stage9).
func groupTable(w io.Writer, title string, groups map[string]schema.ClassSummary) {
	names := slices.SortedFunc(maps.Keys(groups), naturalLess)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// The rate columns are the rate table's rows, by their labels.
	var rates []measure.RateMetric
	for _, name := range []string{measure.MetricRequestsPerS, measure.MetricOutputTokensPerS} {
		rates = append(rates, *measure.FindRateIn(measure.RateMetrics(), name))
	}
	fmt.Fprintf(tw, "%s\tok\terr\t%s\t%s\tttft p50\tttft p99\titl p50\titl p99\te2e p50\te2e p99\t\n", title, rates[0].Label, rates[1].Label)
	for _, n := range names {
		c := groups[n]
		rate := func(i int, f string) string {
			if v, ok := rates[i].Of(&c.Throughput); ok {
				return fmt.Sprintf(f, v)
			}
			return "-"
		}
		l := c.LatencyMs
		// A metric with no sample in the group is "-", never 0.
		q := func(m string, f string, v func(schema.Hist) float64) string {
			if h := l[m]; h.Count > 0 {
				return fmt.Sprintf(f, v(h))
			}
			return "-"
		}
		p50 := func(h schema.Hist) float64 { return h.P50 }
		p99 := func(h schema.Hist) float64 { return h.P99 }
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", n,
			c.Requests.OK, c.Requests.Errors+c.Requests.Dropped, rate(0, "%.2f"), rate(1, "%.1f"),
			q(measure.MetricTTFT, "%.1f", p50), q(measure.MetricTTFT, "%.1f", p99), q(measure.MetricITL, "%.2f", p50), q(measure.MetricITL, "%.2f", p99),
			q(measure.MetricE2E, "%.1f", p50), q(measure.MetricE2E, "%.1f", p99))
	}
	tw.Flush()
}

// naturalLess orders names with a trailing number by that number.
func naturalLess(a, b string) int {
	pa, na := splitNumber(a)
	pb, nb := splitNumber(b)
	if c := cmp.Compare(pa, pb); c != 0 || na < 0 || nb < 0 {
		return cmp.Or(c, cmp.Compare(a, b))
	}
	return cmp.Compare(na, nb)
}

func splitNumber(s string) (string, int) {
	i := len(s)
	for i > 0 && s[i-1] >= '0' && s[i-1] <= '9' {
		i--
	}
	if i == len(s) || len(s)-i > 9 {
		return s, -1
	}
	n, _ := strconv.Atoi(s[i:])
	return s[:i], n
}

// writeScale says which shard a run was, what a merged result is made of,
// and the connection set-up kept out of the latencies (--preconnect).
func writeScale(w io.Writer, r schema.RunInfo) {
	if sh := r.Shard; sh != nil {
		fmt.Fprintf(w, "shard    %d/%d", sh.Index, sh.Count)
		if sh.StartAt != "" {
			fmt.Fprintf(w, "  start-at %s", sh.StartAt)
		}
		if sh.LateByS > 0 {
			fmt.Fprintf(w, "  LATE by %.3fs", sh.LateByS)
		}
		fmt.Fprintln(w)
	}
	if m := r.Merged; m != nil {
		fmt.Fprintf(w, "merged   %d shards:", m.Count)
		for _, s := range m.Shards {
			fmt.Fprintf(w, "  %d (%s, %d sent)", s.Index, s.Dir, s.Sent)
		}
		fmt.Fprintln(w)
	}
	if p := r.Preconnect; p.Used {
		fmt.Fprintf(w, "connect  %d connections opened before the first start in %.1f ms (not in any latency)", p.Connections, p.SetupMs)
		if p.Error != "" {
			fmt.Fprintf(w, "; %s", p.Error)
		}
		fmt.Fprintln(w)
	}
}

// energyLines are each stage's energy per output token and request, and
// the cost per million tokens, or why there are none.
func energyLines(s *results.Summary) []string {
	if s.Energy == nil {
		if s.EnergyUnavailable != "" {
			return []string{s.EnergyUnavailable}
		}
		return nil
	}
	stages := make([]string, 0, len(s.Energy))
	for st := range s.Energy {
		stages = append(stages, st)
	}
	slices.SortFunc(stages, naturalLess)
	var out []string
	for _, st := range stages {
		e := s.Energy[st]
		line := fmt.Sprintf("%s: %.0f J over %.1f s on %d GPUs (%s", st, e.Joules, e.ToS-e.FromS, e.GPUs, e.Source)
		if e.Source != telemetry.EnergyCounter {
			line += ", an estimate"
		}
		line += ")"
		if e.JoulesPerOutputToken != nil {
			line += fmt.Sprintf(", %.3g J per output token", *e.JoulesPerOutputToken)
		}
		if e.JoulesPerRequest != nil {
			line += fmt.Sprintf(", %.3g J per request", *e.JoulesPerRequest)
		}
		if e.CostPerMillionOutputTokensUSD != nil {
			line += fmt.Sprintf(", $%.3g per million output tokens at $%g/GPU-hour", *e.CostPerMillionOutputTokensUSD, e.GPUHourCostUSD)
		}
		if e.Note != "" {
			line += "; " + e.Note
		}
		out = append(out, line)
	}
	return out
}

// writeSessions prints the agent sessions' figures: counts by outcome, the
// duration of complete sessions, and TTFT and E2E of first and later
// turns. Nothing when the run had no sessions.
func writeSessions(w io.Writer, ss *schema.SessionSummary) {
	if ss == nil {
		return
	}
	fmt.Fprintf(w, "\nsessions %d  ok %d  failed %d  cut %d  calls cancelled by dependency %d\n",
		ss.Count, ss.OK, ss.Failed, ss.Cut, ss.CancelledCalls)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "session ms\tcount\tmean\tmin\tp50\tp90\tp95\tp99\tp99.9\tmax\t")
	histRow(tw, "duration", ss.DurationMs)
	for _, turn := range []string{"0", "1+"} {
		for _, m := range measure.MetricNames() { // the turn metrics, in table order
			if h, ok := ss.Turns[turn][m]; ok {
				histRow(tw, "turn "+turn+" "+m, h)
			}
		}
	}
	tw.Flush()
}

// histRow is one histogram's row of a latency table.
func histRow(w io.Writer, name string, h schema.Hist) {
	fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n",
		name, h.Count, h.Mean, h.Min, h.P50, h.P90, h.P95, h.P99, h.P999, h.Max)
}
