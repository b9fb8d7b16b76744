package capacity

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen/measure"

	"github.com/tailgate-llm/tailgate/internal/field"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// Config is one sweep.
type Config struct {
	Client loadgen.Client
	// Source returns a level's prompts; every level gets the same seed,
	// so levels differ only in load.
	Source func() loadgen.Source
	SLO    *slo.Spec
	Search Search
	// Arrival and Burstiness are the open-loop process (default Poisson,
	// as run uses).
	Arrival    loadgen.Arrival
	Burstiness float64
	Seed       uint64
	// Warmup (open loop) and WarmupRequests are left out of each level's
	// figures; closed loop always leaves out at least 2 × concurrency.
	Warmup         time.Duration
	WarmupRequests int
	// MinDuration is the shortest measured part of an open-loop level;
	// MaxDuration bounds any level (default 5m).
	MinDuration, MaxDuration time.Duration
	Timeout, Grace           time.Duration
	MaxInFlight              int
	// AcceptEmpty and AcceptEmptyClasses are loadgen.Options'.
	AcceptEmpty        bool
	AcceptEmptyClasses []string
	// Validity is the bounds every level is held to (nil:
	// slo.DefaultValidity). Errors, dropped and cut requests beyond them
	// are the server saturating (the level fails, saturated); any other
	// reason (the generator distorted the figures, results not written)
	// makes the level INVALID, and it is run again (MaxInvalidAttempts).
	Validity  *slo.Validity
	Telemetry *telemetry.Config
	Streaming bool
	Meta      schema.SummaryMeta
	// Out receives sweep.json and one results directory per level under
	// levels/. Empty: nothing is written.
	Out results.Dir
	// Force replaces a sweep already in Out.
	Force bool
	// CurrentRate (requests/s, 0: unknown) and Growth give the headroom
	// and the forecast.
	CurrentRate float64
	Growth      *Growth
	// GPUHourCostUSD prices each level's GPU time (cost per million output
	// tokens beside its energy).
	GPUHourCostUSD float64
	// Changes are change-record ids recorded in sweep.json and in every
	// level's summary.json.
	Changes []string
	// PlannedLengths is the mix's length plan, recorded in every level's
	// summary.json; nil without a mix.
	PlannedLengths *prompts.LengthPlan
	// Log gets one line per level (nil: discarded).
	Log io.Writer
	// Progress, if set, makes a progress display for each level.
	Progress func(label string) pipeline.Progress
	// Sinks get every level's records too (live OTLP export); the records
	// carry the level's name as their stage. A sink outlives the levels:
	// its Close comes after each, its final flush is the caller's.
	Sinks []pipeline.Sink
	// Now is the clock for the forecast (nil: time.Now).
	Now func() time.Time
}

// Run runs the sweep and writes sweep.json. The error is for a sweep that
// could not start or finish (bad configuration, results not writable); an
// interrupted sweep returns its partial result with Interrupted set and
// an error that says where it stopped and what was kept, wrapping the
// context's (errors.Is(err, context.Canceled)).
func Run(ctx context.Context, cfg Config) (*results.Sweep, error) {
	if cfg.SLO == nil {
		return nil, &field.Error{Field: "SLO", Hint: "{}", Err: errors.New("capacity: a sweep needs an SLO")}
	}
	if err := cfg.Search.check(); err != nil {
		return nil, err
	}
	if cfg.Out != "" && cfg.Out.HasResults() && !cfg.Force {
		return nil, &field.Error{Field: "Force", Hint: "{} to replace them", Err: fmt.Errorf("%s already holds results", cfg.Out)}
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	log := cfg.Log
	if log == nil {
		log = io.Discard
	}
	closed := cfg.Search.closed()
	res := &results.Sweep{Schema: results.SweepSchema, Tool: version.NewTool(cfg.Meta.Version),
		Started: now().UTC(), Mode: "open", SLO: cfg.SLO.Name, SLOFile: cfg.SLO.File,
		Rules: rulesTable, MinRequests: MinRequests(cfg.SLO), Target: cfg.Meta.Target, Model: cfg.Meta.Model,
		Precision: cfg.Search.precision(), Changes: cfg.Changes, Warnings: []string{}}
	if closed {
		res.Mode = "closed"
	} else {
		res.Arrival = string(cfg.arrival())
	}
	if len(cfg.Search.Levels) > 0 {
		for _, l := range cfg.Search.Levels {
			res.Plan = append(res.Plan, l.Name())
		}
	} else {
		res.Plan = []string{cfg.Search.From.Name(), cfg.Search.To.Name()}
	}
	if cfg.Out != "" {
		if cfg.Force {
			if err := cfg.Out.Replace(log); err != nil {
				return nil, err
			}
		}
		if err := cfg.Out.Create(); err != nil {
			return nil, err
		}
	}
	best, ok, limited, err := cfg.Search.run(ctx, func(ctx context.Context, l Level, attempt int) (Outcome, error) {
		minReq, extended := res.MinRequests, false
		for try := 1; ; try++ {
			lr, o, err := cfg.runLevel(ctx, l, len(res.Levels)+1, minReq, nextAttempt(res, l, attempt))
			if lr != nil {
				res.Levels = append(res.Levels, *lr)
				fmt.Fprintf(log, "level %s: %s\n", lr.Name, levelLine(lr))
			}
			if err != nil || lr == nil {
				return o, err
			}
			if !lr.Valid && try < MaxInvalidAttempts {
				fmt.Fprintf(log, "level %s: invalid, running it again (%d of %d)\n", lr.Name, try+1, MaxInvalidAttempts)
				continue
			}
			// A level its sample did not decide is run once more, long
			// enough to decide it if its miss rate holds: counted as a
			// failure, it would put the SLO-max below the truth.
			if need := need(lr); !extended && lr.Valid && !lr.Saturated && lr.Status == slo.ReportInconclusive && need > minReq {
				extended, minReq = true, need
				fmt.Fprintf(log, "level %s: INCONCLUSIVE, running it again to measure %d requests\n", lr.Name, need)
				continue
			}
			return o, err
		}
	})
	res.Ended = now().UTC()
	res.Interrupted = ctx.Err() != nil
	passed := false
	for _, l := range res.Levels {
		passed = passed || l.Pass
	}
	if res.Interrupted && len(res.Levels) > 0 {
		last := res.Levels[len(res.Levels)-1]
		res.Warnings = append(res.Warnings, fmt.Sprintf("the sweep was interrupted during level %s: that level is INVALID (interrupted) and no conclusion is drawn from it", last.Name))
	}
	switch {
	case ok:
		lr := passing(res, best)
		res.SLOMax = &results.SweepPoint{Level: best.Name(), RatePerS: best.Rate, Concurrency: best.Concurrency,
			AchievedPerS: lr.AchievedPerS, Energy: lr.Energy}
		res.LowerBound = lowerBound(res.Levels, best)
		res.SLOMax.LowerBound = res.LowerBound
		notePoint(res.SLOMax, cfg.Search, best, res.Levels, res.Interrupted)
	case passed:
		res.Warnings = append(res.Warnings, "a level passed, but not as the SLO-max (a lower level failed or was invalid, or the sweep stopped first): no SLO-max is claimed")
	case len(res.Levels) > 0 && !res.Interrupted && res.Levels[0].Valid && res.Levels[0].Requests.OK == 0:
		// Saturation makes a server fail requests at loads above what it
		// serves; failing every one at the lowest load is a broken target.
		l := res.Levels[0] // the bottom of the range, or the first of the list
		res.Broken = fmt.Sprintf("the target failed every request at the lowest load, %s (%d of %d): a failing server, not a capacity limit; no SLO-max can be read", l.Name, l.Requests.Errors, l.Requests.Sent)
		res.Warnings = append(res.Warnings, res.Broken)
	case len(res.Levels) > 0 && !res.Interrupted && lowest(res.Levels).FloorsOnly:
		res.Warnings = append(res.Warnings, fmt.Sprintf("no level met every objective: %s failed only on throughput floors, too little demand to meet them, and no level above it passed: no SLO-max is claimed", lowest(res.Levels).Name))
	case len(res.Levels) > 0 && !res.Interrupted && res.Levels[0].Valid:
		res.Warnings = append(res.Warnings, fmt.Sprintf("no level met every objective: the SLO-max is below %s", res.Levels[0].Name))
	case len(res.Levels) > 0 && !res.Interrupted:
		res.Warnings = append(res.Warnings, fmt.Sprintf("no level passed, and %s was INVALID: no conclusion is drawn about the SLO-max", res.Levels[0].Name))
	}
	if limited && !res.Interrupted {
		res.Warnings = append(res.Warnings, fmt.Sprintf("--max-levels (%d) stopped the search before the precision (%g): the boundary is known only to the bracket run", cfg.Search.maxLevels(), res.Precision))
	}
	res.Knee = knee(res.Levels)
	if cfg.CurrentRate > 0 && res.SLOMax != nil {
		res.Headroom = headroom(cfg.CurrentRate, res.SLOMax.Rate(), cfg.Growth, res.Ended, res.LowerBound)
	}
	res.Warnings = append(res.Warnings, demandNotes(res.Levels)...)
	res.Warnings = append(res.Warnings, monotoneWarnings(res.Levels)...)
	var werr error
	if cfg.Out != "" {
		if werr = cfg.Out.WriteSweep(res); werr != nil && err == nil {
			err = werr
		}
	}
	if res.Interrupted && (err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		cause := err
		if cause == nil || errors.Is(cause, werr) {
			cause = ctx.Err()
		}
		err = interrupted(res, cfg.Out, werr, cause)
	}
	return res, err
}

// interrupted says which level an interruption cut and what was kept,
// wrapping cause so callers still see the cancellation.
func interrupted(r *results.Sweep, out results.Dir, werr, cause error) error {
	at := "before its first level"
	done := 0
	for _, l := range r.Levels {
		if l.Valid {
			done++
		}
	}
	if n := len(r.Levels); n > 0 {
		at = "during level " + r.Levels[n-1].Name
		if r.Levels[n-1].Valid {
			at = "after level " + r.Levels[n-1].Name
		}
	}
	kept := "nothing was written"
	switch {
	case out != "" && werr == nil:
		kept = fmt.Sprintf("%d completed level(s) and the interrupted one are in %s", done, out.Path(results.SweepFile))
	case out != "":
		kept = fmt.Sprintf("%s could not be written (%v)", out.Path(results.SweepFile), werr)
	}
	return fmt.Errorf("sweep interrupted %s (%d of %d levels run completed): %s: %w", at, done, len(r.Levels), kept, cause)
}

// lowest is the level of lowest load run (the first run's, for a list).
func lowest(ls []results.SweepLevel) *results.SweepLevel {
	lo := &ls[0]
	for i := range ls {
		if ls[i].Value() < lo.Value() {
			lo = &ls[i]
		}
	}
	return lo
}

// lowerBound reports whether no valid level above best failed: then the
// SLO-max shows only that the capacity is at least best. An INVALID level
// above it (interrupted, distorted) is no failure.
func lowerBound(ls []results.SweepLevel, best Level) bool {
	for _, l := range ls {
		if l.Value() > best.Value() && l.Valid && !l.Pass {
			return false
		}
	}
	return true
}

// demandNotes say which levels had floors set aside (N/A) or failed only
// on floors below the SLO-max: demand, not capacity.
func demandNotes(ls []results.SweepLevel) []string {
	var na, low []string
	for _, l := range ls {
		if len(l.NotApplicable) > 0 {
			na = append(na, fmt.Sprintf("%s (%s)", l.Name, strings.Join(l.NotApplicable, ", ")))
		}
		if l.FloorsOnly {
			low = append(low, l.Name)
		}
	}
	var w []string
	if len(na) > 0 {
		w = append(w, "floors out of reach of the offered load are N/A, not FAIL (the verdicts say why): "+strings.Join(na, "; "))
	}
	if len(low) > 0 {
		w = append(w, "failed only on throughput floors (the offered load did not yield them; floors rise with load, so this is demand, not capacity): "+strings.Join(low, ", "))
	}
	return w
}

func (s Search) check() error {
	if len(s.Levels) > 0 {
		return nil
	}
	switch {
	case s.From.Value() <= 0 || s.To.Value() <= 0:
		return errors.New("capacity: give a range (from and to) or a list of levels")
	case s.From.Closed() != s.To.Closed():
		return fmt.Errorf("capacity: range %s to %s mixes a rate and a concurrency", s.From.Name(), s.To.Name())
	case s.From.Value() >= s.To.Value():
		return fmt.Errorf("capacity: range %s to %s: the bottom must be below the top", s.From.Name(), s.To.Name())
	}
	return nil
}

func (s Search) closed() bool {
	if len(s.Levels) > 0 {
		return s.Levels[0].Closed()
	}
	return s.From.Closed()
}

func (s Search) precision() float64 {
	if s.Precision > 0 {
		return s.Precision
	}
	return 0.05
}

func (c *Config) arrival() loadgen.Arrival { return loadgen.ResolveArrival(c.Arrival, false) }

// MinRequests is the measured requests a level needs (see the package
// doc): the fewest that can PASS the strictest objective with no misses
// at the spec's confidence (slo.MinDecisive: ⌈ln α / ln(1 − p)⌉ for the
// smallest allowed miss fraction p, a latency objective's 1 − target or
// an error rate's limit: 299 for 99% or 1% at 95%); 1% without one.
func MinRequests(spec *slo.Spec) int {
	p := 1.0
	for i := range spec.Objectives {
		if b, ok := spec.Objectives[i].ErrorBudget(); ok && b > 0 {
			p = min(p, b)
		}
	}
	if p >= 1 {
		p = 0.01
	}
	return int(slo.MinDecisive(p, slo.ConfidenceOf(spec)))
}

// options are the load options of one level.
func (c *Config) options(l Level, minReq int) loadgen.Options {
	maxDur := c.MaxDuration
	if maxDur <= 0 {
		maxDur = 5 * time.Minute
	}
	o := loadgen.Options{Closed: l.Closed(), Seed: c.Seed, Timeout: c.Timeout, Grace: c.Grace,
		MaxInFlight: c.MaxInFlight, AcceptEmpty: c.AcceptEmpty, AcceptEmptyClasses: c.AcceptEmptyClasses}
	st := loadgen.Stage{Name: l.Name()}
	if l.Closed() {
		st.Concurrency = l.Concurrency
		st.Duration = maxDur
		o.WarmupRequests = max(c.WarmupRequests, 2*l.Concurrency)
		o.Requests = o.WarmupRequests + minReq
	} else {
		st.Rate = l.Rate
		o.Arrival, o.Burstiness = c.arrival(), c.Burstiness
		measured := max(time.Duration(1.1*float64(minReq)/l.Rate*float64(time.Second)), c.MinDuration)
		st.Duration = min(c.Warmup+measured, maxDur)
		o.WarmupDuration, o.WarmupRequests = c.Warmup, c.WarmupRequests
	}
	o.Stages = []loadgen.Stage{st}
	return o
}

// runLevel runs and judges one level.
func (c *Config) runLevel(ctx context.Context, l Level, order, minReq, attempt int) (*results.SweepLevel, Outcome, error) {
	opts := c.options(l, minReq)
	name := l.Name()
	if attempt > 1 {
		name = fmt.Sprintf("%s-%d", name, attempt)
		opts.Stages[0].Name = name
	}
	var dir results.Dir
	if c.Out != "" {
		dir = c.Out.Level(name)
	}
	tr := &trend{}
	meta := c.Meta
	meta.Load = opts.Describe()
	spec := pipeline.Spec{Client: c.Client, Source: c.Source(), Options: opts, Meta: meta,
		Streaming: c.Streaming, SLO: c.judging(l), Validity: c.Validity, Telemetry: c.Telemetry, Out: dir,
		Changes: c.Changes, GPUHourCostUSD: c.GPUHourCostUSD, PlannedLengths: c.PlannedLengths}
	if c.Progress != nil {
		spec.Progress = c.Progress(fmt.Sprintf("level %s (%d)", name, order))
	}
	res, err := pipeline.Run(ctx, spec, append([]pipeline.Sink{pipeline.Func(tr.add)}, c.Sinks...)...)
	if res == nil {
		return nil, Outcome{}, fmt.Errorf("level %s: %w", name, err)
	}
	rep := res.Report // judged by the pipeline: validity and verdicts
	if err == nil {
		err = res.WriteErr()
	}
	lr := levelResult(l, order, minReq, res, rep, tr, c.bounds())
	lr.Name, lr.Attempt = name, attempt
	if c.Out != "" {
		if rel, rerr := filepath.Rel(string(c.Out), string(dir)); rerr == nil {
			lr.Dir = rel
		}
	}
	if err == nil && res.Info.Interrupted {
		err = ctx.Err()
	}
	return lr, Outcome{Pass: lr.Pass, Saturated: lr.Saturated, Score: lr.Score, FloorsOnly: lr.FloorsOnly}, err
}

// judging is what a level is judged against: the SLO, and in open loop
// the level's rate as its demand, so a floor the rate cannot reach is N/A
// there (a closed loop offers what the server serves: every floor applies).
func (c *Config) judging(l Level) *pipeline.Judging {
	j := &pipeline.Judging{Spec: c.SLO}
	if !l.Closed() {
		j.Demand = &slo.Demand{OfferedPerS: l.Rate}
	}
	return j
}

func (c *Config) bounds() slo.Validity {
	if c.Validity == nil {
		return slo.DefaultValidity()
	}
	return *c.Validity
}

// need is the most requests any of the level's undecided verdicts needs
// to be decided (0: none would, or none is undecided).
func need(l *results.SweepLevel) int {
	n := uint64(0)
	for _, v := range l.Verdicts {
		if v.Status == slo.Inconclusive {
			n = max(n, v.NeedRequests)
		}
	}
	return int(min(n, 1<<30))
}

// MaxInvalidAttempts bounds the runs of one level that came out INVALID
// (the generator distorted it, results not written): a busy machine can
// spoil one run, rarely three.
const MaxInvalidAttempts = 3

// serverSide are the validity checks that describe the server saturating,
// not a run to discard: a sweep reads them as saturation.
var serverSide = map[string]bool{"errors": true, "dropped": true, "cut_at_end": true}

// nextAttempt is the attempt number for the next run of l: one above the
// highest run so far (at least min), so every run has its own name.
func nextAttempt(r *results.Sweep, l Level, min int) int {
	a := min
	for _, lr := range r.Levels {
		if lr.Value() == l.Value() && lr.Attempt >= a {
			a = lr.Attempt + 1
		}
	}
	return a
}

// sweepMetrics are the latency metrics a level keeps: the metric table's
// rows marked Sweep.
var sweepMetrics = measure.NamesWhere(measure.LatencyMetrics(), func(m *measure.LatencyMetric) bool { return m.Sweep })

// keepRates puts the rates of rows marked Sweep into lr.Rates, as t gives
// them (the built-in rates have fields of their own and no Sweep mark).
func keepRates(lr *results.SweepLevel, t *schema.Throughput, rows []measure.RateMetric) {
	for i := range rows {
		m := &rows[i]
		if !m.Sweep || m.Of == nil {
			continue
		}
		if v, ok := m.Of(t); ok {
			if lr.Rates == nil {
				lr.Rates = map[string]float64{}
			}
			lr.Rates[m.Name] = v
		}
	}
}

// levelResult reads a level's figures and decides pass and saturation.
func levelResult(l Level, order, minReq int, res *pipeline.Result, rep *slo.Report, tr *trend, bounds slo.Validity) *results.SweepLevel {
	s := res.Summary
	lr := &results.SweepLevel{Name: l.Name(), RatePerS: l.Rate, Concurrency: l.Concurrency, Order: order,
		OfferedPerS: s.Throughput.OfferedPerS, AchievedPerS: s.Throughput.RequestsPerS,
		GoodputPerS: s.Throughput.GoodputPerS, OutputTokensPerS: s.Throughput.OutputTokensPerS,
		Requests: s.Requests, MinRequests: minReq, LatencyMs: map[string]schema.Hist{},
		Status: rep.Status, Verdicts: rep.Verdicts, Problems: rep.Problems, Valid: true, Warnings: s.Warnings}
	for _, p := range rep.Problems {
		if !serverSide[p.Check] && p.Check != "no_data" {
			lr.Valid = false
			lr.InvalidReasons = append(lr.InvalidReasons, p.String())
		}
	}
	if l.Closed() {
		lr.OfferedPerS = 0 // a closed loop offers what it achieves
	}
	for _, m := range sweepMetrics {
		if h, ok := s.LatencyMs[m]; ok {
			lr.LatencyMs[m] = h
		}
	}
	keepRates(lr, &s.Throughput, measure.RateMetrics())
	measured := s.Requests.Sent - s.Requests.Dropped - s.Requests.CutAtEnd
	lr.Short = measured < int64(minReq)
	if t := s.Telemetry; t != nil {
		lr.GPUUtilization = t.GPUUtilization
		lr.QueueDelay = t.QueueDelay
		lr.ServerWaiting = t.Waiting
		lr.ServerRunning = t.Running
	}
	for _, e := range s.Energy { // one stage: the level's
		lr.Energy = e
	}
	lr.EnergyUnavailable = s.EnergyUnavailable
	lr.TTFTFirstQuarterP50Ms, lr.TTFTLastQuarterP50Ms = tr.quarters()
	lr.Saturation = saturation(s, lr, bounds)
	lr.Saturated = lr.Saturation != ""
	lr.Score = score(rep.Verdicts)
	lr.Pass = rep.Status == slo.ReportPass && lr.Valid && !lr.Saturated && !lr.Short
	floorFails, otherFails := 0, 0
	for _, v := range rep.Verdicts {
		switch {
		case v.Status == slo.NotApplicable:
			lr.NotApplicable = append(lr.NotApplicable, v.Objective)
		case v.Status == slo.Pass || v.Status == slo.Waived:
		case v.Kind == slo.KindFloor:
			floorFails++
		default:
			otherFails++
		}
	}
	lr.FloorsOnly = !lr.Pass && lr.Valid && !lr.Saturated && !lr.Short && floorFails > 0 && otherFails == 0 && len(rep.Problems) == 0
	return lr
}

// saturation says why a level is saturated ("" when it is not).
func saturation(s *results.Summary, lr *results.SweepLevel, bounds slo.Validity) string {
	q := s.Requests
	switch {
	case q.Sent > 0 && bounds.MaxErrorRate.CmpRatio(uint64(q.Errors), uint64(q.Sent)) > 0:
		return fmt.Sprintf("%.1f%% of requests failed (%d of %d)", 100*float64(q.Errors)/float64(q.Sent), q.Errors, q.Sent)
	case q.Sent > 0 && float64(q.Dropped+q.CutAtEnd) > 0.01*float64(q.Sent):
		return fmt.Sprintf("%d of %d requests still queued when the level ended (%d cut at the end, %d dropped)",
			q.Dropped+q.CutAtEnd, q.Sent, q.CutAtEnd, q.Dropped)
	case lr.TTFTFirstQuarterP50Ms > 0 && lr.TTFTLastQuarterP50Ms >= 2*lr.TTFTFirstQuarterP50Ms &&
		lr.TTFTLastQuarterP50Ms-lr.TTFTFirstQuarterP50Ms >= 50:
		return fmt.Sprintf("queue delay grows without bound: TTFT p50 %.0f ms in the first quarter, %.0f ms in the last",
			lr.TTFTFirstQuarterP50Ms, lr.TTFTLastQuarterP50Ms)
	}
	return ""
}

// score is the worst latency objective's quantile over its threshold, 0
// when a failed objective other than a floor has none (a ratio, a
// quantile in +Inf).
func score(vs []slo.Verdict) float64 {
	worst := 0.0
	for _, v := range vs {
		if v.Kind == slo.KindFloor {
			continue // work done, not latency: FloorsOnly says what floors did
		}
		if v.Kind != slo.KindLatency || v.QuantileMs == nil || v.Threshold <= 0 {
			if v.Status == slo.Fail {
				return 0
			}
			continue
		}
		worst = max(worst, *v.QuantileMs/v.Threshold)
	}
	return worst
}

// trend keeps each measured successful request's intended start and TTFT,
// for the queue-growth test.
type trend struct {
	at, ttft []time.Duration
}

func (t *trend) add(r *loadgen.Record) {
	ttft, ok := r.TTFT()
	if r.Warmup || !r.OK() || !ok {
		return
	}
	t.at = append(t.at, r.Intended)
	t.ttft = append(t.ttft, ttft)
}

// quarters is the median TTFT (ms) of the first and last quarter of the
// requests by intended start (0, 0 with fewer than 8).
func (t *trend) quarters() (first, last float64) {
	n := len(t.at)
	if n < 8 {
		return 0, 0
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { return int(t.at[a] - t.at[b]) })
	med := func(ix []int) float64 {
		v := make([]time.Duration, len(ix))
		for i, j := range ix {
			v[i] = t.ttft[j]
		}
		slices.Sort(v)
		return float64(v[len(v)/2]) / float64(time.Millisecond)
	}
	return med(idx[:n/4]), med(idx[n-n/4:])
}

// monotoneWarnings flags a level that passed above one that failed: the
// latency curve is not monotone there (noise, or a level too short).
func monotoneWarnings(ls []results.SweepLevel) []string {
	sorted := slices.Clone(ls)
	slices.SortFunc(sorted, func(a, b results.SweepLevel) int { return cmpFloat(a.Value(), b.Value()) })
	var w []string
	for i, a := range sorted {
		// A floor met only above some load is expected, not noise: floors
		// rise with load, latency does not fall with it.
		// An INVALID level says nothing of the curve.
		if a.Pass || a.FloorsOnly || !a.Valid {
			continue
		}
		for _, b := range sorted[i+1:] {
			if b.Pass {
				w = append(w, fmt.Sprintf("level %s passed above %s, which failed: the curve is not monotone there; rerun with longer levels", b.Name, a.Name))
				return w
			}
		}
	}
	return w
}

func cmpFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
