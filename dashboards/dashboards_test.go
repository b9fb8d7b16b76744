package dashboards

import (
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"

	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/slo/rules"
)

// sloFiles are the SLO files whose generated rules the dashboards read and
// whose expressions are checked too.
var sloFiles = []string{"../testdata/slo/chat.yaml", "../testdata/slo/chat-28d.yaml"}

type panel struct {
	Type       string          `json:"type"`
	Title      string          `json:"title"`
	ID         int             `json:"id"`
	Datasource *datasource     `json:"datasource"`
	Targets    []target        `json:"targets"`
	Panels     []panel         `json:"panels"`
	GridPos    json.RawMessage `json:"gridPos"`
}

type target struct {
	Expr       string      `json:"expr"`
	RefID      string      `json:"refId"`
	Datasource *datasource `json:"datasource"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Inputs        []struct {
		Name, Type, PluginID string
	} `json:"__inputs"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
}

func load(t *testing.T, name string) dashboard {
	t.Helper()
	b, err := Read(name)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return d
}

// all is every panel, rows' nested ones included, in order.
func (d dashboard) all() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// expr is one PromQL expression found in a dashboard or rule file, with
// where it came from.
type expr struct{ where, text string }

func (d dashboard) exprs(file string) []expr {
	var out []expr
	for _, p := range d.all() {
		for _, tg := range p.Targets {
			out = append(out, expr{fmt.Sprintf("%s: panel %q target %s", file, p.Title, tg.RefID), tg.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct{ Query string }
		if err := json.Unmarshal(v.Query, &q); err != nil {
			var s string
			json.Unmarshal(v.Query, &s)
			q.Query = s
		}
		if e, ok := variableExpr(q.Query); ok {
			out = append(out, expr{fmt.Sprintf("%s: variable %s", file, v.Name), e})
		}
	}
	return out
}

var labelValuesRE = regexp.MustCompile(`^\s*label_values\((.+),\s*[A-Za-z_][A-Za-z0-9_]*\s*\)\s*$`)

// variableExpr is the PromQL inside a Grafana variable query:
// label_values(SELECTOR, label) or query_result(EXPR).
func variableExpr(q string) (string, bool) {
	if m := labelValuesRE.FindStringSubmatch(q); m != nil {
		return m[1], true
	}
	if e, ok := strings.CutPrefix(strings.TrimSpace(q), "query_result("); ok {
		return strings.TrimSuffix(strings.TrimSpace(e), ")"), true
	}
	return "", false
}

var grafanaVarRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[^}]*)?\}?`)

// substitute replaces Grafana's variables with values PromQL parses: the
// interval variables with 5m, every other one (they stand in label
// matchers' strings) with x.
func substitute(e string) string {
	return grafanaVarRE.ReplaceAllStringFunc(e, func(v string) string {
		name := grafanaVarRE.FindStringSubmatch(v)[1]
		switch name {
		case "__rate_interval", "__interval", "__range":
			return "5m"
		}
		return "x"
	})
}

// selectorNames parses e and returns the metric name of every selector in
// it; a selector without a fixed name is an error, as the test could not
// check it.
func selectorNames(e string) ([]string, error) {
	ast, err := parser.NewParser(parser.Options{}).ParseExpr(e)
	if err != nil {
		return nil, err
	}
	var names []string
	var bad error
	parser.Inspect(ast, func(n parser.Node, _ []parser.Node) error {
		vs, ok := n.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		name := vs.Name
		if name == "" {
			for _, m := range vs.LabelMatchers {
				if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
					name = m.Value
				}
			}
		}
		if name == "" {
			bad = fmt.Errorf("selector %s names no metric", vs)
		}
		names = append(names, name)
		return nil
	})
	return names, bad
}

// generated are the SLO rule files for sloFiles, and the names they record.
func generated(t *testing.T) (map[string]bool, []expr) {
	t.Helper()
	recorded := map[string]bool{}
	var exprs []expr
	for _, f := range sloFiles {
		spec, err := slo.LoadSpec(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := rules.Generate(spec, rules.Options{Version: "test"})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range r.File.Groups {
			for _, rule := range g.Rules {
				if rule.Record != "" {
					recorded[rule.Record] = true
				}
				name := rule.Record + rule.Alert
				exprs = append(exprs, expr{fmt.Sprintf("%s: group %s rule %s", f, g.Name, name), rule.Expr})
			}
		}
		for _, s := range r.SLOs {
			for _, q := range []string{s.ErrorQuery("{{.window}}"), s.TotalQuery("{{.window}}")} {
				exprs = append(exprs, expr{fmt.Sprintf("%s: Sloth spec %s", f, s.Name), strings.ReplaceAll(q, "{{.window}}", "5m")})
			}
		}
	}
	return recorded, exprs
}

func TestMetricsListedOnce(t *testing.T) {
	seen := map[string]bool{}
	for _, m := range metricsTable {
		if seen[m.Name] {
			t.Errorf("%s listed twice", m.Name)
		}
		seen[m.Name] = true
		if m.Type == Histogram && strings.HasSuffix(m.Name, "_bucket") {
			t.Errorf("%s: list a histogram by its base name", m.Name)
		}
	}
	for _, n := range []string{"tailgate_ttft_seconds_bucket", "tailgate_ttft_seconds", "vllm:request_queue_time_seconds_count", rules.EventsMetric} {
		if _, ok := Find(n); !ok {
			t.Errorf("Find(%s): not found", n)
		}
	}
	if _, ok := Find("tailgate_requests_total_bucket"); ok {
		t.Error("a counter has no _bucket series")
	}
}

// Every PromQL expression in the dashboards and in the generated rules
// parses, and every selector in it names a listed metric or a rule that
// tailgate slo rules records.
func TestExpressionsNameOnlyListedMetrics(t *testing.T) {
	recorded, exprs := generated(t)
	for _, name := range Names() {
		exprs = append(exprs, load(t, name).exprs(name)...)
	}
	if len(exprs) < 50 {
		t.Fatalf("only %d expressions found: is the walk missing some?", len(exprs))
	}
	used := map[string]bool{}
	for _, e := range exprs {
		names, err := selectorNames(substitute(e.text))
		if err != nil {
			t.Errorf("%s: %v\n  %s", e.where, err, e.text)
			continue
		}
		for _, n := range names {
			if _, ok := Find(n); !ok && !recorded[n] {
				t.Errorf("%s: %q is neither a listed metric (dashboards.Metrics) nor a generated recording rule\n  %s", e.where, n, e.text)
			}
			used[n] = true
		}
	}
	// The dashboards read the SLO rules they are for.
	for _, n := range []string{"slo:period_error_budget_remaining:ratio", "slo:sli_error:ratio_rate1h", "slo:current_burn_rate:ratio"} {
		if !used[n] {
			t.Errorf("no dashboard reads %s", n)
		}
	}
}

// The check above must be able to fail: an unknown metric, a selector
// without a name and bad PromQL are each caught.
func TestSelectorCheckCatches(t *testing.T) {
	names, err := selectorNames(substitute(`rate(tailgate_ttft_secnds_bucket{target=~"$target"}[$__rate_interval])`))
	if err != nil || len(names) != 1 {
		t.Fatalf("%v %v", names, err)
	}
	if _, ok := Find(names[0]); ok {
		t.Fatal("a misspelt metric was found")
	}
	if _, err := selectorNames(`sum({target="a"})`); err == nil {
		t.Error("a selector without a metric name passed")
	}
	if _, err := selectorNames(`sum(rate(x[5m])`); err == nil {
		t.Error("unbalanced parentheses parsed")
	}
	if got := substitute(`x{a=~"${class:regex}"}[$__rate_interval]`); got != `x{a=~"x"}[5m]` {
		t.Errorf("substitute: %s", got)
	}
}

// A panel that reads a tailgate histogram's classic buckets reads its
// native form in the same query, so it answers whichever form Prometheus
// stored (2.42 with native histograms on keeps only the native one).
func TestLatencyQueriesHaveBothHistogramPaths(t *testing.T) {
	n := 0
	for _, name := range Names() {
		for _, e := range load(t, name).exprs(name) {
			names, err := selectorNames(substitute(e.text))
			if err != nil {
				continue // reported above
			}
			has := map[string]bool{}
			for _, s := range names {
				has[s] = true
			}
			for s := range has {
				base, ok := strings.CutSuffix(s, "_bucket")
				if m, found := Find(base); !ok || !found || m.Exporter != "tailgate" {
					continue
				}
				n++
				if !has[base] {
					t.Errorf("%s: reads %s but not the native %s\n  %s", e.where, s, base, e.text)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no latency query found")
	}
}

func TestDashboardShape(t *testing.T) {
	if got := strings.Join(Names(), ","); got != "canary.json,capacity.json" {
		t.Fatalf("dashboards %s", got)
	}
	uids := map[string]bool{}
	for _, name := range Names() {
		d := load(t, name)
		if d.SchemaVersion < 36 || d.UID == "" || uids[d.UID] || d.Title == "" {
			t.Errorf("%s: schemaVersion %d, uid %q, title %q", name, d.SchemaVersion, d.UID, d.Title)
		}
		uids[d.UID] = true
		if len(d.Inputs) != 1 || d.Inputs[0].Name != "DS_PROMETHEUS" || d.Inputs[0].PluginID != "prometheus" {
			t.Errorf("%s: __inputs %+v, want one DS_PROMETHEUS prometheus input", name, d.Inputs)
		}
		ids := map[int]bool{}
		for _, p := range d.all() {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", name, p.ID)
			}
			ids[p.ID] = true
			if p.Type == "row" {
				continue
			}
			if p.Datasource == nil || p.Datasource.UID != "${DS_PROMETHEUS}" {
				t.Errorf("%s: panel %q datasource %+v, want uid ${DS_PROMETHEUS}", name, p.Title, p.Datasource)
			}
			for _, tg := range p.Targets {
				if tg.Datasource == nil || tg.Datasource.UID != "${DS_PROMETHEUS}" || tg.Expr == "" {
					t.Errorf("%s: panel %q target %s: datasource %+v, expr %q", name, p.Title, tg.RefID, tg.Datasource, tg.Expr)
				}
			}
		}
		for _, v := range d.Templating.List {
			if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${DS_PROMETHEUS}") {
				t.Errorf("%s: variable %s datasource %+v", name, v.Name, v.Datasource)
			}
		}
	}
	// The canary dashboard leads with the SLO, then latency, then errors.
	var rows []string
	for _, p := range load(t, "canary.json").Panels {
		if p.Type == "row" {
			rows = append(rows, p.Title)
		}
	}
	want := []string{"SLO status", "Latency percentiles by class", "Requests and errors"}
	if strings.Join(rows, "|") != strings.Join(want, "|") {
		t.Errorf("canary rows %q, want %q", rows, want)
	}
	// The capacity dashboard puts GPU utilisation beside queue delay and TTFT.
	var first []string
	for _, p := range load(t, "capacity.json").Panels[1:4] {
		names := map[string]bool{}
		for _, tg := range p.Targets {
			ns, _ := selectorNames(substitute(tg.Expr))
			for _, n := range ns {
				names[n] = true
			}
		}
		var ns []string
		for n := range names {
			ns = append(ns, n)
		}
		sort.Strings(ns)
		first = append(first, strings.Join(ns, "+"))
	}
	if got := strings.Join(first, " | "); !strings.Contains(got, "DCGM_FI_DEV_GPU_UTIL") ||
		!strings.Contains(got, "vllm:request_queue_time_seconds_bucket") || !strings.Contains(got, "vllm:time_to_first_token_seconds_bucket") {
		t.Errorf("capacity's first row reads %s", got)
	}
}

// The panels titled "no rules needed" work on a Prometheus without the
// generated rules: they, and every variable they use, read tailgate's own
// metrics only, never a recording rule's (slo:…, sloth_…).
func TestNoRulesNeededPanelsReadOnlyTailgate(t *testing.T) {
	for _, name := range Names() {
		d := load(t, name)
		vars := map[string]string{}
		for _, e := range d.exprs(name) {
			if v, ok := strings.CutPrefix(e.where, name+": variable "); ok {
				vars[v] = e.text
			}
		}
		n := 0
		for _, p := range d.all() {
			if !strings.Contains(p.Title, "no rules needed") {
				continue
			}
			n++
			for _, tg := range p.Targets {
				texts := []string{tg.Expr}
				for v, e := range vars {
					if strings.Contains(tg.Expr, "$"+v) {
						texts = append(texts, e)
					}
				}
				for _, x := range texts {
					if strings.Contains(x, "slo:") || strings.Contains(x, "sloth_") {
						t.Errorf("%s: panel %q (no rules needed) reads a rule's series: %s", name, p.Title, x)
					}
				}
			}
		}
		if name == "canary.json" && n < 2 {
			t.Errorf("canary.json: %d panels titled \"no rules needed\", want the canary's own burn rates and budget", n)
		}
	}
}
