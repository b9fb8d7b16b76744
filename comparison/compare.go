package comparison

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// Verdicts of a row.
const (
	Regression  = "regression"
	Improvement = "improvement"
	// NoChange: the interval does not lie beyond the tolerance; the
	// sample does not show a difference that matters (which is not the
	// same as showing there is none).
	NoChange      = "not shown to differ"
	SlowerDemand  = "slower, demand changed"
	FasterDemand  = "faster, demand changed"
	NotEnoughData = "not enough data"
)

// Schema names the comparison's JSON.
const Schema = "tailgate.compare/v1"

// Options tune a comparison.
type Options struct {
	// Tolerance is the slowdown (0.05 = 5%) a regression must exceed, with
	// confidence, to gate.
	Tolerance float64
	// Resamples is the bootstrap's replicate count (default 2000); Seed
	// its seed.
	Resamples int
	Seed      uint64
	// Metrics and Percentiles (0–1) to compare (default: the metric
	// table's rows marked Compare — ttft, itl, tpot, e2e — at 0.5, 0.9,
	// 0.99).
	Metrics     []string
	Percentiles []float64
	// Force compares results of different plans or mixes.
	Force bool
	// Latency is the metric table (nil: measure.LatencyMetrics()); a test
	// passes a table with a made-up row.
	Latency []measure.LatencyMetric
	// Rates is the rate table (nil: measure.RateMetrics()): its floors
	// counted per record may be named in Metrics, and those marked Compare
	// are shown by default.
	Rates []measure.RateMetric
}

// Report is the comparison.
type Report struct {
	Schema    string `json:"schema"`
	Baseline  string `json:"baseline"`
	Candidate string `json:"candidate"`
	Method    string `json:"method"`
	// Confidence is the simultaneous confidence of the intervals; RowLevel
	// each row's own (Bonferroni).
	Confidence float64 `json:"confidence"`
	RowLevel   float64 `json:"row_level"`
	Tolerance  float64 `json:"tolerance"`
	Resamples  int     `json:"resamples"`
	Rows       []Row   `json:"rows"`
	// Rates are the floors compared, stage by stage: shown, never gating
	// (a rate of the whole window has no per-request resampling here).
	Rates []RateRow `json:"rates,omitempty"`
	// Demand lists, per stage, how the offered load or mix differed.
	Demand           []string `json:"demand_changes,omitempty"`
	BaselineChanges  []string `json:"baseline_changes,omitempty"`
	CandidateChanges []string `json:"candidate_changes,omitempty"`
	Warnings         []string `json:"warnings,omitempty"`
	Regressions      int      `json:"regressions"`
	Improvements     int      `json:"improvements"`
	ExitCode         int      `json:"exit_code"`
	// Judged counts the rows that had the sample to be judged: the
	// intervals are corrected over these alone.
	Judged            int      `json:"judged_rows"`
	SkippedStages     []string `json:"skipped_stages,omitempty"`
	BaselineRequests  int      `json:"baseline_requests"`
	CandidateRequests int      `json:"candidate_requests"`
}

// RateRow is one stage × floor metric: its rate on each side.
type RateRow struct {
	Stage     string  `json:"stage"`
	Metric    string  `json:"metric"`
	Unit      string  `json:"unit,omitempty"`
	Baseline  float64 `json:"baseline"`
	Candidate float64 `json:"candidate"`
	// ChangePct is candidate/baseline − 1 in percent; absent when the
	// baseline is 0.
	ChangePct *float64 `json:"change_pct,omitempty"`
}

// rateOf is m's rate over recs: the work of the successful, measured
// records per second of their window (first intended start to last end,
// as summary.json's); ok false without a window.
func rateOf(recs []loadgen.Record, m *measure.RateMetric) (float64, bool) {
	if m.Bad != nil {
		return ratioOf(recs, m)
	}
	var work int64
	var first, last time.Duration
	seen := false
	for i := range recs {
		r := &recs[i]
		if r.Warmup || r.NotSent || r.ErrorKind == loadgen.ErrDropped || r.ErrorKind == loadgen.ErrNotDue {
			continue
		}
		if !seen || r.Intended < first {
			first = r.Intended
		}
		if !seen || r.End > last {
			last = r.End
		}
		seen = true
		if r.OK() {
			work += m.Work(r)
		}
	}
	if !seen || last <= first {
		return 0, false
	}
	return measure.PerSecond(work, last-first), true
}

// ratioOf is m's ratio over recs: the measured records it counts bad over
// those it counts, by its row (as summary.json's); ok false when it counts
// none.
func ratioOf(recs []loadgen.Record, m *measure.RateMetric) (float64, bool) {
	var bad, counted int64
	for i := range recs {
		if recs[i].Warmup {
			continue
		}
		switch c, b := m.Bad(&recs[i]); {
		case !c:
		case b:
			bad++
			fallthrough
		default:
			counted++
		}
	}
	if counted == 0 {
		return 0, false
	}
	return float64(bad) / float64(counted), true
}

// Row is one stage × metric × percentile.
type Row struct {
	Stage       string  `json:"stage"`
	Metric      string  `json:"metric"`
	Percentile  float64 `json:"percentile"`
	BaselineMs  float64 `json:"baseline_ms"`
	CandidateMs float64 `json:"candidate_ms"`
	// ChangePct is candidate/baseline − 1 in percent; CILowPct and
	// CIHighPct its interval.
	ChangePct float64 `json:"change_pct"`
	CILowPct  float64 `json:"ci_low_pct"`
	CIHighPct float64 `json:"ci_high_pct"`
	Verdict   string  `json:"verdict"`
	// Gates is a regression: it makes the exit 1.
	Gates bool   `json:"gates"`
	Note  string `json:"note,omitempty"`
	// BaselineRequests and CandidateRequests are the requests with samples.
	BaselineRequests  int `json:"baseline_requests"`
	CandidateRequests int `json:"candidate_requests"`
}

// MismatchError refuses results of different plans or mixes. Compare
// returns it inside a *field.Error about Force (errors.As finds it).
type MismatchError struct{ Reasons []string }

func (e *MismatchError) Error() string {
	return "not the same plan or mix: " + strings.Join(e.Reasons, "; ")
}

// Is makes a mismatch a results.ErrNotComparable.
func (e *MismatchError) Is(target error) bool { return target == results.ErrNotComparable }

// Method says how intervals are found, for the report.
const Method = "percentile bootstrap over requests (each side resampled independently, a request's samples kept together), Bonferroni-adjusted across rows"

// Compare compares candidate against baseline.
func Compare(base, cand *Side, opt Options) (*Report, error) {
	if opt.Resamples <= 0 {
		opt.Resamples = 2000
	}
	if opt.Latency == nil {
		opt.Latency = measure.LatencyMetrics()
	}
	if opt.Rates == nil {
		opt.Rates = measure.RateMetrics()
	}
	comparable := func(m *measure.RateMetric) bool {
		return m.Kind == measure.RateFloor && m.Work != nil || m.Kind == measure.RateRatio && m.Bad != nil
	}
	if len(opt.Metrics) == 0 {
		opt.Metrics = slices.Concat(measure.Compared(opt.Latency),
			measure.RatesWhere(opt.Rates, func(m *measure.RateMetric) bool { return m.Compare && comparable(m) }))
	}
	if len(opt.Percentiles) == 0 {
		opt.Percentiles = []float64{0.5, 0.9, 0.99}
	}
	slices.Sort(opt.Percentiles)
	var metrics []*measure.LatencyMetric
	var rates []*measure.RateMetric
	for _, n := range opt.Metrics {
		if r := measure.FindRateIn(opt.Rates, n); r != nil && comparable(r) {
			rates = append(rates, r)
			continue
		}
		m := measure.FindIn(opt.Latency, n)
		if m == nil {
			return nil, fmt.Errorf("metric %q: want one of %s", n, strings.Join(slices.Concat(
				measure.NamesWhere(opt.Latency, func(*measure.LatencyMetric) bool { return true }), measure.RatesWhere(opt.Rates, comparable)), ", "))
		}
		metrics = append(metrics, m)
	}
	var paired string
	if len(base.Order) == 1 && len(cand.Order) == 1 && base.Order[0] != cand.Order[0] {
		// One stage a side (two runs, two sweep levels): its name is only
		// a label of the load, so compare the two; a load that differs is
		// demand change, as for any stage.
		paired = fmt.Sprintf("one stage a side: candidate's %q compared with baseline's %q", cand.Order[0], base.Order[0])
		cand = cand.renameStage(cand.Order[0], base.Order[0])
	}
	var stages, skipped []string
	for _, st := range base.Order {
		if _, ok := cand.Stages[st]; ok {
			stages = append(stages, st)
		} else {
			skipped = append(skipped, st)
		}
	}
	for _, st := range cand.Order {
		if _, ok := base.Stages[st]; !ok {
			skipped = append(skipped, st)
		}
	}
	if reasons := mismatch(base, cand, stages); len(reasons) > 0 && !opt.Force {
		return nil, &field.Error{Field: "Force", Hint: "{} to compare anyway", Err: &MismatchError{reasons}}
	}
	rep := &Report{Schema: Schema, Baseline: base.Dir, Candidate: cand.Dir, Method: Method, Confidence: 0.95,
		Tolerance: opt.Tolerance, Resamples: opt.Resamples, BaselineChanges: base.Changes, CandidateChanges: cand.Changes,
		SkippedStages: skipped}
	if paired != "" {
		rep.Warnings = append(rep.Warnings, paired)
	}
	if len(skipped) > 0 {
		rep.Warnings = append(rep.Warnings, "stages in only one result are not compared: "+strings.Join(skipped, ", "))
	}
	if reasons := mismatch(base, cand, stages); len(reasons) > 0 {
		rep.Warnings = append(rep.Warnings, "compared with --force: "+strings.Join(reasons, "; "))
	}
	demandChanged := map[string]bool{}
	for _, st := range stages {
		if d := demand(st, base, cand); d != "" {
			demandChanged[st] = true
			rep.Demand = append(rep.Demand, d)
		}
		rep.BaselineRequests += seen(base, st)
		rep.CandidateRequests += seen(cand, st)
	}
	// Rows are judged in two passes: first which rows have the sample to
	// be judged at all, then the intervals, Bonferroni-corrected over
	// those rows only. Counting rows never judged would widen every
	// interval for nothing (p99 rows on 80 requests hid a +252% p50).
	type pending struct {
		stage  string
		metric string
		pb, pc *population
		rows   []Row
	}
	var work []pending
	judged := 0
	for _, st := range stages {
		for _, m := range metrics {
			pb, pc := newPopulation(base.Stages[st], m), newPopulation(cand.Stages[st], m)
			if len(pb.reqs) == 0 && len(pc.reqs) == 0 {
				continue // the metric does not apply (unstreamed answers: no ITL)
			}
			rows := judgeable(st, m.Name, pb, pc, opt.Percentiles)
			for _, r := range rows {
				if r.Verdict == "" {
					judged++
				}
			}
			work = append(work, pending{st, m.Name, pb, pc, rows})
		}
	}
	rep.Judged = judged
	for _, st := range stages {
		for _, m := range rates {
			b, okb := rateOf(base.Stages[st], m)
			c, okc := rateOf(cand.Stages[st], m)
			if !okb || !okc {
				continue
			}
			row := RateRow{Stage: st, Metric: m.Name, Unit: m.Unit, Baseline: b, Candidate: c}
			if b > 0 {
				row.ChangePct = new(100 * (c/b - 1))
			}
			rep.Rates = append(rep.Rates, row)
		}
	}
	alpha := 0.05 / float64(max(judged, 1))
	rep.RowLevel = 1 - alpha
	rng := rand.New(rand.NewPCG(opt.Seed, 0x636f6d70617265))
	for _, w := range work {
		rows := w.rows
		compareMetric(rows, w.pb, w.pc, opt, alpha, rng)
		for i := range rows {
			r := &rows[i]
			if demandChanged[w.stage] {
				switch r.Verdict {
				case Regression:
					r.Verdict, r.Gates = SlowerDemand, false
				case Improvement:
					r.Verdict = FasterDemand
				}
			}
			switch r.Verdict {
			case Regression:
				rep.Regressions++
			case Improvement:
				rep.Improvements++
			}
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	if judged == 0 {
		rep.Warnings = append(rep.Warnings, "no row had enough requests to be judged: the comparison cannot say whether the candidate regressed")
	}
	switch {
	case rep.Regressions > 0:
		rep.ExitCode = slo.ExitFailed
	case judged == 0:
		// Nothing was compared (it cannot say whether the candidate
		// regressed): never green by accident.
		rep.ExitCode = slo.ExitInconclusive
	}
	return rep, nil
}

// seen is a stage's measured requests, sampled or not.
func seen(s *Side, stage string) int {
	if n, ok := s.Seen[stage]; ok {
		return n
	}
	return len(s.Stages[stage])
}

// minRequests is the fewest requests per side a row is judged on.
const minRequests = 20

// judgeable makes the rows of one stage × metric, one per percentile: a
// row's Verdict is left empty when its sample allows judging it, else
// NotEnoughData with a note saying what it needs.
func judgeable(stage, metric string, pb, pc *population, qs []float64) []Row {
	rows := make([]Row, len(qs))
	for j, q := range qs {
		rows[j] = Row{Stage: stage, Metric: metric, Percentile: q, BaselineRequests: len(pb.reqs), CandidateRequests: len(pc.reqs)}
		// At least 10 requests beyond the percentile, else its bootstrap
		// is the few largest values resampled.
		need := max(int(math.Ceil(10/(1-q)-1e-9)), minRequests)
		if len(pb.reqs) < need || len(pc.reqs) < need {
			rows[j].Verdict = NotEnoughData
			rows[j].Note = fmt.Sprintf("p%s needs %d requests a side (10 beyond it); %d and %d", pctLabel(q), need, len(pb.reqs), len(pc.reqs))
		}
	}
	return rows
}

// compareMetric judges the rows judgeable left open, each at level alpha.
func compareMetric(rows []Row, pb, pc *population, opt Options, alpha float64, rng *rand.Rand) {
	qs := opt.Percentiles
	open := false
	for _, r := range rows {
		open = open || r.Verdict == ""
	}
	if !open {
		return
	}
	qb, qc := make([]float64, len(qs)), make([]float64, len(qs))
	pb.quantiles(qs, nil, make([]int64, len(pb.values)), qb)
	pc.quantiles(qs, nil, make([]int64, len(pc.values)), qc)
	rb := pb.resample(qs, opt.Resamples, rng)
	rc := pc.resample(qs, opt.Resamples, rng)
	for j := range qs {
		r := &rows[j]
		if r.Verdict != "" {
			continue
		}
		if !(qb[j] > 0) || math.IsNaN(qc[j]) {
			r.Verdict, r.Note = NotEnoughData, "no positive baseline value to compare against"
			continue
		}
		r.BaselineMs, r.CandidateMs = qb[j], qc[j]
		r.ChangePct = 100 * (qc[j]/qb[j] - 1)
		d := make([]float64, 0, opt.Resamples)
		for i := range rb {
			if rb[i][j] > 0 {
				d = append(d, 100*(rc[i][j]/rb[i][j]-1))
			}
		}
		slices.Sort(d)
		r.CILowPct, r.CIHighPct = percentile(d, alpha/2), percentile(d, 1-alpha/2)
		tol := 100 * opt.Tolerance
		switch {
		case r.CILowPct > tol:
			r.Verdict, r.Gates = Regression, true
		case r.CIHighPct < -tol:
			r.Verdict = Improvement
		case r.CILowPct > 0:
			// Shown slower, but not shown beyond the tolerance: the
			// interval may still reach past it.
			r.Verdict = NoChange
			r.Note = fmt.Sprintf("slower by %+.1f%% to %+.1f%%: not shown beyond the %.1f%% tolerance", r.CILowPct, r.CIHighPct, tol)
		case r.CIHighPct < 0:
			r.Verdict = NoChange
			r.Note = fmt.Sprintf("faster by %+.1f%% to %+.1f%%: not shown beyond the %.1f%% tolerance", r.CIHighPct, r.CILowPct, tol)
		default:
			r.Verdict = NoChange
		}
	}
}

// mismatch says how two results are not of the same plan or mix.
func mismatch(base, cand *Side, stages []string) []string {
	var r []string
	if base.PlanHash != "" && cand.PlanHash != "" && base.PlanHash != cand.PlanHash {
		r = append(r, fmt.Sprintf("plans differ (sha256 %.12s vs %.12s)", base.PlanHash, cand.PlanHash))
	}
	if base.MixHash != "" && cand.MixHash != "" && base.MixHash != cand.MixHash {
		r = append(r, fmt.Sprintf("mixes differ (sha256 %.12s vs %.12s)", base.MixHash, cand.MixHash))
	}
	if len(stages) == 0 {
		r = append(r, fmt.Sprintf("no stage in common (%s vs %s)", strings.Join(base.Order, ","), strings.Join(cand.Order, ",")))
	}
	for _, st := range stages {
		cb, cc := slices.Sorted(maps.Keys(base.Classes[st])), slices.Sorted(maps.Keys(cand.Classes[st]))
		if !slices.Equal(cb, cc) {
			r = append(r, fmt.Sprintf("stage %s: request classes differ (%s vs %s)", st, strings.Join(cb, ","), strings.Join(cc, ",")))
		}
	}
	return r
}

// demand says how a stage's offered load or class shares differ ("" when
// they do not).
func demand(stage string, base, cand *Side) string {
	var d []string
	lb, lc := base.Load[stage], cand.Load[stage]
	switch {
	case lb.Mode != lc.Mode:
		d = append(d, fmt.Sprintf("load mode %s vs %s", lb.Mode, lc.Mode))
	case lb.Arrival != lc.Arrival:
		d = append(d, fmt.Sprintf("arrivals %s vs %s", lb.Arrival, lc.Arrival))
	case lb.Levels != "" && lc.Levels != "" && lb.Levels != lc.Levels:
		what := "rates"
		if lb.Mode == "closed" {
			what = "concurrency"
		}
		d = append(d, fmt.Sprintf("%s %s vs %s", what, lb.Levels, lc.Levels))
	case (lb.Levels == "" || lc.Levels == "") && lb.OfferedPerS > 0 && lc.OfferedPerS > 0 && math.Abs(lc.OfferedPerS/lb.OfferedPerS-1) > 0.05:
		d = append(d, fmt.Sprintf("offered %.3g vs %.3g req/s (%+.0f%%)", lb.OfferedPerS, lc.OfferedPerS, 100*(lc.OfferedPerS/lb.OfferedPerS-1)))
	}
	nb, nc := 0, 0
	for _, n := range base.Classes[stage] {
		nb += n
	}
	for _, n := range cand.Classes[stage] {
		nc += n
	}
	if nb > 0 && nc > 0 {
		for _, c := range slices.Sorted(maps.Keys(base.Classes[stage])) {
			sb, sc := float64(base.Classes[stage][c])/float64(nb), float64(cand.Classes[stage][c])/float64(nc)
			// Over 5 points and beyond sampling (two-proportion z > 3).
			p := (sb*float64(nb) + sc*float64(nc)) / float64(nb+nc)
			se := math.Sqrt(p * (1 - p) * (1/float64(nb) + 1/float64(nc)))
			if math.Abs(sb-sc) > 0.05 && (se == 0 || math.Abs(sb-sc)/se > 3) {
				d = append(d, fmt.Sprintf("class %s %.0f%% vs %.0f%% of requests", c, 100*sb, 100*sc))
			}
		}
	}
	if len(d) == 0 {
		return ""
	}
	return "stage " + stage + ": " + strings.Join(d, ", ") + ": demand changed, not a regression"
}
