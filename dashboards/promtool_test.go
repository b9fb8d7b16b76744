package dashboards

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// values stand in for the dashboards' variables: the series below carry
// these label values.
var values = map[string]string{"slo": "chat", "objective": "errors", "target": "a", "class": "chat",
	"model": "m", "gpu_host": "h", "__rate_interval": "5m", "__interval": "5m", "__range": "5m"}

func withValues(e string) string {
	return grafanaVarRE.ReplaceAllStringFunc(e, func(v string) string {
		return values[grafanaVarRE.FindStringSubmatch(v)[1]]
	})
}

// classicSeries are what a canary, vLLM and dcgm-exporter expose over 30
// minutes, histograms in their classic form only (promtool 2.42's test
// series cannot be native histograms): half of the probes' latencies ≤ 0.1s,
// all ≤ 0.5s; a quarter of the error objective's events bad.
func classicSeries() []map[string]string {
	var s []map[string]string
	add := func(series, values string) { s = append(s, map[string]string{"series": series, "values": values}) }
	for _, h := range []string{"tailgate_ttft_seconds", "tailgate_itl_seconds", "tailgate_tpot_seconds", "tailgate_e2e_seconds"} {
		l := `target="a",class="chat"`
		add(h+`_bucket{`+l+`,le="0.1"}`, "0+50x30")
		add(h+`_bucket{`+l+`,le="0.5"}`, "0+100x30")
		add(h+`_bucket{`+l+`,le="+Inf"}`, "0+100x30")
		add(h+`_sum{`+l+`}`, "0+20x30")
		add(h+`_count{`+l+`}`, "0+100x30")
	}
	for _, h := range []string{"vllm:request_queue_time_seconds", "vllm:time_to_first_token_seconds"} {
		add(h+`_bucket{model_name="m",le="0.1"}`, "0+50x30")
		add(h+`_bucket{model_name="m",le="+Inf"}`, "0+100x30")
	}
	add(`tailgate_slo_events_total{slo="chat",objective="errors",target="a",outcome="good"}`, "0+75x30")
	add(`tailgate_slo_events_total{slo="chat",objective="errors",target="a",outcome="bad"}`, "0+25x30")
	add(`tailgate_requests_total{target="a",class="chat",outcome="ok"}`, "0+75x30")
	add(`tailgate_requests_total{target="a",class="chat",outcome="error"}`, "0+25x30")
	add(`tailgate_request_errors_total{target="a",class="chat",kind="http_5xx"}`, "0+25x30")
	add(`tailgate_output_tokens_total{target="a",class="chat"}`, "0+3000x30")
	add(`tailgate_slo_burn_rate{slo="chat",objective="errors",target="a",window="5m"}`, "25x30")
	add(`tailgate_slo_error_budget_remaining_ratio{slo="chat",objective="errors",target="a"}`, "0.5x30")
	add(`tailgate_slo_window_coverage_ratio{slo="chat",objective="errors",target="a",window="1h"}`, "0.5x30")
	add(`tailgate_slo_objective_ratio{slo="chat",objective="errors"}`, "0.99x30")
	add(`tailgate_last_success_timestamp_seconds{target="a"}`, "0+60x30")
	add(`tailgate_build_info{version="dev",revision="x",goversion="go1.26"}`, "1x30")
	add(`tailgate_config_last_reload_successful`, "1x30")
	add(`vllm:num_requests_running{model_name="m"}`, "8x30")
	add(`vllm:num_requests_waiting{model_name="m"}`, "3x30")
	add(`vllm:kv_cache_usage_perc{model_name="m"}`, "0.7x30")
	add(`vllm:generation_tokens_total{model_name="m"}`, "0+3000x30")
	add(`vllm:prompt_tokens_total{model_name="m"}`, "0+9000x30")
	for _, g := range []string{"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"} {
		add(g+`{Hostname="h",gpu="0"}`, "50x30")
	}
	return s
}

// Every dashboard query, run by promtool against the generated rules and
// classic-only series, returns data: the classic path of the latency panels
// works, and the SLO panels' selectors match the labels the rules record.
// One value is checked exactly: TTFT p50 for class chat is 0.1s.
func TestDashboardQueriesAnswerOnClassicSeries(t *testing.T) {
	promtest.Promtool(t)
	dir := t.TempDir()
	spec, err := slo.LoadSpec("../testdata/slo/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := rules.Generate(spec, rules.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	p, _ := r.Prometheus()
	if err := os.WriteFile(filepath.Join(dir, "chat.rules.yaml"), p, 0o644); err != nil {
		t.Fatal(err)
	}
	type sample struct {
		Labels string  `yaml:"labels"`
		Value  float64 `yaml:"value"`
	}
	type exprTest struct {
		Expr       string   `yaml:"expr"`
		EvalTime   string   `yaml:"eval_time"`
		ExpSamples []sample `yaml:"exp_samples"`
	}
	var tests []exprTest
	n := 0
	for _, name := range Names() {
		for _, e := range load(t, name).exprs(name) {
			tests = append(tests, exprTest{Expr: "count(" + withValues(e.text) + ") > bool 0", EvalTime: "20m",
				ExpSamples: []sample{{Labels: "{}", Value: 1}}})
			n++
		}
	}
	ttft := `histogram_quantile(0.5, sum by (class, le) (rate(tailgate_ttft_seconds_bucket{target=~"a", class=~"chat"}[5m]))) ` +
		`or histogram_quantile(0.5, sum by (class) (rate(tailgate_ttft_seconds{target=~"a", class=~"chat"}[5m])))`
	found := false
	for _, tc := range tests {
		found = found || strings.Contains(tc.Expr, ttft)
	}
	if !found {
		t.Fatalf("the canary dashboard has no TTFT p50 query %s", ttft)
	}
	tests = append(tests, exprTest{Expr: ttft, EvalTime: "20m", ExpSamples: []sample{{Labels: `{class="chat"}`, Value: 0.1}}})
	file := map[string]any{
		"rule_files":          []string{"chat.rules.yaml"},
		"evaluation_interval": "1m",
		"tests": []map[string]any{{
			"interval":         "1m",
			"input_series":     classicSeries(),
			"promql_expr_test": tests,
		}},
	}
	b, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "dashboards.test.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(promtest.Promtool(t), "test", "rules", "dashboards.test.yaml")
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool test rules (%d dashboard queries): %v\n%s", n, err, out)
	}
	if !strings.Contains(string(out), "SUCCESS") {
		t.Fatalf("promtool:\n%s", out)
	}
	t.Logf("%d dashboard queries answered", n)
}
