package e2e

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// Scheduled runs pushed to a real Pushgateway beside a canary, both
// scraped by a real Prometheus, with the same target label: each push
// replaces the counters with one run's totals, which rate() reads as jumps
// and resets. The rules made with --selector 'job="canary"' read the
// canary's series only: the recorded 5m ratio of the healthy canary is 0,
// never NaN, while the same SLI without the selector is polluted by the
// pushed runs' failures.
func TestPushedRunsBesideTheCanary(t *testing.T) {
	promtest.Tool(t, "prometheus")
	pg := promtest.StartPushgateway(t)
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 20*time.Millisecond, 2*time.Millisecond
	srv := simtest.Start(t, cfg)

	sloPath, err := filepath.Abs("../testdata/slo/chat.yaml")
	if err != nil {
		t.Fatal(err)
	}
	spec, err := slo.LoadSpec(sloPath)
	if err != nil {
		t.Fatal(err)
	}
	selected, err := rules.Generate(spec, rules.Options{Version: "test", Selector: `job="canary"`})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rules.Generate(spec, rules.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	text, _ := selected.Prometheus()
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "chat.rules.yaml")
	os.WriteFile(rulesPath, text, 0o644)
	cfgPath := filepath.Join(dir, "canary.yaml")
	os.WriteFile(cfgPath, []byte(fmt.Sprintf(`kind: Canary
apiVersion: tailgate/v1
listen: 127.0.0.1:0
evaluation_interval: 500ms
slo: %s
targets:
  - name: sim
    url: %s
    model: sim-llama-8b
    max_tokens: 8
    timeout: 2s
    schedule: {rate: 10}
`, sloPath, srv.URL)), 0o644)
	logs := &syncbuf.Buffer{}
	d, err := canary.New(cfgPath, canary.Options{Version: "test", Log: logs, StopTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := d.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		if err := d.Wait(); err != nil {
			t.Errorf("canary: %v", err)
		}
		if t.Failed() {
			t.Logf("canary log:\n%s", logs.String())
		}
	})
	p := promtest.Start(t, promtest.Options{Target: d.Addr(), Job: "canary", RuleFiles: []string{rulesPath}, Pushgateway: pg})
	p.WaitScrapes(t, 3, 30*time.Second)

	// Twelve scheduled runs, one a second, each pushing its own totals:
	// run i had 10+i requests, a third of them failed.
	epoch := time.Now()
	for i := 0; i < 12; i++ {
		m := prom.New(prom.Options{Specs: []*slo.Spec{spec}, Version: "test"})
		sink := m.NewSink(prom.SinkOptions{Target: "sim", Specs: []*slo.Spec{spec}})
		for j := 0; j < 10+i; j++ {
			r := loadgen.NewRecord(epoch)
			r.Class, r.End = "default", 100*time.Millisecond
			if j%3 == 0 {
				r.ErrorKind = loadgen.ErrServer
			} else {
				r.OutputTokens, r.TokenSource = 2, loadgen.TokensFromUsage
				r.Chunks = []loadgen.Chunk{{At: 50 * time.Millisecond, Tokens: 1}, {At: 60 * time.Millisecond, Tokens: 1}}
			}
			r.Finalize()
			sink.Add(r)
		}
		if err := prom.Push(ctx, "http://"+pg, "sim", m.Registry(), nil); err != nil {
			t.Fatal(err)
		}
		// Each run's counts are scraped before the next replaces them.
		p.WaitScrapeAfter(t, "pushgateway", time.Now(), 30*time.Second)
	}
	pushed := p.Query(t, `tailgate_slo_events_total{job="tailgate",target="sim",objective="errors",outcome="bad"}`)
	// The last run: 21 requests, every third failed (j = 0, 3, …, 18).
	if len(pushed) != 1 || pushed[0].Value != 7 {
		t.Fatalf("pushed bad events %v, want the last run's 7", pushed)
	}
	ratio := `slo:sli_error:ratio_rate5m{sloth_service="chat",sloth_slo="errors",target="sim"}`
	got := p.Query(t, ratio)
	if len(got) != 1 || math.IsNaN(got[0].Value) || got[0].Value != 0 {
		t.Fatalf("with --selector: %s = %v, want the healthy canary's 0", ratio, got)
	}
	var errorsSLO rules.SLO
	for _, s := range plain.SLOs {
		if s.Name == "errors" {
			errorsSLO = s
		}
	}
	mixed := p.Query(t, fmt.Sprintf("(%s) / (%s)", errorsSLO.ErrorQuery("5m"), errorsSLO.TotalQuery("5m")))
	if len(mixed) != 1 || !(math.IsNaN(mixed[0].Value) || mixed[0].Value > 0.01) {
		t.Fatalf("without the selector the pushed runs should pollute the SLI; got %v", mixed)
	}
	t.Logf("5m error ratio of the healthy canary: %v with --selector 'job=\"canary\"', %v without (pushed runs mixed in)", got[0].Value, mixed[0].Value)
}
