package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// tailgate slo rules writes exactly the library's rule file to stdout and
// names every objective it left out on stderr.
func TestSLORules(t *testing.T) {
	const file = "../../testdata/slo/chat.yaml"
	code, out, errOut := tgCmd("slo", "rules", "--slo", file)
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	spec, err := slo.LoadSpec(file)
	if err != nil {
		t.Fatal(err)
	}
	r, err := rules.Generate(spec, rules.Options{Version: version.Version})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := r.Prometheus()
	if out != string(want) {
		t.Fatalf("stdout is not the generated rule file:\n%s", out)
	}
	for _, o := range []string{"queue-p99 (queue_delay)", "output-tokens (output_tokens_per_s)", "goodput (goodput_per_s)"} {
		if !strings.Contains(errOut, "warning: "+file+": objective "+o) {
			t.Errorf("stderr does not name %s:\n%s", o, errOut)
		}
	}
	// tpot-p90's 90% target: its 14.4× page would need 144% bad events.
	if !strings.Contains(errOut, "warning: "+file+": objective tpot-p90 (tpot target 90%): a page tier can never fire: page over 1h needs 144% bad events") {
		t.Errorf("stderr does not say tpot-p90 cannot page over 1h:\n%s", errOut)
	}
	if strings.Count(errOut, "warning:") != 4 {
		t.Errorf("want 4 warnings:\n%s", errOut)
	}
	if !strings.Contains(out, "alert: TailgateCanaryDown") {
		t.Errorf("no canary-down alert in the rules")
	}

	code, out, _ = tgCmd("slo", "rules", "--slo", file, "--format", "prometheusrule", "--namespace", "monitoring", "--rule-label", "release=prom")
	if code != slo.ExitOK || !strings.Contains(out, "kind: PrometheusRule\n") || !strings.Contains(out, "namespace: monitoring") || !strings.Contains(out, "release: prom") {
		t.Fatalf("prometheusrule: exit %d\n%s", code, out)
	}
	code, out, _ = tgCmd("slo", "rules", "--slo", file, "--format", "alertmanager")
	if code != slo.ExitOK || !strings.Contains(out, "inhibit_rules:") {
		t.Fatalf("alertmanager: exit %d\n%s", code, out)
	}
	code, out, _ = tgCmd("slo", "rules", "--slo", file, "--format", "sloth")
	if code != slo.ExitOK || !strings.Contains(out, "\nversion: prometheus/v1\nservice: chat\n") || !strings.Contains(out, "[{{.window}}]") {
		t.Fatalf("sloth: exit %d\n%s", code, out)
	}
}

func TestSLORulesUsage(t *testing.T) {
	short := filepath.Join(t.TempDir(), "short.yaml")
	os.WriteFile(short, []byte("kind: SLO\nname: x\nowner: o\nwindow: 1d\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n"), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"slo"}, slo.ExitUsage, "want a subcommand"},
		{[]string{"slo", "rulez"}, slo.ExitUsage, `unknown subcommand "rulez"`},
		{[]string{"slo", "rules"}, slo.ExitUsage, "want --slo FILE"},
		{[]string{"slo", "rules", "--slo", "../../testdata/slo/chat.yaml", "--format", "xml"}, slo.ExitUsage, `--format "xml": want prometheus, prometheusrule, alertmanager or sloth`},
		{[]string{"slo", "rules", "--slo", "../../testdata/slo/chat.yaml", "--selector", "job=x"}, slo.ExitUsage, `selector "job=x"`},
		{[]string{"slo", "rules", "--slo", "nope.yaml"}, slo.ExitUsage, "nope.yaml"},
		{[]string{"slo", "rules", "--slo", short}, slo.ExitUsage, "window 1d: burn-rate alerts need an SLO window longer"},
		{[]string{"help", "slo"}, slo.ExitOK, ""},
	} {
		code, _, errOut := tgCmd(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.want)
		}
	}
}

// An unstreamed run judged by an SLO whose goodput has a TPOT limit: no
// answer can be judged good or bad (no TPOT without a stream), so
// summary.json has no goodput_per_s (absent, not 0/s) and the goodput
// verdict says there was no data, in every output.
func TestUnstreamedGoodputIsAbsent(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	dir := t.TempDir()
	// Exit 3: the ITL, TPOT and queue objectives have no data either.
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--stream=false", "--rate", "20",
		"--arrival", "constant", "--duration", "1s", "--max-tokens", "8", "--metrics-url", "off",
		"--slo", "../../testdata/slo/chat.yaml", "--out", dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "objective goodput: goodput needs the tpot") {
		t.Errorf("exit %d, want 3 with the goodput objective's reason: %s", code, stderr)
	}
	var sum struct {
		Throughput map[string]any `json:"throughput"`
		SLO        struct {
			Verdicts []struct {
				Name   string `json:"objective"`
				Result string `json:"result"`
			} `json:"verdicts"`
		} `json:"slo"`
	}
	b, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &sum); err != nil {
		t.Fatal(err)
	}
	if rps, _ := sum.Throughput["requests_per_s"].(float64); rps <= 0 {
		t.Fatalf("no completions measured: %v", sum.Throughput)
	}
	if v, ok := sum.Throughput["goodput_per_s"]; ok {
		t.Errorf("goodput_per_s = %v in summary.json: nothing was judged, want it absent", v)
	}
	found := false
	for _, v := range sum.SLO.Verdicts {
		if v.Name == "goodput" {
			found = true
			if v.Result != string(slo.NoData) {
				t.Errorf("goodput verdict %q, want %q", v.Result, slo.NoData)
			}
		}
	}
	if !found {
		t.Errorf("no goodput verdict: %+v", sum.SLO.Verdicts)
	}
	if !strings.Contains(stdout+stderr, "goodput not judged") {
		t.Errorf("the table does not say goodput was not judged:\n%s%s", stdout, stderr)
	}
}
