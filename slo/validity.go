package slo

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// Validity bounds the run itself: beyond them the run is invalid (exit 3)
// whatever the objectives say, because the numbers would not describe the
// server under the planned load. It is the one validity model: run,
// validate, sweep, merge and check all judge by it, with DefaultValidity
// where neither a flag nor a plan's validity: block says otherwise (flags
// override the plan), and the bounds used are saved with every run
// (summary.json validity.bounds) so check re-judges by the same ones.
type Validity struct {
	// MaxErrorRate: more of the sent requests failing than this and the run
	// measured a failing server or a broken set-up, not latency. Requests
	// the run cancelled itself are not failures.
	MaxErrorRate Decimal `json:"max_error_rate"`
	// MaxDropped: more of the scheduled requests never sent (no free slot)
	// than this and the load generator did not offer the planned load.
	MaxDropped Decimal `json:"max_dropped"`
	// MaxCutAtEnd: more of the sent requests still in flight when the
	// grace period ran out than this and the figures describe the survivors
	// only: the slowest requests are missing from every tail.
	MaxCutAtEnd Decimal `json:"max_cut_at_end"`
	// MaxContextLength: more of the sent requests refused for length
	// (context_length) than this and the mix does not fit the model: the
	// figures describe the prompts that happened to fit.
	MaxContextLength Decimal `json:"max_context_length"`
	// MaxDistortion is the share by which the load generator may move a
	// reported figure or a verdict before the run is invalid (the
	// self-check's stated share).
	MaxDistortion Decimal `json:"max_distortion"`
	// DistortionWarns makes a distorting generator a warning only (run
	// --self-check warn), not a reason the run is invalid.
	DistortionWarns bool `json:"self_check_warns,omitempty"`
	// MaxScheduleLag and MaxClientCPU are opt-in bounds a plan may set
	// (zero: not checked): the self-check judges the generator by default,
	// against what its lateness distorts.
	MaxScheduleLag time.Duration `json:"-"`
	MaxClientCPU   Decimal       `json:"max_client_cpu"`
}

// defaultValidityTable is the one default set. Errors 5%: a user reading a
// latency report expects it to describe answers, and beyond one request
// in twenty failing the tails describe a failing server (the figure most
// load-test tools and CI gates use). Dropped 1%: the schedule is the
// load under test; a generator that could not send more than 1% of it did
// not offer that load. Cut at the end 5%: the requests cut are the slowest
// (they were still running); beyond 5% even a p95 describes survivors only.
// Context length 1%: the agent benchmarks' rule; a mix whose prompts
// overflow the context more often than that measures a different
// workload. Distortion 10%: the self-check's stated share — a figure the generator
// could move by more than a tenth is not the server's.
var defaultValidityTable = Validity{
	MaxErrorRate:     MustDecimal("5%"),
	MaxDropped:       MustDecimal("1%"),
	MaxCutAtEnd:      MustDecimal("5%"),
	MaxContextLength: MustDecimal("1%"),
	MaxDistortion:    MustDecimal("10%"),
}

// unboundedTable holds a run to no error, dropped or cut share and makes the
// self-check a warning: interruption and results not written still make it
// invalid. A canary's windows use it (failures are what its objectives
// judge), and tests that judge one other thing.
var unboundedTable = Validity{MaxErrorRate: MustDecimal("100%"), MaxDropped: MustDecimal("100%"),
	MaxCutAtEnd: MustDecimal("100%"), MaxContextLength: MustDecimal("100%"), MaxDistortion: defaultValidityTable.MaxDistortion, DistortionWarns: true}

type validityJSON struct {
	MaxErrorRate Decimal `json:"max_error_rate"`
	MaxDropped   Decimal `json:"max_dropped"`
	MaxCutAtEnd  Decimal `json:"max_cut_at_end"`
	// MaxContextLength is a pointer so that bounds saved before it
	// existed read back with the default.
	MaxContextLength *Decimal `json:"max_context_length,omitempty"`
	MaxDistortion    Decimal  `json:"max_distortion"`
	DistortionWarns  bool     `json:"self_check_warns,omitempty"`
	MaxScheduleLag   string   `json:"max_schedule_lag,omitempty"`
	MaxClientCPU     *Decimal `json:"max_client_cpu,omitempty"`
}

// MarshalJSON writes the bounds as the plan's validity: block would.
func (v Validity) MarshalJSON() ([]byte, error) {
	j := validityJSON{MaxErrorRate: v.MaxErrorRate, MaxDropped: v.MaxDropped, MaxCutAtEnd: v.MaxCutAtEnd,
		MaxDistortion: v.MaxDistortion, DistortionWarns: v.DistortionWarns}
	cl := v.MaxContextLength
	j.MaxContextLength = &cl
	if v.MaxScheduleLag > 0 {
		j.MaxScheduleLag = v.MaxScheduleLag.String()
	}
	if !v.MaxClientCPU.IsZero() {
		c := v.MaxClientCPU
		j.MaxClientCPU = &c
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads MarshalJSON's form; keys left out keep their
// defaults.
func (v *Validity) UnmarshalJSON(b []byte) error {
	d := defaultValidityTable
	j := validityJSON{MaxErrorRate: d.MaxErrorRate, MaxDropped: d.MaxDropped, MaxCutAtEnd: d.MaxCutAtEnd, MaxDistortion: d.MaxDistortion}
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*v = Validity{MaxErrorRate: j.MaxErrorRate, MaxDropped: j.MaxDropped, MaxCutAtEnd: j.MaxCutAtEnd,
		MaxContextLength: d.MaxContextLength, MaxDistortion: j.MaxDistortion, DistortionWarns: j.DistortionWarns}
	if j.MaxContextLength != nil {
		v.MaxContextLength = *j.MaxContextLength
	}
	if j.MaxScheduleLag != "" {
		lag, err := time.ParseDuration(j.MaxScheduleLag)
		if err != nil {
			return fmt.Errorf("max_schedule_lag: %w", err)
		}
		v.MaxScheduleLag = lag
	}
	if j.MaxClientCPU != nil {
		v.MaxClientCPU = *j.MaxClientCPU
	}
	return nil
}

// ErrorRateLimit is MaxErrorRate as a fraction (summary.json's
// validity.max_error_rate).
func (v Validity) ErrorRateLimit() float64 { return v.MaxErrorRate.Float() }

// ValidityFromErrorRate is the default set with the error-rate limit a run
// saved before the bounds were (histograms.json max_error_rate: negative
// was "no limit").
func ValidityFromErrorRate(limit float64) Validity {
	v := defaultValidityTable
	switch {
	case limit < 0 || limit >= 1:
		v.MaxErrorRate = MustDecimal("100%")
	case limit > 0:
		if d, err := ParseDecimal(strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", limit), "0"), ".")); err == nil {
			v.MaxErrorRate = d
		}
	}
	return v
}

// Problem is a reason the run itself is invalid: what the numbers measure
// is not the server under the planned load.
type Problem struct {
	Stage string `json:"stage,omitempty"`
	// Check is one of "no_requests", "unreachable", "errors", "dropped",
	// "cut_at_end", "context_length", "interrupted", "client_bottleneck" (generator
	// distortion), "results_incomplete", "incomplete", "no_data",
	// "stage_error", "records_disagree".
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Stage == "" {
		return p.Check + ": " + p.Detail
	}
	return "stage " + p.Stage + ": " + p.Check + ": " + p.Detail
}

// StageCounts counts a stage's records.
type StageCounts struct {
	Requests uint64 `json:"requests"` // measured records, dropped included
	OK       uint64 `json:"ok"`
	Failed   uint64 `json:"failed"` // sent and failed (loadgen.ErrorKind.Counted)
	Dropped  uint64 `json:"dropped"`
	// CutAtEnd were cut by the load generator at the end of the grace
	// period: neither ok nor failed.
	CutAtEnd uint64 `json:"cut_at_end,omitempty"`
	// Cancelled were in flight when the run stopped itself (Ctrl-C, a
	// failed sink): neither ok nor failed.
	Cancelled uint64 `json:"cancelled,omitempty"`
	Connect   uint64 `json:"connect_errors"`
	Warmup    uint64 `json:"warmup"`
	// ContextLength counts the failed requests refused for length, and
	// ContextFirst names the first few ("request 12: HTTP 400: ...").
	ContextLength uint64   `json:"context_length,omitempty"`
	ContextFirst  []string `json:"-"`
}

// contextNamed is how many refusals for length a problem names.
const contextNamed = 3

func (c *StageCounts) add(r *loadgen.Record) {
	if r.Warmup {
		c.Warmup++
		return
	}
	if r.ErrorKind == loadgen.ErrNotDue { // never sent, not part of the run
		return
	}
	c.Requests++
	switch {
	case r.OK():
		c.OK++
	case r.ErrorKind == loadgen.ErrDropped:
		c.Dropped++
	case r.ErrorKind == loadgen.ErrCutAtEnd:
		c.CutAtEnd++
	case r.ErrorKind == loadgen.ErrCancelled:
		c.Cancelled++
	default:
		c.Failed++
		if r.ErrorKind == loadgen.ErrConnect {
			c.Connect++
		}
		if r.ErrorKind == loadgen.ErrContextLength {
			c.ContextLength++
			if len(c.ContextFirst) < contextNamed {
				c.ContextFirst = append(c.ContextFirst, "request "+strconv.FormatInt(r.Seq, 10)+": "+r.Error)
			}
		}
	}
}

// CountsOf is a run summary's request counts in a stage's form (merge
// judges a merged run from them, as the judge does from records).
func CountsOf(q schema.Counts) StageCounts {
	u := func(n int64) uint64 { return uint64(max(n, 0)) }
	c := StageCounts{Requests: u(q.Sent + q.Dropped), OK: u(q.OK), Failed: u(q.Errors), Dropped: u(q.Dropped),
		CutAtEnd: u(q.CutAtEnd), Cancelled: u(q.ErrorsByKind[string(loadgen.ErrCancelled)]),
		Connect: u(q.ErrorsByKind[string(loadgen.ErrConnect)]), Warmup: u(q.Warmup),
		ContextLength: u(q.ErrorsByKind[string(loadgen.ErrContextLength)])}
	if e, ok := q.FirstErrors[string(loadgen.ErrContextLength)]; ok {
		c.ContextFirst = []string{e}
	}
	return c
}

// Facts are what a run's validity is judged on beyond its request counts;
// the pipeline knows them as it runs and saves them (summary.json), so
// check judges a saved run by the same facts.
type Facts struct {
	// Interrupted: the user stopped the run (Ctrl-C, SIGTERM).
	Interrupted bool
	// Distorted and Distortion are the self-check's finding
	// (loadgen.SelfCheck.Distorted and Reasons).
	Distorted  bool
	Distortion []string
	// Incomplete says why results did not all reach the disk ("": they
	// did).
	Incomplete string
}

// Problems judges a stage's counts and facts by the bounds: the one
// evaluation of validity, for a stage, a sweep level or a merged run.
func (v Validity) Problems(stage string, c StageCounts, f Facts) (out []Problem) {
	add := func(check, format string, a ...any) {
		out = append(out, Problem{Stage: stage, Check: check, Detail: fmt.Sprintf(format, a...)})
	}
	if f.Interrupted {
		add("interrupted", "the run was stopped before its schedule finished (Ctrl-C or SIGTERM); %d requests in flight were cancelled and are not counted as failures", c.Cancelled)
	}
	defer func() {
		out = append(out, v.factProblems(stage, Facts{Distorted: f.Distorted, Distortion: f.Distortion, Incomplete: f.Incomplete})...)
	}()
	sent := c.Requests - c.Dropped // sent: ok, failed, cut or cancelled
	finished := c.OK + c.Failed
	switch {
	case c.Requests == 0 && c.Warmup > 0:
		add("no_requests", "nothing was measured: all %d requests were warm-up", c.Warmup)
	case c.Requests == 0:
		add("no_requests", "no request was scheduled outside warm-up")
	case c.OK == 0 && c.Connect > 0:
		add("unreachable", "no request succeeded; %d of %d failed to connect", c.Connect, finished)
	case c.OK == 0 && c.Failed > 0:
		add("errors", "no request succeeded (%d sent, %d failed)", sent, c.Failed)
	case finished > 0 && v.MaxErrorRate.CmpRatio(c.Failed, finished) > 0:
		add("errors", "%d of %d sent requests failed (%s), above the %s validity bound (max_error_rate, --max-error-rate)",
			c.Failed, finished, percent(float64(c.Failed)/float64(finished)), v.MaxErrorRate)
	}
	if c.Requests > 0 && v.MaxDropped.CmpRatio(c.Dropped, c.Requests) > 0 {
		add("dropped", "%d of %d requests were dropped (never sent: no free slot), above the %s bound (max_dropped, --max-dropped)",
			c.Dropped, c.Requests, v.MaxDropped)
	}
	if sent > 0 && v.MaxCutAtEnd.CmpRatio(c.CutAtEnd, sent) > 0 {
		add("cut_at_end", "%d of %d sent requests were still in flight when the grace period ran out (%s), above the %s bound (max_cut_at_end, --max-cut-at-end): the figures describe the faster survivors",
			c.CutAtEnd, sent, percent(float64(c.CutAtEnd)/float64(sent)), v.MaxCutAtEnd)
	}
	if finished > 0 && c.ContextLength > 0 && v.MaxContextLength.CmpRatio(c.ContextLength, finished) > 0 {
		first := ""
		if len(c.ContextFirst) > 0 {
			first = "; first: " + strings.Join(c.ContextFirst, "; ")
		}
		add("context_length", "%d of %d sent requests were refused for length, over the model's context (%s), above the %s bound (max_context_length, --max-context-length): the mix does not fit the model%s",
			c.ContextLength, finished, percent(float64(c.ContextLength)/float64(finished)), v.MaxContextLength, first)
	}
	return out
}

// factProblems judges the facts alone (Problems does, after the counts).
func (v Validity) factProblems(stage string, f Facts) []Problem {
	var out []Problem
	add := func(check, format string, a ...any) {
		out = append(out, Problem{Stage: stage, Check: check, Detail: fmt.Sprintf(format, a...)})
	}
	if f.Interrupted {
		add("interrupted", "the run was stopped before its schedule finished (Ctrl-C or SIGTERM)")
	}
	if f.Distorted && !v.DistortionWarns {
		for _, r := range f.Distortion {
			add("client_bottleneck", "the load generator distorted the figures: %s", r)
		}
	}
	if f.Incomplete != "" {
		add("results_incomplete", "results could not be written: %s", f.Incomplete)
	}
	return out
}

// problems checks the stage's running counts against the validity bounds.
func (s *stageJudge) problems(v Validity, clientCPU float64, f Facts) []Problem {
	out := v.Problems(s.name, s.counts, f)
	add := func(check, format string, a ...any) {
		out = append(out, Problem{Stage: s.name, Check: check, Detail: fmt.Sprintf(format, a...)})
	}
	// p99 > bound exactly when fewer than the nearest rank of 99% are
	// within it; the figure shown comes from the histogram.
	if v.MaxScheduleLag > 0 && s.lagTotal > 0 && s.lagWithin < MustDecimal("0.99").CeilMul(s.lagTotal) {
		p99, _ := rankValue(s.lagHist, MustDecimal("0.99").CeilMul(s.lagTotal))
		add("client_bottleneck", "p99 schedule lag %s is above %s: requests were sent late (%d of %d within it)",
			p99, v.MaxScheduleLag, s.lagWithin, s.lagTotal)
	}
	if clientCPU >= 0 && !v.MaxClientCPU.IsZero() {
		// clientCPU > limit, compared at 0.01% resolution.
		if v.MaxClientCPU.CmpRatio(uint64(clientCPU*10000+0.5), 10000) > 0 {
			add("client_bottleneck", "the load generator used %s of its CPU, above %s", percent(clientCPU), v.MaxClientCPU)
		}
	}
	return out
}

// Valid says whether problems leave the run valid, and why not.
func Valid(problems []Problem) (bool, []string) {
	var reasons []string
	for _, p := range problems {
		if p.Check == "no_data" {
			continue // an objective's, not the run's
		}
		reasons = append(reasons, p.String())
	}
	return len(reasons) == 0, reasons
}
