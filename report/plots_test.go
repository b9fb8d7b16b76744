package report

import (
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot/plotter"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/theater"
)

func TestSplitBreaksAtGapsAndBreaks(t *testing.T) {
	t.Parallel()
	xys := plotter.XYs{{X: 0.5}, {X: 1.5}, {X: 2.5}, {X: 6.5}, {X: 7.5}, {X: 8.5}}
	got := split(xys, 1.5, []float64{8})
	if len(got) != 3 || len(got[0]) != 3 || len(got[1]) != 2 || len(got[2]) != 1 {
		t.Fatalf("pieces %v", got)
	}
	if split(nil, 1, nil) != nil {
		t.Error("nothing to split")
	}
}

// A sweep of three levels run out of load order, with telemetry but no GPU
// gauge, and a metric-theater bucket that runs past its level's end.
func sweepSource() *Source {
	mk := func(name string, span time.Duration) *Part {
		p := &Part{Name: name, Span: span, Summary: &results.Summary{}}
		for i := 0; i < 20; i++ {
			at := time.Duration(i) * span / 20
			p.Reqs = append(p.Reqs, req{stage: name, intended: at, end: at + 50*time.Millisecond, ok: true, ttft: 10, e2e: 50})
			p.Tel = append(p.Tel, telPoint{t: at, waiting: 1, hasWaiting: true})
		}
		return p
	}
	a, b, c := mk("r20", 6*time.Second), mk("r10", 6*time.Second), mk("r40", 6*time.Second)
	b.Summary.MetricTheater = &theater.Section{Buckets: []theater.Bucket{{FromS: 2.486348, ToS: 12.486348, Flag: true, Why: "busy"}}}
	src := &Source{Dir: "sw", Kind: KindSweep, Parts: []*Part{a, b, c},
		Sweep: &results.Sweep{Mode: "open", Levels: []results.SweepLevel{{Name: "r20", RatePerS: 20}, {Name: "r10", RatePerS: 10}, {Name: "r40", RatePerS: 40}}}}
	var off time.Duration
	for _, p := range src.Parts {
		p.shift(off)
		off += p.Span
	}
	return src
}

func TestSweepPageFixes(t *testing.T) {
	t.Parallel()
	pg, err := build([]*Source{sweepSource()}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	sv := pg.Sources[0]
	var order []string
	for _, p := range sv.Parts {
		order = append(order, p.Name)
	}
	if strings.Join(order, ",") != "r10,r20,r40" {
		t.Errorf("summary rows %v, want load order", order)
	}
	// The bucket 2.49–12.49 s of r10 (which runs 6–12 s) is clipped to
	// the level and printed to a tenth of a second.
	if len(sv.Theater) != 1 || sv.Theater[0].When != "8.5–12.0 s" {
		t.Errorf("theater %+v", sv.Theater)
	}
	if sv.GPUMeasured {
		t.Error("no GPU gauge, yet GPU utilisation counts as measured")
	}
	var html strings.Builder
	if err := pageTemplate.Execute(&html, pg); err != nil {
		t.Fatal(err)
	}
	h := html.String()
	if !strings.Contains(h, "GPU utilisation was not measured") || strings.Contains(h, "No metric theater") {
		t.Error("the page claims no metric theater without GPU data")
	}
	if strings.Contains(h, ">GPU utilisation</text>") {
		t.Error("an empty GPU panel was drawn")
	}
	// Latency over time: one piece per level, each within its level
	// (no line joins two levels). Completions are counted by end time
	// over the whole sweep, one line through the levels (which run one
	// after another), within the sweep.
	ot := overTime(sweepSource())
	if len(ot.ttft50) != 3 || len(ot.completed) != 1 {
		t.Fatalf("%d TTFT pieces, %d throughput pieces over 3 levels", len(ot.ttft50), len(ot.completed))
	}
	for _, xy := range ot.completed[0] {
		if xy.X < 0 || xy.X > 18.5 {
			t.Errorf("a completions point at %v s, outside the sweep", xy.X)
		}
	}
	for i, piece := range ot.ttft50 {
		lo, hi := 6*float64(i%3), 6*float64(i%3+1)
		for _, xy := range piece {
			if xy.X < lo || xy.X > hi {
				t.Errorf("level %d piece has a point at %v s, outside %v–%v", i, xy.X, lo, hi)
			}
		}
	}
}
