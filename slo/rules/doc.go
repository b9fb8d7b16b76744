// Package rules turns an SLO file (kind: SLO) into Prometheus recording and
// alerting rules for the operate phase, so the file that acceptance judges
// is also the one that pages: there is no second definition to drift.
//
// # Conventions
//
// The rules follow Sloth's (github.com/slok/sloth: internal/prometheus's
// conventions.go, recording_rules.go and alert_rules.go, and its generated
// examples/_gen/*.yml) name for name and label for label, so Sloth's
// published Grafana dashboards (grafana.com 14348 and 14643) work on them
// unchanged and a team can move to or from Sloth without losing history.
// Sloth v0.16.0 itself, run on the spec that Sloth() writes, generates the
// same rules (TestSlothGeneratesOurRules, when sloth is on PATH) but for
// the error budget and burn factors, which we write as the file's exact
// decimals (vector(0.01), not vector(1-0.99); 5.6, not 5.6000000000000005),
// and sloth_slo_info's sloth_spec (tailgate/v1) and sloth_version.
//
//   - one Sloth "SLO" per tailgate objective: sloth_service is the SLO
//     file's name, sloth_slo the objective's, sloth_id "service-slo";
//   - recording rules slo:sli_error:ratio_rate<w> for every alert window (5m,
//     30m, 1h, 2h, 6h, 1d, 3d) with the label sloth_window, and one for the
//     SLO window, averaged over the 5m rule as Sloth's optimised rules do
//     (its name is Prometheus' spelling of the window: 30d, but 4w for 28d);
//   - metadata rules slo:objective:ratio, slo:error_budget:ratio,
//     slo:time_period:days, slo:current_burn_rate:ratio,
//     slo:period_burn_rate:ratio, slo:period_error_budget_remaining:ratio
//     and sloth_slo_info;
//   - rule groups sloth-slo-sli-recordings-<id>, sloth-slo-meta-recordings-<id>
//     and sloth-slo-alerts-<id>;
//   - two multiwindow, multi-burn-rate alerts of one name, told apart by the
//     label sloth_severity (page, ticket), which the dashboards read from
//     ALERTS: page when 2% of the budget goes within 1h (5m short window) or
//     5% within 6h (30m), ticket when 10% goes within 1d (2h) or within 3d
//     (6h). The factors come from the SLO window (slo.SlothTiers,
//     slo.BurnFactor): 14.4/6/3/1 for 30 days, 13.44/5.6/2.8/0.933 for 28.
//     Both alerts also carry severity (page, ticket), owner and
//     tailgate_sli (availability, latency) for Alertmanager routes and
//     inhibition (Result.Alertmanager), and annotations naming the
//     objective, its owner and runbook, the burn rate, the window pairs
//     over their factor and the target's URL. Unlike Sloth's, a ticket
//     waits until the canary has data for its short window, and a firing
//     alert holds while the canary's series are gone (condition);
//   - the canary's own alerts (operate.go): TailgateCanaryDown (page),
//     TailgateCanaryConfigReloadFailed, TailgateCanaryStateWriteFailing
//     (its --state file cannot be written, so a restart would lose the
//     windows) and TailgateCanaryNoRecentSuccess (tickets); Options.Selector narrows every series read to the canary's
//     (pushed runs are job "tailgate" on the Pushgateway).
//
// # The SLI
//
// Every objective that the canary judges is a ratio of two counters of
// tailgate_slo_events_total{slo,objective,target,outcome}: the error ratio
// over a window is rate(bad) / rate(good + bad). The ratio is kept per
// target (sum by (target)): a canary that probes two endpoints must page
// when one of them is down, not average it away. A target whose bad series
// does not exist yet (no bad event since the canary started) reads 0, not
// no data, so its burn rate and budget show from the first probe.
//
// Floor objectives (tokens/s, goodput/s) and queue_delay give no per-event
// outcome in operate, so they have no SLI here: Generate leaves them out and
// says which in Result.Skipped; acceptance still judges them.
//
// Two formats come out: a Prometheus rule file (File), and a Sloth
// prometheus/v1 spec (SlothSpec) for teams that run Sloth themselves; Sloth
// generates the same rules from it.
package rules
