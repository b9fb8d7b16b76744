// Package dashboards holds tailgate's Grafana dashboards (the JSON files
// beside this one, embedded) and, in one place, the metrics they may query:
// those tailgate's canary exports, and those of vLLM and dcgm-exporter that
// the capacity view sets beside them. A test parses every PromQL expression
// in the dashboards and in the generated SLO rules and fails on any metric
// that is not listed here, so a renamed metric breaks the build, not a
// dashboard someone opens during an incident.
//
// Both dashboards take their datasource as the ${DS_PROMETHEUS} input
// (Grafana's import prompts for it; file provisioning sets it as a
// variable).
//
// Latency panels query both forms of tailgate's histograms: the classic
// _bucket series `or` the native histogram. Prometheus 2.42 (Debian's) with
// --enable-feature=native-histograms ingests a histogram that exposes both
// forms in its native form only, and without the feature only the classic
// form; whichever it stored answers, and the legend is the same.
package dashboards

import (
	"embed"
	"io/fs"
	"sort"
)

//go:embed *.json
var files embed.FS

// Names lists the dashboard files: canary.json, capacity.json.
func Names() []string {
	m, _ := fs.Glob(files, "*.json")
	sort.Strings(m)
	return m
}

// Read returns a dashboard's JSON.
func Read(name string) ([]byte, error) { return files.ReadFile(name) }

// Type is a metric's Prometheus type.
type Type string

// The metric types the dashboards read.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Histogram Type = "histogram" // classic _bucket/_sum/_count, and native under the base name
)

// Metric is one metric a dashboard may query.
type Metric struct {
	Name     string
	Type     Type
	Exporter string // tailgate, vllm, dcgm-exporter, prometheus
	Labels   []string
}

// metricsTable are every metric the dashboards may use. tailgate's are the
// canary's fixed metric contract (docs/metrics.md); vLLM's and
// dcgm-exporter's are the ones the telemetry package reads from those
// exporters (vLLM's docs/design/metrics.md, dcgm-exporter's
// default-counters.csv).
var metricsTable = []Metric{
	{"tailgate_requests_total", Counter, "tailgate", []string{"target", "class", "outcome"}},
	{"tailgate_request_errors_total", Counter, "tailgate", []string{"target", "class", "kind"}},
	{"tailgate_output_tokens_total", Counter, "tailgate", []string{"target", "class"}},
	{"tailgate_ttft_seconds", Histogram, "tailgate", []string{"target", "class"}},
	{"tailgate_itl_seconds", Histogram, "tailgate", []string{"target", "class"}},
	{"tailgate_tpot_seconds", Histogram, "tailgate", []string{"target", "class"}},
	{"tailgate_e2e_seconds", Histogram, "tailgate", []string{"target", "class"}},
	{"tailgate_slo_events_total", Counter, "tailgate", []string{"slo", "objective", "target", "outcome"}},
	{"tailgate_slo_objective_ratio", Gauge, "tailgate", []string{"slo", "objective"}},
	{"tailgate_slo_error_budget_remaining_ratio", Gauge, "tailgate", []string{"slo", "objective", "target"}},
	{"tailgate_slo_burn_rate", Gauge, "tailgate", []string{"slo", "objective", "target", "window"}},
	{"tailgate_slo_window_coverage_ratio", Gauge, "tailgate", []string{"slo", "objective", "target", "window"}},
	{"tailgate_last_success_timestamp_seconds", Gauge, "tailgate", []string{"target"}},
	{"tailgate_build_info", Gauge, "tailgate", []string{"version", "revision", "goversion"}},
	{"tailgate_config_last_reload_successful", Gauge, "tailgate", nil},
	{"tailgate_canary_state_write_errors_total", Counter, "tailgate", nil},

	{"vllm:request_queue_time_seconds", Histogram, "vllm", []string{"model_name"}},
	{"vllm:time_to_first_token_seconds", Histogram, "vllm", []string{"model_name"}},
	{"vllm:inter_token_latency_seconds", Histogram, "vllm", []string{"model_name"}},
	{"vllm:e2e_request_latency_seconds", Histogram, "vllm", []string{"model_name"}},
	{"vllm:num_requests_running", Gauge, "vllm", []string{"model_name"}},
	{"vllm:num_requests_waiting", Gauge, "vllm", []string{"model_name"}},
	{"vllm:kv_cache_usage_perc", Gauge, "vllm", []string{"model_name"}},
	{"vllm:gpu_cache_usage_perc", Gauge, "vllm", []string{"model_name"}}, // before vLLM V1
	{"vllm:prompt_tokens_total", Counter, "vllm", []string{"model_name"}},
	{"vllm:generation_tokens_total", Counter, "vllm", []string{"model_name"}},
	{"vllm:request_success_total", Counter, "vllm", []string{"model_name", "finished_reason"}},

	{"DCGM_FI_DEV_GPU_UTIL", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},
	{"DCGM_FI_DEV_FB_USED", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},
	{"DCGM_FI_DEV_FB_FREE", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},
	{"DCGM_FI_DEV_POWER_USAGE", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},
	{"DCGM_FI_DEV_GPU_TEMP", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", Gauge, "dcgm-exporter", []string{"gpu", "UUID", "Hostname", "modelName"}},

	// Prometheus' own series of firing alerts; Sloth's dashboards read the
	// burn-rate alerts' sloth_severity from it.
	{"ALERTS", Gauge, "prometheus", []string{"alertname", "alertstate"}},
}

// Find returns the listed metric a series name belongs to: the metric
// itself, or a histogram's _bucket, _sum or _count.
func Find(series string) (Metric, bool) {
	for _, m := range metricsTable {
		if m.Name == series {
			return m, true
		}
		if m.Type == Histogram {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if series == m.Name+suffix {
					return m, true
				}
			}
		}
	}
	return Metric{}, false
}
