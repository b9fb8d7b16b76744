package slo

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// Kind is the shape of an objective.
type Kind string

// The kinds of objective.
const (
	KindLatency Kind = "latency" // fraction of events ≤ threshold ≥ target
	KindRatio   Kind = "ratio"   // bad / all ≤ threshold
	KindFloor   Kind = "floor"   // per second over the window ≥ threshold
	KindManual  Kind = "manual"  // a person's pass or fail of a manual stage
)

// Metric names an objective's measurement. Latency names are the rows of
// loadgen's metric table (measure.LatencyMetrics), the keys of latency_ms in
// summary.json: a new row there is a new objective metric here.
type Metric string

// The metrics an objective can judge.
const (
	TTFT        Metric = measure.MetricTTFT
	TTFAT       Metric = measure.MetricTTFAT
	ICL         Metric = measure.MetricICL
	ITL         Metric = measure.MetricITL
	TPOT        Metric = measure.MetricTPOT
	E2E         Metric = measure.MetricE2E
	ScheduleLag Metric = measure.MetricScheduleLag
	// QueueDelay comes from server telemetry, not from records.
	QueueDelay Metric = "queue_delay"

	// The floor and ratio metrics are the rows of loadgen's rate table
	// (measure.RateMetrics): a new row there is a new objective metric here.
	ErrorRate Metric = measure.MetricErrorRate

	OutputTokensPerS Metric = measure.MetricOutputTokensPerS
	InputTokensPerS  Metric = measure.MetricInputTokensPerS
	RequestsPerS     Metric = measure.MetricRequestsPerS
	GoodputPerS      Metric = measure.MetricGoodputPerS

	// SessionDuration and SessionSuccess judge agent sessions whole, one
	// event per session (a session's records rolled up by
	// loadgen.SessionRoller): session_duration is a latency objective over the sessions that ran
	// their course (first call's intended start to last call's end),
	// session_success a ratio of failed sessions, as error_rate is of
	// failed requests.
	SessionDuration Metric = "session_duration"
	SessionSuccess  Metric = measure.MetricSessionSuccess

	ManualResult Metric = "manual"
)

// PerSession reports whether m is judged per session, not per request.
func (m Metric) PerSession() bool {
	if r := measure.FindRateIn(builtin.Rates, string(m)); r != nil {
		return r.PerSession
	}
	return m == SessionDuration
}

// Turns a call-level objective may select (Objective.Turn).
const (
	TurnFirst = "first" // the first call of a session (turn 0)
	TurnLater = "later" // every later call of a session
)

// Kind is the metric's objective kind ("" for an unknown metric).
func (m Metric) Kind() Kind { return builtin.kind(m) }

// Objective is one line of an SLO: a metric, a threshold and (latency) a
// target fraction, optionally for one prompt class.
type Objective struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Metric      Metric `json:"metric"`
	Class       string `json:"class,omitempty"` // "" = every class
	// Turn selects session calls by turn: TurnFirst, TurnLater, or ""
	// for every request. Requests of no session match neither turn.
	Turn string `json:"turn,omitempty"`
	// Threshold is the latency bound (latency kind): an event meets it when
	// its value is ≤ Threshold.
	Threshold time.Duration `json:"-"`
	// Target is the fraction of events that must meet Threshold (latency).
	Target Decimal `json:"target,omitzero"`
	// Limit is the ratio's maximum (ratio kind, ≤) or the rate's minimum per
	// second (floor kind, ≥).
	Limit Decimal `json:"limit,omitzero"`
	// ShareOfOffered judges a floor as a share of the offered load: Limit
	// is the fraction of offered requests that must complete
	// (requests_per_s) or be good (goodput_per_s), so the floor scales
	// with the load instead of asking a fixed rate of any load.
	ShareOfOffered bool `json:"share_of_offered,omitempty"`
	// ErrorKinds restricts error_rate to these kinds; empty counts them all.
	ErrorKinds []loadgen.ErrorKind `json:"error_kinds,omitempty"`
	// Constraints overrides the spec's goodput constraints (goodput_per_s).
	Constraints *Constraints `json:"constraints,omitempty"`
	// Runbook is the URL an alert on this objective links to; "" means the
	// spec's Runbook (see RunbookURL).
	Runbook string `json:"runbook,omitempty"`
	Line    int    `json:"-"`
	// The metric's kind and rows in the tables the objective was read by
	// (resolve); unset in an objective built in code, which the built-in
	// tables resolve.
	kind Kind
	lat  *measure.LatencyMetric
	rate *measure.RateMetric
}

// Kind is the objective's kind.
func (o *Objective) Kind() Kind {
	k, _, _ := o.rows()
	return k
}

// RunbookURL is the runbook an alert on o links to: its own, else the
// spec's, else "".
func (s *Spec) RunbookURL(o *Objective) string {
	if o.Runbook != "" {
		return o.Runbook
	}
	return s.Runbook
}

// ErrorBudget is the fraction of events allowed to be bad: 1 − target for
// latency objectives, the threshold for error_rate; ok is false for floors.
func (o *Objective) ErrorBudget() (budget float64, ok bool) {
	switch o.Kind() {
	case KindLatency:
		// 1 − target taken in decimals, then rounded once: 99% gives
		// exactly 0.01, where 1 − 0.99 in floats gives 0.010000000000000009.
		return o.Target.complement(), true
	case KindRatio:
		return o.Limit.Float(), true
	}
	return 0, false
}

// Constraints are per-request goodput constraints: a request is good when it
// completed and every set bound holds (value ≤ bound, microsecond
// resolution). A zero field sets no bound. A request with no token fails a
// TTFT bound, one with no answer token a TTFAT bound; TPOT is not defined
// below two output tokens and then does not count against the request (as
// vLLM records TPOT 0 there); an answer of two or more tokens that came as
// one body (unstreamed) has no TPOT to show and fails a TPOT bound.
type Constraints struct {
	TTFT  time.Duration `json:"-"`
	TTFAT time.Duration `json:"-"`
	TPOT  time.Duration `json:"-"`
	E2E   time.Duration `json:"-"`
}

// IsZero reports whether no bound is set.
func (c Constraints) IsZero() bool { return c == Constraints{} }

// Met reports whether r completed and met every bound (values from the
// metric table).
func (c Constraints) Met(r *loadgen.Record) bool {
	good, _ := c.judge(r)
	return good
}

// judge is Met, and whether r could be judged at all: an answer of two or
// more tokens that came as one body has no TPOT to hold against a TPOT
// bound (not good, and the goodput verdict counts it apart).
func (c Constraints) judge(r *loadgen.Record) (good, judged bool) {
	if !r.OK() {
		return false, true
	}
	// A fixed array, not bounds(): judge runs once per record and must
	// not allocate (TestJudgeAddAllocatesNothing).
	var arr [maxGoodputBounds]constraintBound
	bs := c.appendBounds(arr[:0])
	for _, b := range bs {
		if b.m.Streamed && r.Unstreamed && r.OutputTokens >= 2 {
			return false, false
		}
	}
	for _, b := range bs {
		if v, ok := b.m.Of(r); (!ok && !b.m.GoodputUndefinedMeets) || (ok && v > b.d) {
			return false, true
		}
	}
	return true, true
}

// goodputMetrics are the metric table's rows that may bound a goodput
// constraint, in table order: the keys of `goodput:`.
var goodputMetrics = measure.GoodputMetrics(measure.LatencyMetrics())

// field is the bound of c on a goodput metric (nil: not one).
func (c *Constraints) field(metric string) *time.Duration {
	switch metric {
	case measure.MetricTTFT:
		return &c.TTFT
	case measure.MetricTTFAT:
		return &c.TTFAT
	case measure.MetricTPOT:
		return &c.TPOT
	case measure.MetricE2E:
		return &c.E2E
	}
	return nil
}

// constraintBound is one set bound of Constraints.
type constraintBound struct {
	m *measure.LatencyMetric
	d time.Duration
}

// maxGoodputBounds is the number of Constraints fields: bounds never
// holds more.
const maxGoodputBounds = 4

// goodputRows are the rows of goodputMetrics, looked up once.
var goodputRows = func() []*measure.LatencyMetric {
	out := make([]*measure.LatencyMetric, len(goodputMetrics))
	for i, n := range goodputMetrics {
		out[i] = measure.FindLatencyMetric(n)
	}
	return out
}()

// bounds are c's set bounds, in table order.
func (c Constraints) bounds() []constraintBound { return c.appendBounds(nil) }

// appendBounds appends c's set bounds to out, in table order.
func (c Constraints) appendBounds(out []constraintBound) []constraintBound {
	for _, m := range goodputRows {
		if d := c.bound(m.Name); d > 0 {
			out = append(out, constraintBound{m, d})
		}
	}
	return out
}

// bound is c's bound on a goodput metric (0: unset or not one).
func (c Constraints) bound(metric string) time.Duration {
	if f := c.field(metric); f != nil {
		return *f
	}
	return 0
}

// String lists the bounds: "ttft ≤ 500ms, tpot ≤ 50ms".
func (c Constraints) String() string {
	var s []string
	for _, b := range c.bounds() {
		s = append(s, b.m.Name+" ≤ "+b.d.String())
	}
	return strings.Join(s, ", ")
}

// MarshalJSON writes the bounds in milliseconds.
func (c Constraints) MarshalJSON() ([]byte, error) {
	var parts []string
	for _, b := range c.bounds() {
		parts = append(parts, fmt.Sprintf("%q:%g", b.m.Name+"_ms", ms(b.d)))
	}
	return []byte("{" + strings.Join(parts, ",") + "}"), nil
}

// Spec is an SLO file (kind: SLO).
type Spec struct {
	Name        string
	Owner       string
	Description string
	// Runbook is the URL that burn-rate alerts link to (an objective may
	// name its own); operate-phase only, acceptance ignores it.
	Runbook string
	// Window is the SLO window of the operate phase (default 30 days).
	Window time.Duration
	// Goodput are the per-request constraints goodput_per_s counts against.
	Goodput    Constraints
	Objectives []Objective
	Waivers    []Waiver
	// Confidence is the confidence latency and error-rate verdicts are
	// decided at (`confidence:`; 0: DefaultConfidence). See confidence.go.
	Confidence float64
	// File is the path the spec was read from.
	File string
	// Warnings are things allowed but probably unintended.
	Warnings []string
}

// DefaultWindow is the SLO window when the file gives none.
const DefaultWindow = 30 * 24 * time.Hour

// Objective returns the objective named name.
func (s *Spec) Objective(name string) (*Objective, bool) {
	for i := range s.Objectives {
		if s.Objectives[i].Name == name {
			return &s.Objectives[i], true
		}
	}
	return nil, false
}

// GoodputFunc returns a function telling whether a record met the spec's
// goodput constraints, for measure.Metrics.Goodput; nil when there are none.
func (s *Spec) GoodputFunc() measure.GoodputJudge {
	if s.Goodput.IsZero() {
		return nil
	}
	return s.Goodput.judge
}

// LoadSpec reads and parses an SLO file.
func LoadSpec(path string) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSpec(path, data)
}

// ParseSpec parses an SLO file's bytes; file names it in errors. The error,
// if any, is an Errors listing every problem with its line and field.
func ParseSpec(file string, data []byte) (*Spec, error) {
	return ParseSpecIn(builtin, file, data)
}

// ParseSpecIn is ParseSpec with the metric tables objectives are read by:
// a test's tables with a made-up row make it an objective metric of this
// spec alone, judged by its rows.
func ParseSpecIn(t Tables, file string, data []byte) (*Spec, error) {
	doc, root := yamlwalk.Parse(file, data)
	s := reader{doc: doc, tables: &t}.spec(root)
	if err := doc.Err(); err != nil {
		return nil, err
	}
	return s, nil
}

const apiVersion = "tailgate/v1"

// top reads the document's mapping and its kind and apiVersion; ok is
// false when the document is not a mapping.
func (r reader) top(root yamlwalk.Node, kind string, fields ...string) (m yamlwalk.Map, ok bool) {
	if !root.Valid() {
		return m, false
	}
	m, _ = root.Map(append([]string{"apiVersion", "kind"}, fields...)...)
	if !root.IsMap() {
		return m, false
	}
	if n, ok := m.Require("kind"); ok {
		if k, ok := n.Text(); ok && k != kind {
			n.Errorf("%q: want %s", k, kind)
		}
	}
	if n, ok := m.Get("apiVersion"); ok {
		if v, ok := n.Text(); ok && v != apiVersion {
			n.Errorf("%q: want %s", v, apiVersion)
		}
	}
	return m, true
}

// items reads the list under key, which must hold at least one item.
func items(m yamlwalk.Map, key, empty string) []yamlwalk.Node {
	n, ok := m.Require(key)
	if !ok {
		return nil
	}
	list, ok := n.List()
	if ok && len(list) == 0 {
		m.Errorf(key, "empty: %s", empty)
	}
	return list
}

// duplicateName records that item, of the list under key, repeats the
// name of item first.
func (r reader) duplicateName(item yamlwalk.Node, key, name string, first int) {
	p := item.Pos()
	p.Field = yamlwalk.Join(p.Field, "name")
	r.doc.Add(p.Errorf("%q is already the name of %s", name, yamlwalk.Index(key, first)))
}

func (r reader) spec(root yamlwalk.Node) *Spec {
	f, ok := r.top(root, "SLO", "name", "owner", "description", "window", "runbook", "confidence", "goodput", "objectives", "waivers")
	if !ok {
		return nil
	}
	s := &Spec{File: r.doc.File(), Window: DefaultWindow}
	s.Name = required(f, "name", name)
	s.Owner = required(f, "owner", text)
	s.Description = optional(f, "description", text)
	s.Runbook = optional(f, "runbook", runbook)
	if n, ok := f.Get("window"); ok {
		if w, ok := n.Duration(); ok {
			if w < time.Hour {
				n.Errorf("%s is shorter than an hour: an SLO window is days or weeks", w)
			}
			s.Window = w
		}
	}
	if n, ok := f.Get("confidence"); ok {
		if d, ok := decimal(n); ok {
			c := d.Float()
			if c < MinConfidence || c > MaxConfidence {
				n.Errorf("%s is outside %g–%g: the confidence a verdict is decided at (95%% is usual)", d, MinConfidence, MaxConfidence)
			}
			s.Confidence = c
		}
	}
	if n, ok := f.Get("goodput"); ok {
		s.Goodput = r.constraints(n)
	}
	seen := map[string]int{}
	for i, n := range items(f, "objectives", "an SLO needs at least one objective") {
		o, ok := r.objective(n, s)
		if !ok {
			continue
		}
		if first, dup := seen[o.Name]; dup {
			r.duplicateName(n, "objectives", o.Name, first)
			continue
		}
		seen[o.Name] = i
		s.Objectives = append(s.Objectives, o)
	}
	s.Waivers = r.waivers(f)
	for i, w := range s.Waivers {
		if w.Objective != "" && w.Objective != string(ManualResult) {
			if _, ok := seen[w.Objective]; !ok {
				r.doc.Add(yamlwalk.Errorf(s.File, w.objectiveLine, yamlwalk.Index("waivers", i)+".objective",
					"%q is not an objective of this SLO", w.Objective))
			}
		}
	}
	hasLatency, hasErrors := false, false
	for _, o := range s.Objectives {
		hasLatency = hasLatency || o.Kind() == KindLatency
		hasErrors = hasErrors || (o.rate != nil && o.rate.ErrorKinds)
	}
	if hasLatency && !hasErrors {
		s.Warnings = append(s.Warnings, fmt.Sprintf("%s: no error_rate objective: latency objectives count "+
			"successful requests only, so failed requests would go unjudged", s.File))
	}
	return s
}

func (r reader) objective(n yamlwalk.Node, s *Spec) (Objective, bool) {
	start := r.doc.Count()
	f, _ := n.Map("name", "description", "metric", "class", "turn", "threshold", "target", "error_kinds", "constraints", "runbook", "share_of_offered")
	o := Objective{Line: n.Line()}
	if !n.IsMap() {
		return o, false
	}
	o.Name = required(f, "name", name)
	o.Description = optional(f, "description", text)
	o.Runbook = optional(f, "runbook", runbook)
	o.Class = optional(f, "class", name)
	mv, ok := f.Require("metric")
	if !ok {
		return o, false
	}
	metric, ok := mv.Text()
	if !ok {
		return o, false
	}
	o.Metric = Metric(metric)
	tables := r.tables
	if tables == nil {
		tables = &builtin
	}
	o.resolve(tables)
	kind := o.kind
	if kind == "" || kind == KindManual {
		mv.Errorf("%q is not a metric (known: %s)", metric, tables.list())
		return o, false
	}
	rate := o.rate // nil: not a floor or ratio
	if v, ok := f.Require("threshold"); ok {
		switch kind {
		case KindLatency:
			if t, ok := v.Duration(); ok {
				if t == 0 {
					v.Errorf("must be > 0")
				}
				o.Threshold = t
			}
		case KindRatio:
			if l, ok := decimal(v); ok {
				if l.CmpRatio(1, 1) < 0 {
					v.Errorf("%s is above 1 (100%%): a ratio is at most 1", l)
				}
				o.Limit = l
			}
		case KindFloor:
			o.Limit, _ = decimal(v)
		}
	}
	if v, ok := f.Get("share_of_offered"); ok {
		if b, ok := v.Bool(); ok && b {
			switch {
			case rate == nil || !rate.ShareOfOffered:
				// A request's max_tokens is a ceiling, not a demand: no
				// offered count of tokens exists to take a share of.
				v.Errorf("only %s floors take a share of the offered requests, not %s",
					strings.Join(measure.RatesWhere(tables.Rates, func(m *measure.RateMetric) bool { return m.ShareOfOffered }), " and "), o.Metric)
			case o.Limit.IsZero() || o.Limit.CmpRatio(1, 1) < 0:
				if th, ok := f.Get("threshold"); ok {
					th.Errorf("%s is not a fraction in (0, 1]: with share_of_offered the threshold is the share of offered requests (0.95 or 95%%)", o.Limit)
				}
			default:
				o.ShareOfOffered = true
			}
		}
	}
	if kind == KindLatency {
		if v, ok := f.Require("target"); ok {
			if t, ok := decimal(v); ok {
				if t.IsZero() || t.CmpRatio(1, 1) < 0 {
					v.Errorf("%s is not a fraction in (0, 1]: write 0.99 or 99%%", t)
				}
				o.Target = t
			}
		}
	} else if f.Has("target") {
		f.Errorf("target", "only latency objectives have a target fraction; %s takes its bound in threshold", o.Metric)
	}
	if v, ok := f.Get("error_kinds"); ok {
		if rate == nil || !rate.ErrorKinds {
			f.Errorf("error_kinds", "only %s objectives take error_kinds",
				strings.Join(measure.RatesWhere(tables.Rates, func(m *measure.RateMetric) bool { return m.ErrorKinds }), ", "))
		}
		for _, k := range names(v) {
			kind, ok := loadgen.ParseErrorKind(k.Yaml().Value)
			if !ok {
				k.Errorf("%q is not an error kind (known: %s)", k.Yaml().Value, errorKindList())
				continue
			}
			o.ErrorKinds = append(o.ErrorKinds, kind)
		}
	}
	if v, ok := f.Get("constraints"); ok {
		if rate == nil || !rate.Goodput {
			f.Errorf("constraints", "only %s objectives take constraints",
				strings.Join(measure.RatesWhere(tables.Rates, func(m *measure.RateMetric) bool { return m.Goodput }), ", "))
		}
		c := r.constraints(v)
		o.Constraints = &c
	}
	if rate != nil && rate.Goodput && o.Constraints == nil && s.Goodput.IsZero() {
		f.Errorf("metric", "%s needs goodput constraints: "+
			"give top-level goodput: {ttft: 500ms, tpot: 50ms} or this objective's constraints", o.Metric)
	}
	if o.Metric == QueueDelay && o.Class != "" {
		f.Errorf("class", "queue_delay comes from server telemetry, which has no prompt classes")
	}
	if o.perSession() && o.Class != "" {
		f.Errorf("class", "%s judges whole sessions, whose calls may be of several classes: "+
			"judge a class's calls with a call-level objective (ttft, e2e, error_rate) and class", o.Metric)
	}
	if v, ok := f.Get("turn"); ok {
		if t, ok := v.Text(); ok {
			switch {
			case t != TurnFirst && t != TurnLater:
				v.Errorf("%q is not a turn (known: %s, %s)", t, TurnFirst, TurnLater)
			case o.perSession() || !o.HasRecordEvents():
				v.Errorf("only call-level objectives judged from records take a turn (ttft, e2e, itl, error_rate, …), not %s", o.Metric)
			default:
				o.Turn = t
			}
		}
	}
	return o, r.clean(start)
}

func errorKindList() string {
	s := make([]string, len(loadgen.ErrorKinds))
	for i, e := range loadgen.ErrorKinds {
		s[i] = string(e)
	}
	return strings.Join(s, ", ")
}

func (r reader) constraints(n yamlwalk.Node) Constraints {
	start := r.doc.Count()
	f, _ := n.Map(goodputMetrics...)
	var c Constraints
	for _, key := range goodputMetrics {
		if v, ok := f.Get(key); ok {
			if d, ok := v.Duration(); ok {
				if d == 0 {
					f.Errorf(key, "must be > 0")
				}
				*c.field(key) = d
			}
		}
	}
	if c.IsZero() && n.IsMap() && r.clean(start) {
		n.Errorf("no constraint given (%s)", strings.Join(goodputMetrics, ", "))
	}
	return c
}
