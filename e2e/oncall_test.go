package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/internal/promtest"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// notification is what Alertmanager's webhook sends (the fields used).
type notification struct {
	Status string `json:"status"`
	Alerts []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"alerts"`
}

// webhook is a receiver on loopback that keeps every notification and when
// it came.
type webhook struct {
	mu   sync.Mutex
	got  []notification
	when []time.Time
}

func (w *webhook) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var n notification
	if err := json.Unmarshal(b, &n); err == nil {
		w.mu.Lock()
		w.got, w.when = append(w.got, n), append(w.when, time.Now())
		w.mu.Unlock()
	}
}

// firing is when the first notification with a firing alert of alertname
// came (zero if none), and the alert's annotations.
func (w *webhook) firing(alertname string) (time.Time, map[string]string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, n := range w.got {
		for _, a := range n.Alerts {
			if a.Status == "firing" && a.Labels["alertname"] == alertname {
				return w.when[i], a.Annotations
			}
		}
	}
	return time.Time{}, nil
}

// pages are the distinct page-severity alerts delivered firing, and
// whether any of them was also delivered resolved.
func (w *webhook) pages() (names []string, resolved []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen, res := map[string]bool{}, map[string]bool{}
	for _, n := range w.got {
		for _, a := range n.Alerts {
			if a.Labels["severity"] != "page" {
				continue
			}
			k := a.Labels["alertname"] + "{" + a.Labels["target"] + "}"
			if a.Status == "firing" {
				seen[k] = true
			} else {
				res[k] = true
			}
		}
	}
	for k := range seen {
		names = append(names, k)
	}
	for k := range res {
		resolved = append(resolved, k)
	}
	sort.Strings(names)
	sort.Strings(resolved)
	return names, resolved
}

// On call, end to end with the real parts: a canary probes the simulator;
// Prometheus scrapes it with the rules `tailgate slo rules` makes and
// sends alerts to Alertmanager, configured by `--format alertmanager`,
// which notifies a webhook on loopback. Half the probes fail: both the
// availability objective and the TTFT objective page in Prometheus (a
// failed probe is a bad event for both), and exactly one page reaches
// the webhook, the other inhibited. Then the canary is killed: the
// canary-down page reaches the webhook, and the outage page is not
// resolved while the canary is gone.
func TestOnCallOnePagePerOutageAndCanaryDown(t *testing.T) {
	promtest.Tool(t, "prometheus")
	promtest.AlertmanagerTool(t)
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
	// A short canary-down delay keeps the test short; the default is 2m.
	gen, err := rules.Generate(spec, rules.Options{Version: "test", Selector: `job="tailgate"`, CanaryDownFor: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ruleText, err := gen.Prometheus()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	rulesPath := filepath.Join(dir, "chat.rules.yaml")
	if err := os.WriteFile(rulesPath, ruleText, 0o644); err != nil {
		t.Fatal(err)
	}

	// Alertmanager: the generated route and inhibition, its placeholder
	// receivers pointed at the webhook, and short group timers.
	hook := &webhook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	amText, err := gen.Alertmanager()
	if err != nil {
		t.Fatal(err)
	}
	var am map[string]any
	if err := yaml.Unmarshal(amText, &am); err != nil {
		t.Fatal(err)
	}
	route := am["route"].(map[string]any)
	// group_wait over the evaluation interval (1s here), as the generated
	// 1m is over the usual 30s-1m: the pages of one outage, whose rule
	// groups are evaluated apart, are all in before the first goes out.
	route["group_wait"], route["group_interval"], route["repeat_interval"] = "4s", "1s", "1h"
	for _, r := range am["receivers"].([]any) {
		r.(map[string]any)["webhook_configs"] = []any{map[string]any{"url": hookSrv.URL, "send_resolved": true}}
	}
	amText, err = yaml.Marshal(am)
	if err != nil {
		t.Fatal(err)
	}
	amAddr := promtest.StartAlertmanager(t, amText)

	cfgPath := filepath.Join(dir, "canary.yaml")
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
	var stopOnce sync.Once
	stop := func() {
		stopOnce.Do(func() {
			cancel()
			if err := d.Wait(); err != nil {
				t.Errorf("canary: %v", err)
			}
		})
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("canary log:\n%s", logs.String())
		}
	})

	p := promtest.Start(t, promtest.Options{Target: d.Addr(), RuleFiles: []string{rulesPath}, Alertmanager: amAddr})
	p.WaitScrapes(t, 5, 30*time.Second)
	if v := p.Query(t, `ALERTS{severity="page"}`); len(v) != 0 {
		t.Fatalf("healthy target pages: %v", v)
	}

	// The outage: every second probe fails.
	fault := time.Now()
	if err := srv.SetFaults([]sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 2}}); err != nil {
		t.Fatal(err)
	}
	const errorsPage, ttftPage = "ChatErrorsErrorBudgetBurn", "ChatTtftP99ErrorBudgetBurn"
	var firedAt time.Time
	promtest.WaitFor(t, 60*time.Second, "the errors page firing in Prometheus", func() bool {
		ok := len(p.Query(t, `ALERTS{alertname="`+errorsPage+`",alertstate="firing"}`)) == 1
		if ok {
			firedAt = time.Now()
		}
		return ok
	})
	promtest.WaitFor(t, 60*time.Second, "the errors page at the webhook", func() bool {
		at, _ := hook.firing(errorsPage)
		return !at.IsZero()
	})
	deliveredAt, ann := hook.firing(errorsPage)
	// Both pages fire in Prometheus: that is what on-call got before.
	promtest.WaitFor(t, 60*time.Second, "the TTFT page firing in Prometheus", func() bool {
		return len(p.Query(t, `ALERTS{alertname="`+ttftPage+`",alertstate="firing"}`)) == 1
	})
	before := len(p.Query(t, `ALERTS{severity="page",alertstate="firing"}`))
	// Alertmanager has the TTFT page and holds it back, inhibited.
	promtest.WaitFor(t, 30*time.Second, "Alertmanager to inhibit the TTFT page", func() bool {
		return len(amAlerts(t, amAddr, ttftPage, true)) == 1
	})
	// A few group intervals (1 s) more: still one page delivered. What is
	// held is an absence over that time, so the wait is the behaviour
	// under test; no event marks it.
	time.Sleep(3 * time.Second)
	pages, resolved := hook.pages()
	if len(pages) != 1 || pages[0] != errorsPage+"{sim}" || len(resolved) != 0 {
		t.Fatalf("pages delivered %v (resolved %v); want only %s{sim}", pages, resolved, errorsPage)
	}
	// The page fires on whichever tier crosses first (early in an outage of
	// a young canary, 6× over 30m and 6h); the burn rate is over that.
	burn, err := strconv.ParseFloat(ann["burn_rate"], 64)
	if !strings.HasPrefix(ann["target_url"], srv.URL) || err != nil || burn <= 6 ||
		!strings.HasPrefix(ann["windows"], "[") || strings.Contains(ann["windows"], "held") {
		t.Errorf("page payload: burn_rate %q, windows %q, target_url %q (want the sim's URL %s)",
			ann["burn_rate"], ann["windows"], ann["target_url"], srv.URL)
	}
	t.Logf("outage: page firing in Prometheus %.1fs after the fault, at the webhook %.1fs after; %d pages firing in Prometheus, %d delivered (burn rate %s, windows %s, target %s)",
		firedAt.Sub(fault).Seconds(), deliveredAt.Sub(fault).Seconds(), before, len(pages), ann["burn_rate"], ann["windows"], ann["target_url"])

	// The canary dies.
	killed := time.Now()
	stop()
	promtest.WaitFor(t, 60*time.Second, "the canary-down page at the webhook", func() bool {
		at, _ := hook.firing(rules.AlertCanaryDown)
		return !at.IsZero()
	})
	downAt, _ := hook.firing(rules.AlertCanaryDown)
	if _, resolved := hook.pages(); len(resolved) != 0 {
		t.Errorf("resolved while the canary is gone: %v", resolved)
	}
	if v := p.Query(t, `ALERTS{alertname="`+errorsPage+`",alertstate="firing"}`); len(v) != 1 {
		t.Errorf("the errors page stopped firing while the canary is gone: %v", v)
	}
	t.Logf("canary killed: canary-down page at the webhook %.1fs later (for: 3s)", downAt.Sub(killed).Seconds())
}

// amAlerts are Alertmanager's alerts named alertname, the inhibited ones
// when inhibited (API v2).
func amAlerts(t *testing.T, addr, alertname string, inhibited bool) []any {
	t.Helper()
	q := fmt.Sprintf("http://%s/api/v2/alerts?filter=alertname%%3D%%22%s%%22", addr, alertname)
	resp, err := http.Get(q)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []struct {
		Status struct {
			State       string   `json:"state"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	var got []any
	for _, a := range out {
		if (a.Status.State == "suppressed" && len(a.Status.InhibitedBy) > 0) == inhibited {
			got = append(got, a)
		}
	}
	return got
}

// The generated inhibition on the five alerts one outage raised before it
// (chat.yaml at a 50% error ratio with hours of history: the errors and
// TTFT pages, and the errors, ITL and TPOT tickets), posted to a real
// Alertmanager with their labels from the generated rules: one page is
// delivered, nothing else. A latency-only burn still pages, its ticket
// muted by its page.
func TestInhibitionOneOutageOnePage(t *testing.T) {
	promtest.AlertmanagerTool(t)
	sloPath := "../testdata/slo/chat.yaml"
	spec, err := slo.LoadSpec(sloPath)
	if err != nil {
		t.Fatal(err)
	}
	gen, err := rules.Generate(spec, rules.Options{Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	hook := &webhook{}
	hookSrv := httptest.NewServer(hook)
	t.Cleanup(hookSrv.Close)
	amText, _ := gen.Alertmanager()
	var am map[string]any
	if err := yaml.Unmarshal(amText, &am); err != nil {
		t.Fatal(err)
	}
	route := am["route"].(map[string]any)
	route["group_wait"], route["group_interval"], route["repeat_interval"] = "2s", "1s", "1h"
	for _, r := range am["receivers"].([]any) {
		r.(map[string]any)["webhook_configs"] = []any{map[string]any{"url": hookSrv.URL}}
	}
	amText, _ = yaml.Marshal(am)
	addr := promtest.StartAlertmanager(t, amText)

	// labels of objective's alert of severity, as Prometheus sends them.
	labels := func(objective, severity, target string) map[string]string {
		for _, g := range gen.File.Groups {
			for _, r := range g.Rules {
				if r.Alert != "" && r.Labels["sloth_severity"] == severity && strings.HasSuffix(g.Name, "-"+objective) {
					l := map[string]string{"alertname": r.Alert, "sloth_id": "chat-" + objective, "sloth_service": "chat",
						"sloth_slo": objective, "target": target}
					for k, v := range r.Labels {
						l[k] = v
					}
					return l
				}
			}
		}
		t.Fatalf("no %s alert for %s", severity, objective)
		return nil
	}
	post := func(ls ...map[string]string) {
		var alerts []map[string]any
		for _, l := range ls {
			alerts = append(alerts, map[string]any{"labels": l, "startsAt": time.Now().UTC().Format(time.RFC3339)})
		}
		b, _ := json.Marshal(alerts)
		resp, err := http.Post("http://"+addr+"/api/v2/alerts", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("POST alerts: %s", resp.Status)
		}
	}
	delivered := func(target string) []string {
		hook.mu.Lock()
		defer hook.mu.Unlock()
		var out []string
		for _, n := range hook.got {
			for _, a := range n.Alerts {
				if a.Labels["target"] == target && a.Status == "firing" {
					out = append(out, a.Labels["alertname"]+"/"+a.Labels["severity"])
				}
			}
		}
		sort.Strings(out)
		return out
	}

	// One outage on target a: five alerts raised, the errors page first
	// within the group's wait, as rule groups send them.
	post(labels("errors", "page", "a"), labels("ttft-p99", "page", "a"), labels("errors", "ticket", "a"),
		labels("itl-p95", "ticket", "a"), labels("tpot-p90", "ticket", "a"))
	// A latency-only burn on target b: its page and its ticket.
	post(labels("ttft-p99", "page", "b"), labels("ttft-p99", "ticket", "b"))
	promtest.WaitFor(t, 30*time.Second, "notifications for both targets", func() bool {
		return len(delivered("a")) > 0 && len(delivered("b")) > 0
	})
	// A few group intervals (1 s): nothing more comes. An absence over
	// that time is what is held, so the wait is the behaviour under test.
	time.Sleep(3 * time.Second)
	if got := strings.Join(delivered("a"), ","); got != "ChatErrorsErrorBudgetBurn/page" {
		t.Errorf("outage on a: delivered %s; want the errors page alone (5 alerts raised)", got)
	}
	if got := strings.Join(delivered("b"), ","); got != "ChatTtftP99ErrorBudgetBurn/page" {
		t.Errorf("latency burn on b: delivered %s; want its page alone", got)
	}
	t.Logf("alerts per outage: 5 raised (2 pages, 3 tickets), %d delivered; latency-only burn: 2 raised, %d delivered",
		len(delivered("a")), len(delivered("b")))
}
