package report

import (
	_ "embed"
	"encoding/json"
	"html/template"
	"math"
	"slices"

	"gonum.org/v1/plot/plotter"
)

// uPlot draws the report's interactive charts: hover for values, a
// legend entry toggles its series, a drag zooms a time range and a double
// click resets it. It is inlined, so the page needs no network.
var (
	//go:embed assets/uplot/uPlot.iife.min.js
	uplotJS string
	//go:embed assets/uplot/uPlot.min.css
	uplotCSS string
)

// chart is one interactive chart's data, as the page's script reads it:
// x in seconds, one y array per series aligned on x (null where a series
// has no point, so no line joins two parts), and the boundaries to mark.
type chart struct {
	Title  string      `json:"title"`
	XLabel string      `json:"x"`
	YLabel string      `json:"y"`
	X      []float64   `json:"xs"`
	Series []chartLine `json:"series"`
	Marks  []chartMark `json:"marks,omitempty"`
}

type chartLine struct {
	Label  string     `json:"label"`
	Dashed bool       `json:"dashed,omitempty"`
	Y      []*float64 `json:"ys"`
}

type chartMark struct {
	X    float64 `json:"x"`
	Name string  `json:"name"`
}

// newChart aligns the series' pieces on the union of their x values.
func newChart(title, x, y string, marks []boundary, series ...struct {
	label  string
	dashed bool
	pieces []plotter.XYs
}) chart {
	var xs []float64
	for _, s := range series {
		for _, p := range s.pieces {
			for _, xy := range p {
				xs = append(xs, xy.X)
			}
		}
	}
	slices.Sort(xs)
	xs = slices.Compact(xs)
	c := chart{Title: title, XLabel: x, YLabel: y, X: xs}
	for _, s := range series {
		ys := make([]*float64, len(xs))
		for _, p := range s.pieces {
			for _, xy := range p {
				if math.IsNaN(xy.Y) || math.IsInf(xy.Y, 0) {
					continue
				}
				if i, ok := slices.BinarySearch(xs, xy.X); ok {
					v := xy.Y
					ys[i] = &v
				}
			}
		}
		c.Series = append(c.Series, chartLine{Label: s.label, Dashed: s.dashed, Y: ys})
	}
	for _, m := range marks {
		c.Marks = append(c.Marks, chartMark{X: m.at.Seconds(), Name: m.name})
	}
	return c
}

// overTimeCharts are overTimePlots as interactive charts: latency by
// intended start and completions by end, the parts' boundaries marked.
func overTimeCharts(src *Source) ([]template.JS, error) {
	ot := overTime(src)
	type s = struct {
		label  string
		dashed bool
		pieces []plotter.XYs
	}
	marks := boundaries(src)
	charts := []chart{
		newChart("Latency over time (by intended start)", "s", "ms", marks,
			s{"TTFT p50", false, ot.ttft50}, s{"TTFT p99", true, ot.ttft99}, s{"E2E p50", false, ot.e2e50}, s{"E2E p99", true, ot.e2e99}),
		newChart("Throughput over time (completions by end)", "s", "requests/s", marks, s{"completed/s", false, ot.completed}),
	}
	var out []template.JS
	for _, c := range charts {
		// json.Marshal escapes <, > and &: the data cannot end the script
		// element it sits in.
		b, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		out = append(out, template.JS(b))
	}
	return out, nil
}

// chartsInit draws every chart whose data the page holds (script
// elements of class tg-chart), each the width of the page, its legend
// under the plot with live values; the sources' boundaries are dashed
// lines. Each chart's div records its drawn width (data-width) for the
// headless check.
const chartsInit = `(function () {
  var palette = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"];
  function fmt(u, v) { return v == null ? "–" : v.toFixed(v < 10 ? 2 : 1); }
  document.querySelectorAll("script.tg-chart").forEach(function (el) {
    var c = JSON.parse(el.textContent);
    var div = document.createElement("div");
    div.className = "chart";
    el.parentNode.insertBefore(div, el);
    var data = [c.xs].concat(c.series.map(function (s) { return s.ys; }));
    var series = [{ label: c.x, value: fmt }].concat(c.series.map(function (s, i) {
      return { label: s.label, stroke: palette[i % palette.length], width: 1.5, dash: s.dashed ? [6, 4] : undefined,
        spanGaps: false, value: fmt };
    }));
    var marks = c.marks || [];
    var opts = {
      title: c.title, width: div.clientWidth || 1000, height: 320, series: series,
      scales: { x: { time: false } },
      axes: [{ label: c.x }, { label: c.y }],
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
      hooks: { draw: [function (u) {
        var ctx = u.ctx, r = window.devicePixelRatio || 1;
        ctx.save();
        ctx.strokeStyle = "#999"; ctx.fillStyle = "#555"; ctx.setLineDash([4 * r, 4 * r]);
        ctx.font = (11 * r) + "px sans-serif";
        marks.forEach(function (m) {
          var x = u.valToPos(m.x, "x", true);
          if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) { return; }
          ctx.beginPath(); ctx.moveTo(x, u.bbox.top); ctx.lineTo(x, u.bbox.top + u.bbox.height); ctx.stroke();
          ctx.fillText(m.name, x + 3 * r, u.bbox.top + 12 * r);
        });
        ctx.restore();
      }] }
    };
    var u = new uPlot(opts, data, div);
    div.setAttribute("data-width", String(u.width));
    window.addEventListener("resize", function () {
      u.setSize({ width: div.clientWidth, height: 320 });
      div.setAttribute("data-width", String(u.width));
    });
  });
})();`
