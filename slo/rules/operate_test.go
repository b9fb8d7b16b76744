package rules

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/internal/promtest"
)

func TestParseSelector(t *testing.T) {
	for in, want := range map[string]string{
		``:                                  ``,
		`job="canary"`:                      `, job="canary"`,
		`{job="canary", env!~"dev|test"}`:   `, job="canary", env!~"dev|test"`,
		` namespace = "a\"b" ,instance!=""`: `, namespace="a\"b", instance!=""`,
	} {
		got, err := ParseSelector(in)
		if err != nil || got != want {
			t.Errorf("ParseSelector(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		`job=canary`:     `"job=canary" is not a label matcher`,
		`job="a" x`:      `is not a label matcher`,
		`job=~"("`:       "missing closing )",
		`target="a"`:     "label target is the rules' own",
		`9job="a"`:       "is not a label matcher",
		`job="a",,x="b"`: "is not a label matcher",
	} {
		if _, err := ParseSelector(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSelector(%q): error %v, want %q", in, err, want)
		}
	}
}

// A 90% objective's 14.4× page needs 144% bad events: said, per tier, and
// "at all" when no tier of a severity can fire.
func TestGenerateWarnsWhatCannotFire(t *testing.T) {
	r, err := Generate(parse(t, `
kind: SLO
name: api
owner: o
objectives:
  - {name: p90, metric: ttft, threshold: 1s, target: 90%}
  - {name: p80, metric: ttft, threshold: 1s, target: 80%}
  - {name: p99, metric: ttft, threshold: 1s, target: 99%}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(r.Warnings, "\n")
	for _, want := range []string{
		"objective p90 (ttft target 90%): a page tier can never fire: page over 1h needs 144% bad events (14.4 × 0.1)",
		"objective p80 (ttft target 80%): cannot page at all: page over 1h needs 288% bad events (14.4 × 0.2); page over 6h needs 120% bad events (6 × 0.2)",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("warnings:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "p99") || len(r.Warnings) != 2 {
		t.Errorf("warnings:\n%s", got)
	}
}

// The alerts carry the routing labels Alertmanager needs; the canary's own
// alerts come once per file, or not at all with NoCanaryAlerts.
func TestRoutingLabelsAndCanaryAlerts(t *testing.T) {
	r := generate(t, "../../testdata/slo/chat.yaml")
	kinds := map[string]string{}
	canary := map[string]Rule{}
	for _, g := range r.File.Groups {
		for _, rule := range g.Rules {
			if rule.Alert == "" {
				continue
			}
			if strings.HasPrefix(g.Name, "tailgate-canary-") {
				canary[rule.Alert] = rule
				continue
			}
			if rule.Labels["owner"] != "inference-platform@example.com" {
				t.Errorf("%s: owner label %q", rule.Alert, rule.Labels["owner"])
			}
			kinds[rule.Alert] = rule.Labels["tailgate_sli"]
		}
	}
	if kinds["ChatErrorsErrorBudgetBurn"] != "availability" || kinds["ChatTtftP99ErrorBudgetBurn"] != "latency" || kinds["ChatItlP95ErrorBudgetBurn"] != "latency" {
		t.Errorf("tailgate_sli labels %v", kinds)
	}
	down, ok := canary[AlertCanaryDown]
	if !ok || down.Labels["severity"] != "page" || down.For != "2m" || !strings.Contains(down.Expr, "absent("+ReloadMetric+")") {
		t.Errorf("canary-down alert %+v", down)
	}
	if _, ok := canary[AlertReloadFailed]; !ok {
		t.Error("no reload-failed alert")
	}
	r = generateWith(t, "../../testdata/slo/chat.yaml", Options{NoCanaryAlerts: true, Selector: `job="c"`})
	for _, g := range r.File.Groups {
		if strings.HasPrefix(g.Name, "tailgate-canary-") {
			t.Errorf("NoCanaryAlerts: group %s", g.Name)
		}
	}
	r = generateWith(t, "../../testdata/slo/chat.yaml", Options{Selector: `job="c"`})
	p, _ := r.Prometheus()
	if !strings.Contains(string(p), `absent(`+ReloadMetric+`{job="c"})`) {
		t.Errorf("canary-down alert does not take the selector:\n%s", p)
	}
}

// The Alertmanager configuration is one amtool accepts, and inhibits what
// one outage sets off beside the availability page.
func TestAlertmanagerConfig(t *testing.T) {
	b, err := generate(t, "../../testdata/slo/chat.yaml").Alertmanager()
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Inhibit []struct {
			Source []string `yaml:"source_matchers"`
			Target []string `yaml:"target_matchers"`
			Equal  []string `yaml:"equal"`
		} `yaml:"inhibit_rules"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var lat bool
	for _, r := range cfg.Inhibit {
		if strings.Join(r.Source, ",") == `tailgate_sli="availability",severity="page"` && strings.Join(r.Target, ",") == `tailgate_sli="latency"` &&
			strings.Join(r.Equal, ",") == "target" {
			lat = true
		}
	}
	if !lat {
		t.Errorf("no inhibition of latency alerts by the availability page:\n%s", b)
	}
	amtool, err := exec.LookPath("amtool")
	if err != nil {
		if os.Getenv(promtest.RequireEnv) == "1" {
			t.Fatalf("amtool not found and %s=1: apt-get install prometheus-alertmanager", promtest.RequireEnv)
		}
		t.Skip("amtool not found (apt-get install prometheus-alertmanager)")
	}
	p := filepath.Join(t.TempDir(), "alertmanager.yml")
	os.WriteFile(p, b, 0o644)
	if out, err := exec.Command(amtool, "check-config", p).CombinedOutput(); err != nil {
		t.Fatalf("amtool check-config: %v\n%s\n%s", err, out, b)
	}
}
