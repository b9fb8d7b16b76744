package rules

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/slo"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// goldenCases are the SLO files whose rules are kept in testdata/ (the
// promtool tests load those files).
var goldenCases = []struct {
	spec, name string
	opts       Options
}{
	{"../../testdata/slo/chat.yaml", "chat", Options{}},
	{"../../testdata/slo/chat-28d.yaml", "chat-28d", Options{}},
	// The canary scraped as job "canary": pushed runs (job "tailgate")
	// stay out of its SLI (chat-canary-job.test.yaml).
	{"../../testdata/slo/chat.yaml", "chat-canary-job", Options{Selector: `job="canary"`, NoCanaryAlerts: true}},
}

func generate(t *testing.T, path string) *Result {
	t.Helper()
	return generateWith(t, path, Options{})
}

func generateWith(t *testing.T, path string, opts Options) *Result {
	t.Helper()
	spec, err := slo.LoadSpec(path)
	if err != nil {
		t.Fatal(err)
	}
	opts.Version = "test"
	r, err := Generate(spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func golden(t *testing.T, file string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./slo/rules -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the generated output (go test ./slo/rules -update rewrites it after review):\n%s", path, firstDiff(string(want), string(got)))
	}
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var a, b string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			b = g[i]
		}
		if a != b {
			return "line " + fmt.Sprint(i+1) + ":\n  want: " + a + "\n  got:  " + b
		}
	}
	return ""
}

func TestGolden(t *testing.T) {
	for _, c := range goldenCases {
		t.Run(c.name, func(t *testing.T) {
			r := generateWith(t, c.spec, c.opts)
			p, err := r.Prometheus()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".rules.yaml", p)
			s, err := r.Sloth()
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".sloth.yaml", s)
		})
	}
}

func parse(t *testing.T, yamlText string) *slo.Spec {
	t.Helper()
	s, err := slo.ParseSpec("slo.yaml", []byte(yamlText))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Floors and queue_delay have no per-event outcome in operate: they are
// skipped, each named with its reason, and the rest still get rules.
func TestGenerateSkipsWhatOperateCannotCount(t *testing.T) {
	r := generate(t, "../../testdata/slo/chat.yaml")
	var skipped []string
	for _, s := range r.Skipped {
		skipped = append(skipped, s.Objective)
	}
	if got := strings.Join(skipped, ","); got != "queue-p99,output-tokens,goodput" {
		t.Fatalf("skipped %s", got)
	}
	var names []string
	for _, s := range r.SLOs {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "ttft-p99,itl-p95,tpot-p90,errors" {
		t.Fatalf("SLOs %s", got)
	}
	if len(r.File.Groups) != 3*len(r.SLOs)+1 { // + the canary's own
		t.Fatalf("%d groups for %d SLOs", len(r.File.Groups), len(r.SLOs))
	}
}

// The file's decimals stay exact: 99.9% is 0.999 with a 0.001 budget, not
// Sloth's 0.9990000000000001 and 0.0009999999999999432.
func TestGenerateExactDecimals(t *testing.T) {
	r, err := Generate(parse(t, `
kind: SLO
name: api
owner: o
objectives:
  - {name: ttft, metric: ttft, threshold: 1s, target: 99.9%}
  - {name: errs, metric: error_rate, threshold: 0.05%}
  - {name: e2e, metric: e2e, threshold: 10s, target: 0.9995}
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range [][3]string{{"0.999", "0.001", "99.9"}, {"0.9995", "0.0005", "99.95"}, {"0.9995", "0.0005", "99.95"}} {
		s := r.SLOs[i]
		if got := [3]string{s.ObjectiveRatio, s.ErrorBudget, s.ObjectivePercent}; got != want {
			t.Errorf("%s: objective, budget, percent = %v, want %v", s.Name, got, want)
		}
	}
	p, _ := r.Prometheus()
	if !bytes.Contains(p, []byte("> (14.4 * 0.001))")) || !bytes.Contains(p, []byte("expr: vector(0.999)\n")) {
		t.Errorf("thresholds not written exactly:\n%s", p)
	}
}

func TestGenerateRefuses(t *testing.T) {
	for _, c := range []struct{ name, yaml, want string }{
		{"window shorter than the alerts", "kind: SLO\nname: x\nowner: o\nwindow: 2d\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n",
			"window 2d: burn-rate alerts need an SLO window longer than their longest window (3d)"},
		{"nothing to count", "kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: output_tokens_per_s, threshold: 10}]\n",
			"no objective is counted as good/bad events"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(parse(t, c.yaml), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
	// A 100% target has no budget to burn: skipped, said.
	r, err := Generate(parse(t, "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: error_rate, threshold: 1%}\n  - {name: all, metric: ttft, threshold: 1s, target: 100%}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Skipped) != 1 || r.Skipped[0].Objective != "all" || !strings.Contains(r.Skipped[0].Reason, "no error budget") {
		t.Fatalf("skipped %+v", r.Skipped)
	}
}

func TestAlertName(t *testing.T) {
	for in, want := range map[[2]string]string{
		{"chat", "ttft-p99"}:      "ChatTtftP99ErrorBudgetBurn",
		{"my_api.v2", "e2e:slow"}: "MyApiV2E2eSlowErrorBudgetBurn",
		{"9lives", "errors"}:      "SLO9livesErrorsErrorBudgetBurn",
	} {
		if got := alertName(in[0], in[1]); got != want {
			t.Errorf("alertName%v = %s, want %s", in, got, want)
		}
	}
}

// The Sloth spec reads back as Sloth's prometheus/v1 shape, objectives in
// percent and queries templated on {{.window}}.
func TestSlothSpecShape(t *testing.T) {
	b, err := generate(t, "../../testdata/slo/chat-28d.yaml").Sloth()
	if err != nil {
		t.Fatal(err)
	}
	var spec struct {
		Version string
		Service string
		SLOs    []struct {
			Name      string
			Objective float64
			SLI       struct {
				Events struct {
					ErrorQuery string `yaml:"error_query"`
					TotalQuery string `yaml:"total_query"`
				}
			}
			Alerting struct {
				Name        string
				Annotations map[string]string
				PageAlert   struct{ Labels map[string]string } `yaml:"page_alert"`
				TicketAlert struct{ Labels map[string]string } `yaml:"ticket_alert"`
			}
		} `yaml:"slos"`
	}
	if err := yaml.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	if spec.Version != "prometheus/v1" || spec.Service != "chat" || len(spec.SLOs) != 2 {
		t.Fatalf("spec %+v", spec)
	}
	s := spec.SLOs[0]
	if s.Name != "ttft-p99" || s.Objective != 99 || !strings.Contains(s.SLI.Events.ErrorQuery, "[{{.window}}]") ||
		!strings.Contains(s.SLI.Events.TotalQuery, `outcome=~"good|bad"`) || s.Alerting.Name != "ChatTtftP99ErrorBudgetBurn" ||
		s.Alerting.PageAlert.Labels["severity"] != "page" || s.Alerting.TicketAlert.Labels["severity"] != "ticket" ||
		s.Alerting.Annotations["runbook_url"] != "https://runbooks.example.com/inference/chat#slow-first-token" {
		t.Fatalf("slo %+v", s)
	}
	if !bytes.HasPrefix(b, []byte("# Sloth prometheus/v1 spec")) || !bytes.Contains(b, []byte("--default-slo-period=28d")) {
		t.Fatalf("header:\n%s", b)
	}
}
