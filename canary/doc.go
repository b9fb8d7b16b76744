// Package canary is tailgate's operate phase: a daemon (tailgate canary
// --config FILE, kind: Canary) that probes live endpoints on a schedule
// and judges every objective of their SLO files continuously, the same
// files that acceptance judges, so there is no second definition to drift.
//
// A canary is a pipeline that never ends: per target, package pipeline
// runs loadgen's runner over one century-long stage at the target's pace
// (a steady rate, or an interval with uniform jitter), and hands every
// record to a Prometheus sink (package exporters/prom). The sink counts
// requests, errors and tokens, fills the latency histograms from the
// metric table, and counts each objective's good and bad SLI events by
// slo.Objective.OperateEvents:
//
//   - ttft, ttfat, tpot, e2e objectives: one event per probe, good when
//     the value is ≤ threshold; itl: one per output token; icl: one per
//     chunk gap.
//   - error_rate: one event per probe, good when it succeeded.
//   - a failed or timed-out probe is one bad event for every latency
//     objective as well: a down or slow target burns every budget (the
//     probe timeout turns "slow" into "failed"), and never stops the
//     daemon. Probes the canary cancels itself (reload, shutdown) count
//     nowhere.
//   - floors (output_tokens_per_s, goodput_per_s, …) and queue_delay are
//     not judged: a floor is a rate of work under load, which a canary's
//     deliberately few probes cannot make, and queue delay comes from the
//     server's histogram, which the rest of the traffic dominates. The
//     daemon warns once when it loads them and lists them under
//     not_judged in /status; tailgate validate judges them at acceptance.
//
// The same events feed bounded rolling windows in the process (window.go:
// per-minute buckets over 3 days, per-hour buckets over the SLO window,
// ~80 KiB per objective whatever the traffic), from which the daemon sets
// the burn-rate and remaining-budget gauges, writes one log line per
// evaluation interval, and answers /status as JSON, so a user without
// Prometheus still sees the SLO. Every window also says its coverage, the
// share of it the canary ran through, so a young canary's "1h" burn rate
// or "30d" budget is read as the minutes it is. With Options.StateFile
// the windows survive restarts (state.go); /healthz fails when a probe
// loop stops finishing probes.
//
// Reload (SIGHUP in tailgate canary) re-reads the file: a valid one
// restarts only the targets that changed and keeps the windows of the
// objectives that remain; an invalid one keeps the running configuration,
// is logged, and sets tailgate_config_last_reload_successful to 0. On
// shutdown the daemon stops answering /readyz, cancels probes in flight
// and waits for them within a bound.
package canary
