package rules

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/slo"
)

// Metric names of the canary that the canary's own alerts read (the metric
// contract, exporters/prom/names.go; repeated here so this package needs no
// exporter).
const (
	// ReloadMetric exists only on a canary (a daemon with a configuration),
	// never on a pushed run: its absence is the canary's.
	ReloadMetric      = "tailgate_config_last_reload_successful"
	LastSuccessMetric = "tailgate_last_success_timestamp_seconds"
	TargetInfoMetric  = "tailgate_target_info"
	// StateWriteErrorsMetric counts the canary's failed state-file writes.
	StateWriteErrorsMetric = "tailgate_canary_state_write_errors_total"
)

// Alert names of the canary's own alerts.
const (
	AlertCanaryDown      = "TailgateCanaryDown"
	AlertReloadFailed    = "TailgateCanaryConfigReloadFailed"
	AlertNoRecentSuccess = "TailgateCanaryNoRecentSuccess"
	AlertStateWriteFails = "TailgateCanaryStateWriteFailing"
)

// noSuccessAfter is how long without one successful probe of a target
// tickets (the burn-rate alerts page on the failures themselves; this
// catches a target that never answered since the canary started, whose
// windows may be too young to tell).
const noSuccessAfter = 30 * time.Minute

var (
	matcherRE = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*("(?:[^"\\]|\\.)*")\s*(?:,|$)`)
)

// ParseSelector reads label matchers as PromQL writes them (`job="x",
// env!~"dev|test"`, braces optional) and returns them written back, each
// preceded by ", " ("" for none), ready to append inside a selector. The
// error names the matcher that does not parse.
func ParseSelector(sel string) (string, error) {
	s := strings.TrimSpace(sel)
	if strings.HasPrefix(s, "{") && strings.HasSuffix(s, "}") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	var b strings.Builder
	for s != "" {
		m := matcherRE.FindStringSubmatch(s)
		if m == nil {
			return "", fmt.Errorf("selector %q: %q is not a label matcher (want name=\"value\", with =, !=, =~ or !~)", sel, s)
		}
		v, err := strconv.Unquote(m[3])
		if err != nil {
			return "", fmt.Errorf("selector %q: %s: %w", sel, m[3], err)
		}
		if m[2] == "=~" || m[2] == "!~" {
			if _, err := regexp.Compile("^(?:" + v + ")$"); err != nil {
				return "", fmt.Errorf("selector %q: %s: %w", sel, m[0], err)
			}
		}
		switch m[1] {
		case "slo", "objective", "outcome", "target", "__name__":
			return "", fmt.Errorf("selector %q: label %s is the rules' own", sel, m[1])
		}
		fmt.Fprintf(&b, ", %s%s%s", m[1], m[2], strconv.Quote(v))
		s = strings.TrimSpace(s[len(m[0]):])
	}
	return b.String(), nil
}

// braces is matchers (", a=\"b\"") as a selector: {a="b"}, or "".
func braces(matchers string) string {
	if matchers == "" {
		return ""
	}
	return "{" + strings.TrimPrefix(matchers, ", ") + "}"
}

// canaryGroup is the canary's own alerts: it is gone (page), its last
// reload failed (ticket), its state file cannot be written (ticket), a
// target has had no successful probe for a while (ticket; inhibited while
// its availability pages).
func canaryGroup(spec *slo.Spec, matchers string, downFor time.Duration) Group {
	owner := map[string]string{}
	if spec.Owner != "" {
		owner["owner"] = spec.Owner
	}
	sel := braces(matchers)
	return Group{Name: "tailgate-canary-" + spec.Name, Rules: []Rule{
		{
			Alert: AlertCanaryDown,
			// Staleness: a failed scrape or a target gone from discovery
			// marks the canary's series stale at once, so absent() turns
			// true within one scrape; pushed runs never carry this metric.
			Expr:   fmt.Sprintf("absent(%s%s)\n", ReloadMetric, sel),
			For:    PromDuration(downFor),
			Labels: merge(owner, map[string]string{"severity": "page", "tailgate_alert": "canary_down"}),
			Annotations: map[string]string{
				"summary": "The tailgate canary is not reporting: no SLO is being measured.",
				"description": fmt.Sprintf("No %s%s for %s: the canary is down, not scraped, or gone from service discovery. "+
					"Burn-rate alerts that were firing stay firing until it reports again; none can start.", ReloadMetric, sel, PromDuration(downFor)),
			},
		},
		{
			Alert:  AlertReloadFailed,
			Expr:   fmt.Sprintf("%s%s == 0\n", ReloadMetric, sel),
			For:    "5m",
			Labels: merge(owner, map[string]string{"severity": "ticket", "tailgate_alert": "reload_failed"}),
			Annotations: map[string]string{
				"summary":     "The tailgate canary's configuration failed to reload; it runs the previous one.",
				"description": "{{ $labels.instance }}: the last reload of the canary file failed; /status says why (config.last_reload_error).",
			},
		},
		{
			// Failing writes cost the windows at the next restart. The
			// canary writes at every evaluation, so writes that keep
			// failing keep the increase above 0; one that failed once,
			// and the next succeeded, falls out of the window first.
			Alert:  AlertStateWriteFails,
			Expr:   fmt.Sprintf("increase(%s%s[10m]) > 0\n", StateWriteErrorsMetric, sel),
			For:    "10m",
			Labels: merge(owner, map[string]string{"severity": "ticket", "tailgate_alert": "state_write_failing"}),
			Annotations: map[string]string{
				"summary": "The tailgate canary cannot write its state file: a restart would lose its windows.",
				"description": "{{ $labels.instance }}: writes of the canary's --state file keep failing; its /healthz answers 503 naming the file and the error, " +
					"and its log says the same.",
			},
		},
		{
			Alert: AlertNoRecentSuccess,
			Expr: fmt.Sprintf("time() - max by (target) (%s%s) > %g\n",
				LastSuccessMetric, sel, noSuccessAfter.Seconds()),
			Labels: merge(owner, map[string]string{"severity": "ticket", "tailgate_alert": "no_recent_success", "tailgate_sli": "availability"}),
			Annotations: map[string]string{
				"summary": fmt.Sprintf("No successful probe of {{ $labels.target }} for over %s.", PromDuration(noSuccessAfter)),
				"description": "The canary's last successful probe of {{ $labels.target }} ended {{ $value | humanizeDuration }} ago." +
					"{{ with query (printf `" + TargetInfoMetric + "{target=%q" + matchers + "}` $labels.target) }} URL {{ . | first | label \"url\" }}.{{ end }}",
			},
		},
	}}
}

// Alertmanager writes an Alertmanager configuration for the rules: the
// route (pages and tickets grouped per owner and target, so one outage is
// one notification; group_wait 1m, over the usual evaluation interval, so
// every page of the outage is in before the first goes out) and the
// inhibition that makes one outage one page:
//
//   - an availability page mutes every latency alert and the no-success
//     ticket of the same target (a failed probe is a bad event for every
//     objective, so the latency objectives burn with it);
//   - a page mutes the ticket of the same objective and target.
//
// The receivers are placeholders to fill in (a receiver without
// integrations is valid and delivers nothing).
func (r *Result) Alertmanager() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Alertmanager configuration generated by tailgate (%s) for the SLO %q: tailgate slo rules --format alertmanager.\n", r.version, r.Spec.Name)
	b.WriteString("# Fill in the receivers (or copy route.routes and inhibit_rules into your own configuration).\n")
	b.WriteString("# Labels on every tailgate alert: severity (page|ticket), owner (the SLO file's), target, and\n")
	b.WriteString("# tailgate_sli (availability|latency) on burn-rate alerts, tailgate_alert on the canary's own.\n")
	owner := r.Spec.Owner
	cfg := map[string]any{
		"route": map[string]any{
			"receiver": "tailgate-ticket",
			"group_by": []string{"owner", "target"},
			// Longer than the rule evaluation interval: each objective's
			// rules are their own groups, evaluated apart, so the pages of
			// one outage reach Alertmanager up to an interval apart; the
			// availability page must be there to inhibit the latency ones
			// before the group's first notification goes out.
			"group_wait":      "1m",
			"group_interval":  "5m",
			"repeat_interval": "4h",
			"routes": []any{
				map[string]any{"receiver": "tailgate-page", "matchers": []string{`severity="page"`, "owner=" + strconv.Quote(owner)}},
				map[string]any{"receiver": "tailgate-ticket", "matchers": []string{`severity="ticket"`, "owner=" + strconv.Quote(owner)}},
			},
		},
		"inhibit_rules": []any{
			map[string]any{
				"source_matchers": []string{`tailgate_sli="availability"`, `severity="page"`},
				"target_matchers": []string{`tailgate_sli="latency"`},
				"equal":           []string{"target"},
			},
			map[string]any{
				"source_matchers": []string{`tailgate_sli="availability"`, `severity="page"`},
				"target_matchers": []string{`tailgate_alert="no_recent_success"`},
				"equal":           []string{"target"},
			},
			map[string]any{
				"source_matchers": []string{`tailgate_sli=~".+"`, `severity="page"`},
				"target_matchers": []string{`severity="ticket"`},
				"equal":           []string{"sloth_id", "target"},
			},
		},
		"receivers": []any{map[string]any{"name": "tailgate-page"}, map[string]any{"name": "tailgate-ticket"}},
	}
	if err := encode(&b, cfg); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// PrometheusRule writes the rule groups as a Prometheus Operator
// PrometheusRule (monitoring.coreos.com/v1), named tailgate-slo-<slo>,
// labelled so a Prometheus' ruleSelector can pick it (labels: extra
// metadata labels, e.g. release: kube-prometheus-stack).
func (r *Result) PrometheusRule(namespace string, labels map[string]string) ([]byte, error) {
	meta := map[string]any{
		"name":   "tailgate-slo-" + dnsName(r.Spec.Name),
		"labels": merge(map[string]string{"app.kubernetes.io/name": "tailgate", "app.kubernetes.io/component": "slo-rules"}, labels),
	}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	obj := struct {
		APIVersion string         `yaml:"apiVersion"`
		Kind       string         `yaml:"kind"`
		Metadata   map[string]any `yaml:"metadata"`
		Spec       File           `yaml:"spec"`
	}{"monitoring.coreos.com/v1", "PrometheusRule", meta, r.File}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Code generated by tailgate (%s) from the SLO %q: tailgate slo rules --format prometheusrule. DO NOT EDIT.\n",
		r.version, r.Spec.Name)
	for _, s := range r.Skipped {
		fmt.Fprintf(&b, "# Not here: %s\n", s)
	}
	if err := encode(&b, obj); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// dnsName lowers s and turns what a Kubernetes name cannot hold into '-'.
func dnsName(s string) string {
	var b strings.Builder
	for _, c := range strings.ToLower(s) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' {
			b.WriteRune(c)
		} else {
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-.")
}
