package rules

import (
	"bytes"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/slo"
)

// EventsMetric is the canary's SLI counter (the metric contract in
// docs/metrics.md): one series per slo, objective, target and outcome (good, bad).
const EventsMetric = "tailgate_slo_events_total"

// Label names, Sloth's (internal/prometheus/conventions.go).
const (
	labelID       = "sloth_id"
	labelService  = "sloth_service"
	labelSLO      = "sloth_slo"
	labelWindow   = "sloth_window"
	labelSeverity = "sloth_severity"
)

// Metadata recording rules, Sloth's names.
const (
	RecordObjective       = "slo:objective:ratio"
	RecordErrorBudget     = "slo:error_budget:ratio"
	RecordTimePeriod      = "slo:time_period:days"
	RecordCurrentBurnRate = "slo:current_burn_rate:ratio"
	RecordPeriodBurnRate  = "slo:period_burn_rate:ratio"
	RecordPeriodRemaining = "slo:period_error_budget_remaining:ratio"
	RecordInfo            = "sloth_slo_info"
)

// SLIRecord is the name of the error-ratio recording rule for a window:
// slo:sli_error:ratio_rate5m.
func SLIRecord(window time.Duration) string { return "slo:sli_error:ratio_rate" + PromDuration(window) }

// PromDuration writes d the way Prometheus (and so Sloth) does: 5m, 1d,
// 30d, 4w.
func PromDuration(d time.Duration) string { return model.Duration(d).String() }

// Days writes a window for people: 28d rather than Prometheus' 4w.
func Days(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	return PromDuration(d)
}

// File is a Prometheus rule file.
type File struct {
	Groups []Group `yaml:"groups"`
}

// Group is a rule group.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is a recording rule (Record) or an alerting rule (Alert).
type Rule struct {
	Record      string            `yaml:"record,omitempty"`
	Alert       string            `yaml:"alert,omitempty"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Options tune Generate.
type Options struct {
	// Version is tailgate's version, written in sloth_slo_info and the
	// file's header.
	Version string
	// Selector holds extra label matchers that every tailgate series the
	// rules read must carry, as PromQL writes them: `job="tailgate-canary"`
	// keeps pushed runs (job "tailgate" on the Pushgateway, one run's
	// totals at a time, which rate() cannot read) out of the canary's SLI.
	Selector string
	// NoCanaryAlerts leaves out the canary's own alerts (canary down,
	// reload failed, no recent success): for a second SLO file of a canary
	// whose rules another file already carries.
	NoCanaryAlerts bool
	// CanaryDownFor is how long the canary's series must be gone before it
	// pages; 0 means 2m.
	CanaryDownFor time.Duration
}

// Skipped is an objective that gets no rules, and why.
type Skipped struct {
	Objective string
	Metric    slo.Metric
	Reason    string
}

func (s Skipped) String() string {
	return fmt.Sprintf("objective %s (%s): %s", s.Objective, s.Metric, s.Reason)
}

// SLO is one objective resolved for operate: Sloth's unit of generation.
type SLO struct {
	ID, Service, Name string
	Objective         *slo.Objective
	// ObjectiveRatio and ErrorBudget are exact decimals as PromQL number
	// literals ("0.99", "0.01"), from the file's decimals, not floats.
	ObjectiveRatio, ErrorBudget string
	// ObjectivePercent is ObjectiveRatio × 100 ("99"): Sloth's objective.
	ObjectivePercent string
	Window           time.Duration
	Alerts           []slo.BurnRateAlert
	Owner, Runbook   string
	// AlertName is the one name of its page and ticket alerts.
	AlertName string
	// matchers are Options.Selector's, written out (", job=\"x\"" or "").
	matchers string
}

// Result is what Generate made.
type Result struct {
	Spec    *slo.Spec
	SLOs    []SLO
	Skipped []Skipped
	// Warnings are objectives whose alerts can never fire, and why.
	Warnings []string
	File     File
	version  string
	opts     Options
}

// tiersTable are the alert tiers every SLO gets: Sloth's google windows.
var tiersTable = slo.SlothTiers()

// Generate makes the rules for every objective of spec that the canary
// counts as good/bad events. It fails when none does, or when the SLO
// window is not longer than the longest alert window.
func Generate(spec *slo.Spec, opts Options) (*Result, error) {
	ws := slo.TierWindows(tiersTable)
	longest := ws[len(ws)-1]
	if spec.Window <= longest {
		return nil, fmt.Errorf("%s: window %s: burn-rate alerts need an SLO window longer than their longest window (%s)",
			spec.File, PromDuration(spec.Window), PromDuration(longest))
	}
	ms, err := ParseSelector(opts.Selector)
	if err != nil {
		return nil, err
	}
	if opts.CanaryDownFor <= 0 {
		opts.CanaryDownFor = 2 * time.Minute
	}
	r := &Result{Spec: spec, version: opts.Version, opts: opts}
	for i := range spec.Objectives {
		o := &spec.Objectives[i]
		s, reason := resolve(spec, o)
		if reason != "" {
			r.Skipped = append(r.Skipped, Skipped{Objective: o.Name, Metric: o.Metric, Reason: reason})
			continue
		}
		s.matchers = ms
		r.Warnings = append(r.Warnings, s.unreachable()...)
		r.SLOs = append(r.SLOs, s)
		r.File.Groups = append(r.File.Groups, sliGroup(s), metaGroup(s, opts.Version), alertGroup(s))
	}
	if len(r.SLOs) == 0 {
		return r, fmt.Errorf("%s: no objective is counted as good/bad events in operate, so there is nothing to alert on", spec.File)
	}
	if !opts.NoCanaryAlerts {
		r.File.Groups = append(r.File.Groups, canaryGroup(spec, ms, opts.CanaryDownFor))
	}
	return r, nil
}

// resolve makes o an SLO, or says why it cannot be one.
func resolve(spec *slo.Spec, o *slo.Objective) (SLO, string) {
	s := SLO{Service: spec.Name, Name: o.Name, ID: spec.Name + "-" + o.Name, Objective: o,
		Window: spec.Window, Owner: spec.Owner, Runbook: spec.RunbookURL(o)}
	var num uint64
	var scale int
	switch {
	case o.Metric == slo.QueueDelay:
		return s, "queue_delay comes from the server's histogram, not from probes: no good/bad events in operate; acceptance judges it"
	case o.Metric.PerSession():
		return s, "a session objective judges whole agent sessions, and a canary's probes are single requests; acceptance judges it"
	case o.Kind() == slo.KindFloor:
		return s, "a floor (work per second over a window) has no per-event outcome in operate; acceptance judges it"
	case o.Kind() == slo.KindLatency:
		num, scale = o.Target.Num, int(o.Target.Scale)
		s.ObjectiveRatio = decimal(num, scale)
		s.ErrorBudget = decimal(pow10(scale)-num, scale)
		s.ObjectivePercent = decimal(num, scale-2)
	case o.Kind() == slo.KindRatio:
		budget, bscale := o.Limit.Num, int(o.Limit.Scale)
		num, scale = pow10(bscale)-budget, bscale
		s.ObjectiveRatio = decimal(num, scale)
		s.ErrorBudget = decimal(budget, bscale)
		s.ObjectivePercent = decimal(num, scale-2)
	default:
		return s, fmt.Sprintf("%s objectives have no SLI in operate", o.Kind())
	}
	if num == pow10(scale) {
		return s, "a 100% objective has no error budget to burn: every bad event breaks it, so alert on the event itself"
	}
	budget, _ := o.ErrorBudget()
	s.Alerts = slo.Alerts(spec.Window, budget, tiersTable)
	s.AlertName = alertName(spec.Name, o.Name)
	return s, ""
}

func pow10(n int) uint64 {
	p := uint64(1)
	for ; n > 0; n-- {
		p *= 10
	}
	return p
}

// decimal writes num / 10^scale in positional notation (scale may be
// negative: num × 10^-scale).
func decimal(num uint64, scale int) string {
	s := strconv.FormatUint(num, 10)
	if scale <= 0 {
		if num == 0 {
			return "0"
		}
		return s + strings.Repeat("0", -scale)
	}
	if len(s) <= scale {
		s = strings.Repeat("0", scale-len(s)+1) + s
	}
	i, f := s[:len(s)-scale], strings.TrimRight(s[len(s)-scale:], "0")
	if f == "" {
		return i
	}
	return i + "." + f
}

// alertName is "ChatTtftP99ErrorBudgetBurn": a valid alert name (letters
// and digits) that says which SLO and objective.
func alertName(service, objective string) string {
	var b strings.Builder
	for _, part := range []string{service, objective} {
		up := true
		for _, c := range part {
			if !unicode.IsLetter(c) && !unicode.IsDigit(c) || c > unicode.MaxASCII {
				up = true
				continue
			}
			if up {
				c = unicode.ToUpper(c)
				up = false
			}
			b.WriteRune(c)
		}
	}
	n := b.String() + "ErrorBudgetBurn"
	if n[0] >= '0' && n[0] <= '9' {
		n = "SLO" + n
	}
	return n
}

// idLabels are the labels naming the SLO, Sloth's GetSLOIDPromLabels.
func (s SLO) idLabels() map[string]string {
	return map[string]string{labelID: s.ID, labelService: s.Service, labelSLO: s.Name}
}

// filter is idLabels as a selector: {sloth_id="…", sloth_service="…",
// sloth_slo="…"} (Sloth's labelsToPromFilter).
func (s SLO) filter() string {
	return selector(s.idLabels(), ", ")
}

func selector(labels map[string]string, sep string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + strconv.Quote(labels[k])
	}
	return "{" + strings.Join(parts, sep) + "}"
}

func merge(ms ...map[string]string) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// events selects the objective's event counters with an outcome matcher.
func (s SLO) events(outcome string) string {
	return EventsMetric + "{slo=" + strconv.Quote(s.Service) + ",objective=" + strconv.Quote(s.Name) + "," + outcome + s.matchers + "}"
}

// TotalQuery is the rate of all events per target over window (a PromQL
// duration, or Sloth's "{{.window}}").
func (s SLO) TotalQuery(window string) string {
	return "sum by (target) (rate(" + s.events(`outcome=~"good|bad"`) + "[" + window + "]))"
}

// ErrorQuery is the rate of bad events per target over window; a target
// with no bad series yet reads 0 rather than nothing.
func (s SLO) ErrorQuery(window string) string {
	return "sum by (target) (rate(" + s.events(`outcome="bad"`) + "[" + window + "])) or 0 * " + s.TotalQuery(window)
}

// windows are the alert windows, shortest first, without repeats.
func (s SLO) windows() []time.Duration {
	tiers := make([]slo.BurnRateTier, len(s.Alerts))
	for i, a := range s.Alerts {
		tiers[i] = a.BurnRateTier
	}
	return slo.TierWindows(tiers)
}

// shortest is the page tier's short window (Sloth's PageQuick.ShortWindow):
// the current burn rate and the SLO-window average use it.
func (s SLO) shortest() time.Duration { return s.windows()[0] }

func sliGroup(s SLO) Group {
	g := Group{Name: "sloth-slo-sli-recordings-" + s.ID}
	for _, w := range s.windows() {
		pw := PromDuration(w)
		g.Rules = append(g.Rules, Rule{
			Record: SLIRecord(w),
			Expr:   fmt.Sprintf("(%s)\n/\n(%s)\n", s.ErrorQuery(pw), s.TotalQuery(pw)),
			Labels: merge(s.idLabels(), map[string]string{labelWindow: pw}),
		})
	}
	// The SLO window: the average of the shortest window's ratios over it
	// (Sloth's optimised rule). Its labels name the SLO, as newer Sloth
	// releases write them: with sloth_window alone, two objectives' rules
	// in one file are duplicates to promtool.
	short, pw := SLIRecord(s.shortest())+s.filter(), PromDuration(s.Window)
	g.Rules = append(g.Rules, Rule{
		Record: SLIRecord(s.Window),
		Expr: fmt.Sprintf("sum_over_time(%s[%s])\n/ ignoring (%s)\ncount_over_time(%s[%s])\n",
			short, pw, labelWindow, short, pw),
		Labels: merge(s.idLabels(), map[string]string{labelWindow: pw}),
	})
	return g
}

func metaGroup(s SLO, version string) Group {
	labels := s.idLabels()
	burn := func(sli string) string {
		return fmt.Sprintf("%s%s\n/ on(%s, %s, %s) group_left\n%s%s\n",
			sli, s.filter(), labelID, labelSLO, labelService, RecordErrorBudget, s.filter())
	}
	return Group{Name: "sloth-slo-meta-recordings-" + s.ID, Rules: []Rule{
		{Record: RecordObjective, Expr: "vector(" + s.ObjectiveRatio + ")", Labels: labels},
		{Record: RecordErrorBudget, Expr: "vector(" + s.ErrorBudget + ")", Labels: labels},
		{Record: RecordTimePeriod, Expr: "vector(" + strconv.FormatFloat(s.Window.Hours()/24, 'g', -1, 64) + ")", Labels: labels},
		{Record: RecordCurrentBurnRate, Expr: burn(SLIRecord(s.shortest())), Labels: labels},
		{Record: RecordPeriodBurnRate, Expr: burn(SLIRecord(s.Window)), Labels: labels},
		{Record: RecordPeriodRemaining, Expr: "1 - " + RecordPeriodBurnRate + s.filter(), Labels: labels},
		{Record: RecordInfo, Expr: "vector(1)", Labels: merge(labels, map[string]string{
			"sloth_mode": "cli-gen-prom", "sloth_spec": "tailgate/v1", "sloth_version": version,
			"sloth_objective": s.ObjectivePercent,
		})},
	}}
}

// Describe says what the objective promises: "ttft ≤ 500ms for 99% of
// requests".
func Describe(o *slo.Objective) string {
	var d string
	switch o.Kind() {
	case slo.KindLatency:
		of := "requests"
		switch o.Metric {
		case slo.ITL:
			of = "output tokens"
		case slo.ICL:
			of = "chunk gaps"
		}
		d = fmt.Sprintf("%s ≤ %s for %s of %s", o.Metric, o.Threshold, o.Target, of)
	case slo.KindRatio:
		d = fmt.Sprintf("%s ≤ %s", o.Metric, o.Limit)
		if len(o.ErrorKinds) > 0 {
			ks := make([]string, len(o.ErrorKinds))
			for i, k := range o.ErrorKinds {
				ks[i] = string(k)
			}
			d += " (" + strings.Join(ks, ", ") + ")"
		}
	default:
		d = fmt.Sprintf("%s ≥ %s", o.Metric, o.Limit)
	}
	if o.Class != "" {
		d += ", class " + o.Class
	}
	return d
}

// severities are the alerts, in Sloth's order, each with its two tiers.
func (s SLO) severities() [][]slo.BurnRateAlert {
	var out [][]slo.BurnRateAlert
	for _, sev := range []string{"page", "ticket"} {
		var tiers []slo.BurnRateAlert
		for _, a := range s.Alerts {
			if a.Severity == sev {
				tiers = append(tiers, a)
			}
		}
		out = append(out, tiers)
	}
	return out
}

func num(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// condition is Sloth's multiwindow, multi-burn-rate template (v0.16's
// alert_rules.go): each tier's short and long windows both over factor ×
// budget, the tiers or-ed, sloth_window dropped so the alert's labels name
// the SLO and target only. Two additions, both per target:
//
//   - early life: a ticket tier fires only once the canary has reported
//     for its whole short window (its good series existed that long ago).
//     A long window of a few minutes' data is no long window: without this,
//     a fresh canary's first errors ticket at once (the 1d "window" is two
//     minutes). Page tiers are not held back: a target that is down now
//     pages now.
//   - no false all-clear: once the alert fires it stays firing while the
//     canary's series for the target are gone (canary dead, not scraped):
//     without data the ratios would lapse after their window and the alert
//     would "resolve" on no evidence. When the canary reports again, the
//     burn rates decide. The canary-down alert says why it holds.
func (s SLO) condition(severity string, tiers []slo.BurnRateAlert) string {
	var parts []string
	for _, t := range tiers {
		thr := fmt.Sprintf("(%s * %s)", num(t.Factor), s.ErrorBudget)
		p := fmt.Sprintf("(\n    max(%s%s > %s) without (%s)\n    and\n    max(%s%s > %s) without (%s)\n)",
			SLIRecord(t.Short), s.filter(), thr, labelWindow, SLIRecord(t.Long), s.filter(), thr, labelWindow)
		if severity != "page" {
			p = fmt.Sprintf("(\n  %s\n  and on (target)\n  group by (target) (%s offset %s)\n)",
				strings.ReplaceAll(p, "\n", "\n  "), s.events(`outcome=~"good|bad"`), PromDuration(t.Short))
		}
		parts = append(parts, p)
	}
	held := fmt.Sprintf("(\n  max by (%s, %s, %s, target) (ALERTS{alertname=%q, alertstate=\"firing\", %s=%q, %s=%q})\n  unless on (target)\n  group by (target) (%s)\n)",
		labelID, labelService, labelSLO, s.AlertName, labelSeverity, severity, labelID, s.ID, s.events(`outcome=~"good|bad"`))
	return strings.Join(parts, "\nor\n") + "\nor on (target)\n" + held + "\n"
}

// SLIKind is the routing label tailgate_sli of an objective's alerts:
// availability for error-rate objectives, latency for the rest. A failed
// probe is a bad event for every objective, so when availability pages,
// Alertmanager's inhibition (Result.Alertmanager) mutes the latency alerts
// of the same target: one outage, one page.
func (s SLO) SLIKind() string {
	if s.Objective.Kind() == slo.KindRatio {
		return "availability"
	}
	return "latency"
}

// RoutingLabels are the labels Alertmanager routes and inhibits on, beside
// severity: owner (the SLO file's) and tailgate_sli.
func (s SLO) RoutingLabels() map[string]string {
	l := map[string]string{"tailgate_sli": s.SLIKind()}
	if s.Owner != "" {
		l["owner"] = s.Owner
	}
	return l
}

// unreachable says which severities of s can never fire: a tier needs an
// error ratio of factor × budget, and a ratio above 1 cannot happen (a 90%
// objective needs 144% bad events for the 14.4× page).
func (s SLO) unreachable() []string {
	var out []string
	for _, tiers := range s.severities() {
		var need []string
		for _, t := range tiers {
			if r := t.Factor * budgetOf(s); r >= 1 {
				need = append(need, fmt.Sprintf("%s over %s needs %s%% bad events (%s × %s)", t.Severity, PromDuration(t.Long),
					num(roundTo(100*r, 4)), num(t.Factor), s.ErrorBudget))
			}
		}
		switch {
		case len(need) == len(tiers):
			out = append(out, fmt.Sprintf("objective %s (%s target %s%%): cannot %s at all: %s", s.Name, s.Objective.Metric,
				s.ObjectivePercent, tiers[0].Severity, strings.Join(need, "; ")))
		case len(need) > 0:
			out = append(out, fmt.Sprintf("objective %s (%s target %s%%): a %s tier can never fire: %s", s.Name, s.Objective.Metric,
				s.ObjectivePercent, tiers[0].Severity, strings.Join(need, "; ")))
		}
	}
	return out
}

func budgetOf(s SLO) float64 {
	b, _ := strconv.ParseFloat(s.ErrorBudget, 64)
	return b
}

func roundTo(f float64, digits int) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(f, 'g', digits, 64), 64)
	return v
}

// Annotations are the alert's own annotations beside Sloth's title and
// summary: what the objective promises, who owns it, the runbook.
func (s SLO) Annotations() map[string]string {
	a := map[string]string{
		"objective": s.Name + ": " + Describe(s.Objective),
		"owner":     s.Owner,
	}
	if s.Runbook != "" {
		a["runbook_url"] = s.Runbook
	}
	return a
}

// SeverityDescription says when the severity's alert fires, in budget and
// burn rate.
func (s SLO) SeverityDescription(tiers []slo.BurnRateAlert) string {
	var parts []string
	for _, t := range tiers {
		parts = append(parts, fmt.Sprintf("%s%% of the %s error budget within %s (burn rate over %s× for %s and %s)",
			num(t.BudgetPercent), Days(s.Window), PromDuration(t.Long), num(t.Factor), PromDuration(t.Long), PromDuration(t.Short)))
	}
	return fmt.Sprintf("%s %s on {{$labels.target}} (%s) is spending ", s.Service, s.Name, Describe(s.Objective)) +
		strings.Join(parts, ", or ") + "."
}

func alertGroup(s SLO) Group {
	g := Group{Name: "sloth-slo-alerts-" + s.ID}
	for _, tiers := range s.severities() {
		sev := tiers[0].Severity
		g.Rules = append(g.Rules, Rule{
			Alert:  s.AlertName,
			Expr:   s.condition(sev, tiers),
			Labels: merge(s.RoutingLabels(), map[string]string{labelSeverity: sev, "severity": sev}),
			Annotations: merge(map[string]string{
				"title":       fmt.Sprintf("(%s) {{$labels.%s}} {{$labels.%s}} SLO error budget burn rate is too fast.", sev, labelService, labelSLO),
				"summary":     fmt.Sprintf("{{$labels.%s}} {{$labels.%s}} SLO error budget burn rate is over expected.", labelService, labelSLO),
				"description": s.SeverityDescription(tiers),
			}, s.Annotations(), s.payload(tiers)),
		})
	}
	return g
}

// payload are the annotations an on-call engineer reads first, filled in
// by Prometheus when the alert fires: the burn rate now (5m), which window
// pairs are over their factor, and the target's URL (credentials
// redacted by the canary, from tailgate_target_info).
func (s SLO) payload(tiers []slo.BurnRateAlert) map[string]string {
	var w strings.Builder
	for _, t := range tiers {
		thr := fmt.Sprintf("(%s * %s)", num(t.Factor), s.ErrorBudget)
		q := fmt.Sprintf("%s{%s=%%q, target=%%q} > %s and ignoring (%s) %s{%s=%%q, target=%%q} > %s",
			SLIRecord(t.Short), labelID, thr, labelWindow, SLIRecord(t.Long), labelID, thr)
		fmt.Fprintf(&w, "{{ if query (printf `%s` $labels.%s $labels.target $labels.%s $labels.target) }}[%s/%s over %s×]{{ end }}",
			q, labelID, labelID, PromDuration(t.Long), PromDuration(t.Short), num(t.Factor))
	}
	fmt.Fprintf(&w, "{{ if not (query (printf `group(%s{slo=%%q, objective=%%q, target=%%q%s})` $labels.%s $labels.%s $labels.target)) }}[held: the canary is not reporting]{{ end }}",
		EventsMetric, s.matchers, labelService, labelSLO)
	return map[string]string{
		// From the SLI record the condition read, not the metadata group's
		// current burn rate: groups run on their own schedules, and that
		// one can lag the alert by an evaluation.
		"burn_rate": fmt.Sprintf("{{ with query (printf `%s{%s=%%q, target=%%q} / %s` $labels.%s $labels.target) }}{{ . | first | value | printf \"%%.3g\" }}{{ else }}unknown{{ end }}",
			SLIRecord(s.shortest()), labelID, s.ErrorBudget, labelID),
		"windows": w.String(),
		"target_url": fmt.Sprintf("{{ with query (printf `%s{target=%%q%s}` $labels.target) }}{{ . | first | label \"url\" }}{{ end }}",
			TargetInfoMetric, s.matchers),
	}
}

// Prometheus writes the rule file, with a header saying where it came from.
func (r *Result) Prometheus() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Code generated by tailgate (%s) from the SLO %q (%s): tailgate slo rules. DO NOT EDIT.\n",
		r.version, r.Spec.Name, filepath.Base(r.Spec.File))
	fmt.Fprintf(&b, "# Sloth conventions (sloth_id, sloth_service, sloth_slo, sloth_window): Sloth's dashboards read these rules.\n")
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "# Not here: %s\n", s)
	}
	if err := encode(&b, r.File); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func encode(b *bytes.Buffer, v any) error {
	e := yaml.NewEncoder(b)
	e.SetIndent(2)
	if err := e.Encode(v); err != nil {
		return err
	}
	return e.Close()
}
