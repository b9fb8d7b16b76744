package report

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/plot/plotter"
)

// The vendored uPlot is the release its README names, byte for byte.
func TestVendoredUPlot(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("assets/uplot/README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"uPlot.iife.min.js", "uPlot.min.css", "LICENSE"} {
		b, err := os.ReadFile("assets/uplot/" + f)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if d := hex.EncodeToString(sum[:]); !strings.Contains(string(readme), "| "+f+" |") || !strings.Contains(string(readme), d) {
			t.Errorf("%s: sha256 %s is not the one assets/uplot/README.md names", f, d)
		}
	}
	if !strings.Contains(uplotJS, "uPlot") || len(uplotCSS) == 0 {
		t.Error("the embedded uPlot is empty")
	}
}

// A chart's series are aligned on the union of their x values, with
// nulls where a series has no point, so no line joins two parts.
func TestChartAlignsSeries(t *testing.T) {
	t.Parallel()
	type s = struct {
		label  string
		dashed bool
		pieces []plotter.XYs
	}
	c := newChart("t", "s", "ms", []boundary{{at: 2e9, name: "b"}},
		s{"a", false, []plotter.XYs{{{X: 0.5, Y: 1}, {X: 1.5, Y: 2}}, {{X: 3.5, Y: 4}}}},
		s{"b", true, []plotter.XYs{{{X: 1.5, Y: 20}, {X: 2.5, Y: 30}}}})
	if want := []float64{0.5, 1.5, 2.5, 3.5}; !slices.Equal(c.X, want) {
		t.Fatalf("x %v, want %v", c.X, want)
	}
	val := func(p *float64) float64 {
		if p == nil {
			return -1
		}
		return *p
	}
	var a, b []float64
	for i := range c.X {
		a, b = append(a, val(c.Series[0].Y[i])), append(b, val(c.Series[1].Y[i]))
	}
	if !slices.Equal(a, []float64{1, 2, -1, 4}) || !slices.Equal(b, []float64{-1, 20, 30, -1}) || !c.Series[1].Dashed {
		t.Errorf("series a %v, b %v (-1: null)", a, b)
	}
	if len(c.Marks) != 1 || c.Marks[0].X != 2 || c.Marks[0].Name != "b" {
		t.Errorf("marks %+v", c.Marks)
	}
}
