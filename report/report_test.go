package report

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/capacity"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/report/reporttest"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
	"github.com/tailgate-llm/tailgate/theater"
)

// The simulator of these tests steps in 2 ms + 0.5 ms per running
// sequence: 16-token answers saturate it at 125 req/s.
func simConfig() sim.Config {
	c := sim.DefaultConfig()
	c.PrefillBase, c.PrefillPerToken = 0, 0
	c.DecodeBase, c.DecodePerSeq = 2*time.Millisecond, 500*time.Microsecond
	c.TruthLimit = -1
	return c
}

func client(t *testing.T, srv *simtest.Server) loadgen.Client {
	c, err := openai.New(openai.Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m", MaxTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mixSource alternates two classes, so the per-class table has rows.
type mixSource struct{ n int }

func (m *mixSource) Next() (*prompts.Prompt, error) {
	m.n++
	if m.n%3 == 0 {
		return &prompts.Prompt{Class: "batch", Text: "summarise this", MaxTokens: 32}, nil
	}
	return &prompts.Prompt{Class: "chat", Text: "hello"}, nil
}

// runDir runs two stages (20 then 150 req/s, the second past capacity)
// with telemetry into a results directory.
func runDir(t *testing.T) string {
	t.Helper()
	srv := simtest.Start(t, simConfig())
	dir := filepath.Join(t.TempDir(), "run")
	spec, err := slo.ParseSpec("slo.yaml", []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: ttft, metric: ttft, threshold: 100ms, target: 90%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	judge := slo.NewJudge(nil, spec)
	res, err := pipeline.Run(context.Background(), pipeline.Spec{Client: client(t, srv), Source: &mixSource{},
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "normal", Rate: 20, Duration: 3 * time.Second}, {Name: "peak", Rate: 150, Duration: 3 * time.Second}},
			Arrival: loadgen.ArrivalPoisson, Seed: 1, Grace: time.Second, Timeout: 10 * time.Second},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 250 * time.Millisecond},
		Theater:   theaterOptions(), Out: results.Dir(dir), Validity: slo.Unbounded()}, pipeline.Func(judge.Add))
	if err != nil {
		t.Fatal(err)
	}
	res.Summary.SLO = judge.Assess(slo.Input{Now: time.Now()})
	if err := results.Dir(dir).WriteSummary(res.Summary); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sweepDir(t *testing.T) string {
	t.Helper()
	srv := simtest.Start(t, simConfig())
	spec, err := slo.ParseSpec("slo.yaml", []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 10ms, target: 90%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sweep")
	_, err = capacity.Run(context.Background(), capacity.Config{Client: client(t, srv), SLO: spec,
		Source:  func() loadgen.Source { return &loadgen.Repeat{Prompt: prompts.Prompt{Class: "chat", Text: "hi"}} },
		Search:  capacity.Search{Levels: []capacity.Level{{Rate: 30}, {Rate: 60}, {Rate: 90}, {Rate: 110}, {Rate: 160}}},
		Arrival: loadgen.ArrivalConstant, Warmup: 300 * time.Millisecond, MinDuration: time.Second, Grace: time.Second,
		Timeout: 10 * time.Second, Validity: slo.Unbounded(), CurrentRate: 50, Growth: &capacity.Growth{PerMonth: 0.08, Text: "8%/month"},
		Telemetry: &telemetry.Config{Scrapes: []telemetry.ScrapeConfig{{URL: srv.URL + "/metrics"}}, Interval: 250 * time.Millisecond},
		Out:       results.Dir(dir)})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// checkHTML checks what a reader relies on: one file, no script, nothing
// fetched, every part there.
func checkHTML(t *testing.T, html string, want ...string) {
	t.Helper()
	// Offline: scripts are inline only, and nothing is loaded from
	// anywhere.
	if regexp.MustCompile(`(?i)<script[^>]*\ssrc\s*=|(src|href)\s*=\s*["']?(https?:)?//|@import|url\(\s*["']?(https?:)?//`).MatchString(html) {
		t.Error("the report loads something")
	}
	if n := strings.Count(html, `class="tg-chart"`); n < 2 {
		t.Errorf("%d interactive charts, want the two over time", n)
	}
	if n := strings.Count(html, "<svg"); n < 4 {
		t.Errorf("%d plots", n)
	}
	for _, w := range want {
		if !strings.Contains(html, w) {
			t.Errorf("the report lacks %q", w)
		}
	}
}

func TestReportOfARunAndASweep(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	run, sw := runDir(t), sweepDir(t)
	out := t.TempDir()
	// Whether the peak stage showed metric theater, and whether any level
	// met the SLO (so there is a headroom), depend on how fast this
	// machine is: the report says what the run's files hold
	// (TestReportSectionsOfASaturatedRun asserts both on a quiet machine).
	sum, err := results.Dir(run).ReadSummary()
	if err != nil {
		t.Fatal(err)
	}
	theaterSays := "No metric theater"
	if sum.MetricTheater != nil && sum.MetricTheater.MetricTheater {
		theaterSays = "Metric theater:"
	}
	swr, err := results.Dir(sw).ReadSweep()
	if err != nil {
		t.Fatal(err)
	}
	sweepWant := []string{"SLO-max", "Knee:", "Latency against load", "r30", "saturated"}
	if swr.Headroom != nil {
		sweepWant = append(sweepWant, "Headroom:")
	}
	for _, c := range []struct {
		name string
		dirs []string
		want []string
	}{
		{"run", []string{run}, []string{"Verdicts", "percentile spectrum", "Per class", "batch", "GPU utilisation", theaterSays, "peak"}},
		// r30, not the top level: a sweep stops at its first saturated
		// level, which a busy machine (the race detector) can bring lower.
		{"sweep", []string{sw}, sweepWant},
	} {
		path := filepath.Join(out, c.name+".html")
		if err := Write(path, FormatHTML, c.dirs, Options{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		b, _ := os.ReadFile(path)
		checkHTML(t, string(b), c.want...)
		if c.name == "sweep" && swr.Headroom == nil && strings.Contains(string(b), "Headroom:") {
			t.Error("a headroom in the report of a sweep without one")
		}
		reporttest.Screenshot(t, path, filepath.Join(out, c.name+".png"))
		// The charts are drawn by the inlined uPlot, offline, each the
		// width of the page (1280 px less the margins).
		reporttest.DOM(t, path, func(t *testing.T, dom string) {
			ws := regexp.MustCompile(`class="chart" data-width="(\d+)"|data-width="(\d+)"`).FindAllStringSubmatch(dom, -1)
			if len(ws) < 2 {
				t.Fatalf("%d charts drawn, want 2", len(ws))
			}
			for _, w := range ws {
				px, _ := strconv.Atoi(w[1] + w[2])
				if px < 1100 || px > 1280 {
					t.Errorf("a chart is %d px wide on a 1280 px page", px)
				}
			}
			if !strings.Contains(dom, "u-legend") {
				t.Error("no uPlot legend in the page")
			}
		})
		md := filepath.Join(out, c.name+".md")
		if err := Write(md, FormatMarkdown, c.dirs, Options{}); err != nil {
			t.Fatal(err)
		}
		b, _ = os.ReadFile(md)
		if !strings.Contains(string(b), "| part |") || strings.Contains(string(b), "<svg") {
			t.Errorf("markdown:\n%s", b)
		}
	}
	// Both overlaid in one report.
	if err := Write(filepath.Join(out, "both.html"), FormatHTML, []string{run, sw}, Options{}); err != nil {
		t.Fatal(err)
	}
}

func theaterOptions() theater.Options { return theater.Options{Bucket: time.Second} }

// A lower-bound SLO-max reads "SLO-max ≥ r16" in the HTML, not as the
// capacity.
func TestSweepLowerBoundInHTML(t *testing.T) {
	t.Parallel()
	sw := &results.Sweep{Mode: "open", Levels: []results.SweepLevel{{Name: "r16", RatePerS: 16, AchievedPerS: 15.3, Pass: true, Valid: true}},
		SLOMax: &results.SweepPoint{Level: "r16", RatePerS: 16, AchievedPerS: 15.3, LowerBound: true, Note: "the SLO-max is at least this"}, LowerBound: true}
	v, err := viewSweep(&Source{Sweep: sw}, false, columnsOf(nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !v.SLOMaxBound || !strings.HasPrefix(v.SLOMax, "≥ r16 (15.3 req/s achieved)") {
		t.Errorf("view: bound %v %q", v.SLOMaxBound, v.SLOMax)
	}
}
