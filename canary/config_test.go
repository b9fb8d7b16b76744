package canary

import (
	"bytes"
	"github.com/tailgate-llm/tailgate/exporters/prom"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// writeFiles writes name → content under a temp dir and returns the dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(strings.TrimLeft(body, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const sloFile = `
kind: SLO
name: chat
owner: a@example.com
window: 28d
objectives:
  - {name: ttft, metric: ttft, threshold: 2s, target: 99%}
  - {name: itl, metric: itl, threshold: 1s, target: 95%}
  - {name: errors, metric: error_rate, threshold: 1%}
  - {name: queue, metric: queue_delay, threshold: 300ms, target: 99%}
  - {name: tokens, metric: output_tokens_per_s, threshold: 300}
`

func TestTestdataConfigsLoad(t *testing.T) {
	for _, f := range []string{"sim.yaml", "production.yaml"} {
		c, err := LoadConfig(filepath.Join("..", "testdata", "canary", f))
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if len(c.Targets) == 0 || c.Targets[0].SLO == nil {
			t.Errorf("%s: %+v", f, c)
		}
	}
	c, err := LoadConfig(filepath.Join("..", "testdata", "canary", "production.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Histograms != prom.HistogramsBoth {
		t.Errorf("histograms %q, want the default, both", c.Histograms)
	}
	a, b := c.Targets[0], c.Targets[1]
	if a.Interval != 30*time.Second || a.Jitter != 5*time.Second || a.Schedule() != "every 30s ± 5s" {
		t.Errorf("pool-a schedule from defaults: %s", a.Schedule())
	}
	if b.Rate != 0.1 || b.Interval != 0 || b.Mix == nil {
		t.Errorf("pool-b: rate %v interval %v mix %v", b.Rate, b.Interval, b.Mix)
	}
	if a.Model != "meta-llama/Llama-3.1-8B-Instruct" || a.APIKeyFile != "/var/run/secrets/tailgate/api-key" ||
		len(a.Headers) != 1 || a.Headers[0] != "X-Canary: tailgate" {
		t.Errorf("pool-a from defaults: %+v", a)
	}
	// queue_delay and the floors are left to acceptance, with a warning.
	var warned []string
	for _, w := range c.Warnings {
		if strings.Contains(w, "not judged by the canary") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 2*3 { // two targets × (queue_delay, output tokens, goodput)
		t.Errorf("warnings %q", c.Warnings)
	}
}

func TestConfigErrorsHaveLines(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"kind", "kind: Canery\ntargets: []\n", `canary.yaml:1: kind: "Canery": want Canary`},
		{"no targets", "kind: Canary\ntargets: []\n", "canary.yaml:2: targets: empty"},
		{"unknown field", "kind: Canary\nlisten: 127.0.0.1:1\nlisen: x\ntargets: []\n", "canary.yaml:3: lisen: unknown field"},
		{"listen", "kind: Canary\nlisten: localhost\ntargets: []\n", `canary.yaml:2: listen: "localhost" is not HOST:PORT`},
		{"histograms", "kind: Canary\nhistograms: exponential\ntargets: []\n", `canary.yaml:2: histograms: "exponential": want classic, native or both`},
		{"schedule missing", `kind: Canary
slo: slo.yaml
targets:
  - name: a
    url: http://127.0.0.1:8000
    model: m
`, "canary.yaml:4: targets[0].schedule: missing"},
		{"rate and interval", `kind: Canary
slo: slo.yaml
targets:
  - name: a
    url: http://127.0.0.1:8000
    model: m
    schedule:
      rate: 1
      interval: 5s
`, "canary.yaml:9: targets[0].schedule.interval: give rate or interval, not both"},
		{"jitter above interval", `kind: Canary
slo: slo.yaml
targets:
  - name: a
    url: http://127.0.0.1:8000
    model: m
    schedule: {interval: 5s,
      jitter: 6s}
`, "canary.yaml:8: targets[0].schedule.jitter: 6s is more than the interval 5s"},
		{"bad url", `kind: Canary
slo: slo.yaml
targets:
  - name: a
    url: 127.0.0.1:8000
    model: m
    schedule: {rate: 1}
`, `canary.yaml:5: targets[0].url: "127.0.0.1:8000" is not a URL`},
		{"bad api", `kind: Canary
slo: slo.yaml
targets:
  - name: a
    url: http://h:1
    api: grpc
    model: m
    schedule: {rate: 1}
`, `canary.yaml:6: targets[0].api: "grpc": want one of`},
		{"no model, no slo", `kind: Canary
targets:
  - name: a
    url: http://h:1
    schedule: {rate: 1}
`, "canary.yaml:3: targets[0].model: missing"},
		{"duplicate name", `kind: Canary
slo: slo.yaml
targets:
  - {name: a, url: "http://h:1", model: m, schedule: {rate: 1}}
  - {name: a, url: "http://h:2", model: m, schedule: {rate: 1}}
`, `canary.yaml:5: targets[1]: name "a" is already the name of targets[0]`},
		{"bad duration", "kind: Canary\nevaluation_interval: soon\ntargets: []\n", `canary.yaml:2: evaluation_interval: "soon" is not a duration`},
		{"slo file broken", `kind: Canary
slo: broken.yaml
targets:
  - {name: a, url: "http://h:1", model: m, schedule: {rate: 1}}
`, "broken.yaml:3: objectives"},
		{"trace mix", `kind: Canary
slo: slo.yaml
targets:
  - {name: a, url: "http://h:1", model: m, schedule: {rate: 1}, mix: trace.yaml}
`, "a trace replays its own timestamps"},
		{"web config", `kind: Canary
slo: slo.yaml
web_config: web.yml
targets:
  - {name: a, url: "http://h:1", model: m, schedule: {rate: 1}}
`, "canary.yaml:3: web_config:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"canary.yaml": c.body, "slo.yaml": sloFile,
				"broken.yaml": "kind: SLO\nname: x\nobjectives: 5\nowner: o\n",
				"web.yml":     "tls_server_config:\n  cert_file: missing.crt\n",
				"trace.yaml":  "kind: Mix\nname: t\nclasses:\n  - name: t\n    source: {type: azure, path: t.csv}\n",
				"t.csv":       "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n"})
			_, err := LoadConfig(filepath.Join(dir, "canary.yaml"))
			if err == nil {
				t.Fatalf("no error; want %q", c.want)
			}
			msg := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			if !strings.Contains(msg, c.want) {
				t.Errorf("error:\n%s\nwant it to contain %q", msg, c.want)
			}
		})
	}
}

// The Kubernetes example's ConfigMap holds a canary file and an SLO file
// that load.
func TestKubernetesExampleLoads(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "deploy", "kubernetes", "canary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cm struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&cm); err != nil || cm.Kind != "ConfigMap" {
		t.Fatalf("first document: %v %q", err, cm.Kind)
	}
	dir := t.TempDir()
	for name, body := range cm.Data {
		os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644)
	}
	c, err := LoadConfig(filepath.Join(dir, "canary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != ":9464" || len(c.Targets) != 1 || c.Targets[0].SLO.Name != "chat" {
		t.Errorf("%+v", c)
	}
}

// histograms: picks the forms of the latency histograms /metrics serves.
func TestConfigHistograms(t *testing.T) {
	dir := writeFiles(t, map[string]string{"slo.yaml": sloFile, "canary.yaml": `
kind: Canary
histograms: native
slo: slo.yaml
targets:
  - {name: a, url: "http://127.0.0.1:8000", model: m, schedule: {rate: 1}}
`})
	c, err := LoadConfig(filepath.Join(dir, "canary.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if c.Histograms != prom.HistogramsNative {
		t.Errorf("histograms %q, want native", c.Histograms)
	}
}
