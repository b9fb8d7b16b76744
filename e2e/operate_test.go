package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// The operate path end to end, with nothing stubbed: a canary probes the
// simulator and judges the shipped chat SLO; a real Prometheus scrapes it
// with the rules `tailgate slo rules` generates from the same file loaded.
// Its HTTP API returns the good/bad series, which are the canary's own
// counts; slo:sli_error:ratio_rate5m agrees with them; then the simulator
// fails every second request and the page alert's expression turns true.
func TestOperateCanaryPrometheusAndRules(t *testing.T) {
	promtest.Tool(t, "prometheus")
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
	gen, err := rules.Generate(spec, rules.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ruleText, err := gen.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "chat.rules.yaml")
	cfgPath := filepath.Join(dir, "canary.yaml")
	if err := os.WriteFile(rulesPath, ruleText, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`kind: Canary
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
    schedule: {rate: 20}
`, sloPath, srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
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

	p := promtest.Start(t, promtest.Options{Target: d.Addr(), RuleFiles: []string{rulesPath}})
	p.WaitScrapes(t, 5, 30*time.Second)

	// The good/bad series Prometheus holds are the canary's own counts:
	// read the canary, then Prometheus after its next scrape, then the
	// canary again; the stored value lies between the two readings.
	events := `sum by (outcome) (tailgate_slo_events_total{slo="chat",objective="errors",target="sim"})`
	before := canaryEvents(t, d.Addr(), "errors")
	p.WaitScrapeAfter(t, p.Job, time.Now(), 30*time.Second)
	stored := byOutcome(p.Query(t, events))
	after := canaryEvents(t, d.Addr(), "errors")
	if stored["good"] == 0 {
		t.Fatalf("Prometheus holds no good errors-objective events: %v", stored)
	}
	for _, o := range []string{"good", "bad"} {
		if stored[o] < before[o] || stored[o] > after[o] {
			t.Errorf("%s events: Prometheus %v, canary %v then %v", o, stored[o], before[o], after[o])
		}
	}
	ratio := `slo:sli_error:ratio_rate5m{sloth_service="chat",sloth_slo="errors",target="sim"}`
	if v := p.Query(t, ratio); len(v) != 1 || v[0].Value != 0 {
		t.Fatalf("healthy target: %s = %v, want 0", ratio, v)
	}
	page := pageAlert(t, gen, "errors")
	if v := p.Query(t, page); len(v) != 0 {
		t.Fatalf("healthy target: the page alert is true: %v", v)
	}

	// Every second request fails (503): half the errors-objective events
	// are bad from now on, far above 14.4 × the 1% budget.
	if err := srv.SetFaults([]sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 2}}); err != nil {
		t.Fatal(err)
	}
	promtest.WaitFor(t, 60*time.Second, "page alert for the errors objective", func() bool {
		return len(p.Query(t, page)) == 1
	})
	// The recorded 5m ratio is the ratio of the stored counters' increases
	// over the same range (rate() extrapolates both alike, up to the
	// first scrape's zero-point rule: 0.02).
	// Both at the recorded sample's own time: the ratio rises fast early in
	// the outage, and the rule group ran up to an interval before this
	// query (under -race, a 0.05 difference).
	at := p.Query(t, "timestamp("+ratio+")")
	if len(at) != 1 {
		t.Fatalf("timestamp(%s) = %v", ratio, at)
	}
	// A scrape in progress when the rule ran stores samples stamped
	// before the rule's time but ingested after it (on a loaded machine,
	// a scrape takes a while, and a late one shifts the next): the rule saw
	// the counters as of some instant up to two scrape intervals (1 s each)
	// before its own time, so the ratio lies between the counters' ratios
	// at those two ends.
	got := p.Query(t, fmt.Sprintf("%s @ %.3f", ratio, at[0].Value))
	counters := func(at float64) (ratio, good, bad float64) {
		inc := byOutcome(p.Query(t, fmt.Sprintf(`sum by (outcome) (increase(tailgate_slo_events_total{slo="chat",objective="errors",target="sim"}[5m] @ %.3f))`, at)))
		if inc["good"]+inc["bad"] == 0 {
			t.Fatalf("no errors-objective events in the 5m before %.3f: %v", at, inc)
		}
		return inc["bad"] / (inc["good"] + inc["bad"]), inc["good"], inc["bad"]
	}
	if len(got) != 1 {
		t.Fatalf("%s = %v", ratio, got)
	}
	want, good, bad := counters(at[0].Value)
	earlier, _, _ := counters(at[0].Value - 2)
	if lo, hi := min(want, earlier)-0.02, max(want, earlier)+0.02; got[0].Value < lo || got[0].Value > hi {
		t.Errorf("%s = %.4f; the stored counters give %.4f (bad %v, good %v), %.4f two scrapes earlier", ratio, got[0].Value, want, bad, good, earlier)
	}
	// And the canary's own 5m window, judged in process, says the same
	// within what it counted before Prometheus first scraped it.
	st := d.Status()
	var own *canary.WindowStatus
	for _, tg := range st.Targets {
		for _, o := range tg.Objectives {
			if o.Name == "errors" {
				for i := range o.Windows {
					if o.Windows[i].Window == "5m" {
						own = &o.Windows[i]
					}
				}
			}
		}
	}
	if own == nil {
		t.Fatalf("/status has no 5m window for the errors objective: %+v", st)
	}
	if math.Abs(own.ErrorRatio-got[0].Value) > 0.1 {
		t.Errorf("canary's own 5m error ratio %.4f (good %d bad %d), Prometheus %.4f", own.ErrorRatio, own.Good, own.Bad, got[0].Value)
	}
	t.Logf("after faults: Prometheus ratio_rate5m %.4f, counters %.4f, canary %.4f (good %d bad %d); page alert true",
		got[0].Value, want, own.ErrorRatio, own.Good, own.Bad)
}

// pageAlert is the expression of the page-severity alert for objective.
func pageAlert(t *testing.T, gen *rules.Result, objective string) string {
	t.Helper()
	for _, s := range gen.SLOs {
		if s.Name != objective {
			continue
		}
		for _, g := range gen.File.Groups {
			for _, r := range g.Rules {
				if r.Alert == s.AlertName && r.Labels["severity"] == "page" {
					return r.Expr
				}
			}
		}
	}
	t.Fatalf("no page alert for %s in the generated rules", objective)
	return ""
}

// canaryEvents scrapes the canary's /metrics: its errors-objective events
// by outcome.
func canaryEvents(t *testing.T, addr, objective string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	f := fams[prom.SLOEventsTotal]
	if f == nil {
		t.Fatalf("canary /metrics has no %s", prom.SLOEventsTotal)
	}
	for _, m := range f.GetMetric() {
		l := labels(m)
		if l["objective"] == objective && l["target"] == "sim" {
			out[l["outcome"]] += m.GetCounter().GetValue()
		}
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

func byOutcome(v []promtest.Sample) map[string]float64 {
	out := map[string]float64{}
	for _, s := range v {
		out[s.Metric["outcome"]] += s.Value
	}
	return out
}
