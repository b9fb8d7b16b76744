package report

import (
	"encoding/xml"
	"errors"
	"fmt"
	"image/color"
	"io"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// frameColor outlines each panel's data area in the legend tests; no
// plot of the report draws in it.
var frameColor = color.RGBA{R: 1, G: 2, B: 3, A: 255}

// frame outlines the data area it is given, so the test reads each
// panel's data rectangle from the SVG itself.
type frame struct{}

func (frame) Plot(c draw.Canvas, _ *plot.Plot) {
	c.StrokeLines(draw.LineStyle{Color: frameColor, Width: vg.Points(0.1)}, []vg.Point{c.Min, {X: c.Max.X, Y: c.Min.Y}, c.Max, {X: c.Min.X, Y: c.Max.Y}, c.Min})
}

type svgText struct {
	text     string
	x, y     float64 // the baseline's start, origin at the bottom left
	inLegend bool    // inside a group of class tg-legend
}

type svgDoc struct {
	w, h   float64
	frames []vg.Rectangle
	texts  []svgText
}

// parseSVG reads the frames and texts of an SVG drawn by svgOf.
func parseSVG(t *testing.T, s string) svgDoc {
	t.Helper()
	var doc svgDoc
	dec := xml.NewDecoder(strings.NewReader(s))
	var legend []bool // per open group: of class tg-legend
	inLegend := func() bool {
		for _, l := range legend {
			if l {
				return true
			}
		}
		return false
	}
	attr := func(e xml.StartElement, name string) string {
		for _, a := range e.Attr {
			if a.Name.Local == name {
				return a.Value
			}
		}
		return ""
	}
	num := func(v string) float64 {
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			t.Fatalf("number %q: %v", v, err)
		}
		return f
	}
	frameStroke := fmt.Sprintf("stroke:#%02X%02X%02X", frameColor.R, frameColor.G, frameColor.B)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG does not parse: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch e.Name.Local {
			case "svg":
				vb := strings.Fields(attr(e, "viewBox"))
				if len(vb) != 4 {
					t.Fatalf("viewBox %q", attr(e, "viewBox"))
				}
				doc.w, doc.h = num(vb[2]), num(vb[3])
			case "g":
				legend = append(legend, attr(e, "class") == "tg-legend")
			case "path":
				if !strings.Contains(attr(e, "style"), frameStroke) {
					continue
				}
				r := vg.Rectangle{Min: vg.Point{X: 1e9, Y: 1e9}, Max: vg.Point{X: -1e9, Y: -1e9}}
				for _, pt := range strings.FieldsFunc(attr(e, "d"), func(r rune) bool { return r == 'M' || r == 'L' || r == 'Z' }) {
					xy := strings.Split(pt, ",")
					if len(xy) != 2 {
						t.Fatalf("path point %q", pt)
					}
					x, y := vg.Length(num(xy[0])), vg.Length(num(xy[1]))
					r.Min.X, r.Min.Y, r.Max.X, r.Max.Y = min(r.Min.X, x), min(r.Min.Y, y), max(r.Max.X, x), max(r.Max.Y, y)
				}
				doc.frames = append(doc.frames, r)
			case "text":
				var body string
				if err := dec.DecodeElement(&body, &e); err != nil {
					t.Fatal(err)
				}
				// vgsvg writes y negated, under transform="scale(1, -1)".
				doc.texts = append(doc.texts, svgText{text: body, x: num(attr(e, "x")), y: -num(attr(e, "y")), inLegend: inLegend()})
			}
		case xml.EndElement:
			if e.Name.Local == "g" && len(legend) > 0 {
				legend = legend[:len(legend)-1]
			}
		}
	}
	return doc
}

// textBox is where a legend label's text is drawn: from the baseline's
// start, as wide as the text and from descent to ascent.
func textBox(tx svgText) vg.Rectangle {
	sty := newPlot("", "", "").Legend.TextStyle
	ext := sty.FontExtents()
	x, y := vg.Length(tx.x), vg.Length(tx.y)
	return vg.Rectangle{
		Min: vg.Point{X: x, Y: y - ext.Descent},
		Max: vg.Point{X: x + sty.Rectangle(tx.text).Max.X, Y: y + ext.Ascent},
	}
}

func overlaps(a, b vg.Rectangle) bool {
	return a.Min.X < b.Max.X && b.Min.X < a.Max.X && a.Min.Y < b.Max.Y && b.Min.Y < a.Max.Y
}

func legendSources() (util *Source, sweep *Source) {
	util = sweepSource()
	for _, part := range util.Parts {
		for i := range part.Tel {
			tp := &part.Tel[i]
			tp.gpu, tp.hasGPU = 0.5+0.01*float64(i), true
			tp.queueMs, tp.hasQueue = float64(i), true
		}
	}
	sweep = sweepSource()
	for i := range sweep.Sweep.Levels {
		l := &sweep.Sweep.Levels[i]
		l.LatencyMs = map[string]schema.Hist{measure.MetricTTFT: {P50: 10 * l.RatePerS, P99: 30 * l.RatePerS}}
		l.AchievedPerS = 0.9 * l.RatePerS
		good := 0.8 * l.RatePerS
		l.GoodputPerS = &good
	}
	sweep.Sweep.Knee = &results.SweepPoint{Level: "r20", RatePerS: 20}
	return util, sweep
}

// Every legend label of every static plot is drawn outside every panel's
// data area, beside one, inside the SVG and in the tg-legend group; a label too wide
// for the legend column is cut short, and a legend taller than its panel's
// data area makes the panel taller.
func TestLegendsOutsideDataAreas(t *testing.T) {
	t.Parallel()
	util, sweep := legendSources()
	long := strings.Repeat("a very long name of a run directory ", 6)
	values := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = float64(i + 1)
		}
		return v
	}
	var many []spectrumSeries
	var manyLabels []string
	for i := range 30 {
		many = append(many, spectrumSeries{label: fmt.Sprintf("s%02d", i), values: values(10 + i)})
		manyLabels = append(manyLabels, fmt.Sprintf("s%02d (n=%d)", i, 10+i))
	}
	cases := []struct {
		name   string
		plots  []*plot.Plot
		labels []string // drawn whole
		cut    []string // cut short: the text begins with it and ends with an ellipsis
	}{
		{"over time", overTimePlots(sweepSource()), []string{"TTFT p50", "TTFT p99", "E2E p50", "E2E p99", "completed/s"}, nil},
		{"utilisation", utilisationPlots(util, nil), []string{"GPU util (mean over GPUs)", "queue delay (mean per interval, ms)", "waiting requests", "TTFT p99"}, nil},
		{"sweep", sweepPlots(sweep, []measure.Column{{Metric: measure.MetricTTFT, Label: "TTFT p50", Q: 0.5}, {Metric: measure.MetricTTFT, Label: "TTFT p99", Q: 0.99}}),
			[]string{"TTFT p50", "TTFT p99", "achieved", "goodput", "offered"}, nil},
		{"spectrum", []*plot.Plot{spectrumPlot("TTFT percentile spectrum", []spectrumSeries{{label: "base", values: values(1000)}, {label: long, values: values(50), total: 500}})},
			[]string{"base (n=1000)"}, []string{"a very long name"}},
		{"spectrum, many series", []*plot.Plot{spectrumPlot("TTFT percentile spectrum", many)}, manyLabels, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range tc.plots {
				p.Add(frame{})
			}
			s, err := svgOf(tc.plots...)
			if err != nil {
				t.Fatal(err)
			}
			doc := parseSVG(t, string(s))
			if len(doc.frames) != len(tc.plots) {
				t.Fatalf("%d data areas in the SVG, want %d", len(doc.frames), len(tc.plots))
			}
			page := vg.Rectangle{Max: vg.Point{X: vg.Length(doc.w), Y: vg.Length(doc.h)}}
			check := func(tx svgText) {
				b := textBox(tx)
				for i, f := range doc.frames {
					if overlaps(b, f) {
						t.Errorf("legend label %q at %v lies over the data area %d %v", tx.text, b, i, f)
					}
				}
				if b.Min.X < page.Min.X || b.Max.X > page.Max.X || b.Min.Y < page.Min.Y || b.Max.Y > page.Max.Y {
					t.Errorf("legend label %q at %v lies outside the SVG %v", tx.text, b, page)
				}
				// Room for a substitute font a quarter wider than the SVG's.
				if wide := b.Min.X + 1.25*(b.Max.X-b.Min.X); wide > page.Max.X {
					t.Errorf("legend label %q at %v, a quarter wider, runs past the SVG's edge %v", tx.text, b, page.Max.X)
				}
				beside := false // within the height of some panel's data area
				for _, f := range doc.frames {
					beside = beside || (b.Min.Y >= f.Min.Y-0.5 && b.Max.Y <= f.Max.Y+0.5)
				}
				if !beside {
					t.Errorf("legend label %q at %v lies beside no data area", tx.text, b)
				}
				if !tx.inLegend {
					t.Errorf("legend label %q is not in the tg-legend group", tx.text)
				}
			}
			for _, want := range tc.labels {
				n := 0
				for _, tx := range doc.texts {
					if tx.text == want {
						n++
						check(tx)
					}
				}
				if n == 0 {
					t.Errorf("legend label %q not drawn", want)
				}
			}
			for _, want := range tc.cut {
				n := 0
				for _, tx := range doc.texts {
					if strings.HasPrefix(tx.text, want) {
						n++
						if !strings.HasSuffix(tx.text, "…") || len(tx.text) >= len(long) {
							t.Errorf("label %q drawn whole, want it cut short", tx.text)
						}
						check(tx)
					}
				}
				if n == 0 {
					t.Errorf("legend label beginning %q not drawn", want)
				}
			}
		})
	}
}
