package prom

import (
	"slices"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// The metric contract (fixed): names and labels that dashboards, the rules
// `tailgate slo rules` generates, and users' queries rely on. Add, never
// rename. A test compares Names with what a registry actually exports.
const (
	// RequestsTotal counts finished requests {target,class,outcome}; outcome
	// is OutcomeOK or OutcomeError.
	RequestsTotal = "tailgate_requests_total"
	// RequestErrorsTotal counts failed requests {target,class,kind}; kind is
	// the record's protocol-neutral error kind (loadgen.ErrorKinds).
	RequestErrorsTotal = "tailgate_request_errors_total"
	// OutputTokensTotal counts output tokens of successful requests
	// {target,class}: the Prom face of the rate table's
	// output_tokens_per_s row (loadgen/measure/ratemetric.go), which a test holds
	// equal.
	OutputTokensTotal = "tailgate_output_tokens_total"
	// Latency histograms {target,class}, in seconds, by the metric table's
	// definitions (loadgen/measure/metric.go): classic buckets that include every
	// SLO threshold of that metric exactly, plus a native histogram. The
	// names, help and buckets are the rows' Prom faces; these constants
	// spell them for callers, and a test holds them equal.
	TTFTSeconds = "tailgate_ttft_seconds"
	ITLSeconds  = "tailgate_itl_seconds" // one observation per output token after the first
	TPOTSeconds = "tailgate_tpot_seconds"
	E2ESeconds  = "tailgate_e2e_seconds"
	// SLOEventsTotal counts SLI events {slo,objective,target,outcome};
	// outcome is OutcomeGood or OutcomeBad. The SLI of an objective is
	// good / (good + bad).
	SLOEventsTotal = "tailgate_slo_events_total"
	// SLOObjectiveRatio is an objective's target fraction of good events
	// {slo,objective} (0.99).
	SLOObjectiveRatio = "tailgate_slo_objective_ratio"
	// SLOErrorBudgetRemainingRatio is the share of the error budget left
	// over the SLO window as far as the process has seen it
	// {slo,objective,target}; negative once overspent.
	SLOErrorBudgetRemainingRatio = "tailgate_slo_error_budget_remaining_ratio"
	// SLOBurnRate is the burn rate over a rolling window
	// {slo,objective,target,window}; window is one of BurnRateWindows.
	SLOBurnRate = "tailgate_slo_burn_rate"
	// LastSuccessTimestampSeconds is when the last successful request of a
	// target ended {target}, Unix seconds.
	LastSuccessTimestampSeconds = "tailgate_last_success_timestamp_seconds"
	// BuildInfo is 1 {version,revision,goversion}.
	BuildInfo = "tailgate_build_info"
	// SLOWindowCoverageRatio is the share of a rolling window the canary has
	// data for {slo,objective,target,window} (canary only): 1 once it has
	// run a whole window, less early in its life.
	SLOWindowCoverageRatio = "tailgate_slo_window_coverage_ratio"
	// TargetInfo is 1 {target,url,api,model} (canary only); url has its
	// credentials redacted.
	TargetInfo = "tailgate_target_info"
	// ConfigLastReloadSuccessful is 1 when the last configuration (re)load
	// succeeded, 0 when it failed and the previous one is still in use.
	ConfigLastReloadSuccessful = "tailgate_config_last_reload_successful"
	// ConfigLastReloadSuccessTimestampSeconds is when the configuration was
	// last loaded successfully, Unix seconds.
	ConfigLastReloadSuccessTimestampSeconds = "tailgate_config_last_reload_success_timestamp_seconds"
	// CanaryStateWriteErrorsTotal counts failed writes of the canary's
	// state file (canary only): windows not kept are lost at the next
	// restart.
	CanaryStateWriteErrorsTotal = "tailgate_canary_state_write_errors_total"
	// CanaryStateLastSuccessTimestampSeconds is when the canary's state
	// file was last written, Unix seconds (canary only; absent until the
	// first write succeeds, and without a state file).
	CanaryStateLastSuccessTimestampSeconds = "tailgate_canary_state_last_success_timestamp_seconds"
)

// Label names and values of the contract.
const (
	LabelTarget    = "target"
	LabelClass     = "class"
	LabelOutcome   = "outcome"
	LabelKind      = "kind"
	LabelSLO       = "slo"
	LabelObjective = "objective"
	LabelWindow    = "window"
	LabelVersion   = "version"
	LabelRevision  = "revision"
	LabelGoVersion = "goversion"
	LabelURL       = "url"
	LabelAPI       = "api"
	LabelModel     = "model"

	OutcomeOK    = "ok"
	OutcomeError = "error"
	OutcomeGood  = "good"
	OutcomeBad   = "bad"
)

// burnRateWindowsTable are the values of SLOBurnRate's window label: the short
// and long windows of the multiwindow, multi-burn-rate alerts
// (slo.BurnRateWindows): 5m, 30m, 1h, 2h, 6h, 1d, 3d.
var burnRateWindowsTable = func() []string {
	out := make([]string, len(slo.BurnRateWindows()))
	for i, d := range slo.BurnRateWindows() {
		out[i] = rules.PromDuration(d) // as the generated rules spell it
	}
	return out
}()

// namesTable lists every metric name of the contract, in the order above:
// the latency histograms are the metric table's Prom faces.
var namesTable = slices.Concat([]string{
	RequestsTotal, RequestErrorsTotal,
}, rateNames(measure.RateMetrics()), latencyNames(measure.LatencyMetrics()), []string{
	SLOEventsTotal, SLOObjectiveRatio, SLOErrorBudgetRemainingRatio, SLOBurnRate,
	LastSuccessTimestampSeconds, BuildInfo,
	ConfigLastReloadSuccessful, ConfigLastReloadSuccessTimestampSeconds,
	SLOWindowCoverageRatio, TargetInfo,
	CanaryStateWriteErrorsTotal, CanaryStateLastSuccessTimestampSeconds,
})

// rateNames are the counter names of a rate table, in its order.
func rateNames(rows []measure.RateMetric) []string {
	var out []string
	for _, c := range rateCountersOf(rows) {
		if c.bad != nil {
			out = append(out, c.row.Prom.Name+"_bad_total", c.row.Prom.Name+"_events_total")
			continue
		}
		out = append(out, c.row.Prom.Name)
	}
	return out
}

// latencyNames are the histogram names of a metric table, in its order.
func latencyNames(rows []measure.LatencyMetric) []string {
	var out []string
	for _, h := range latencyHistogramsOf(rows) {
		out = append(out, h.name)
	}
	return out
}
