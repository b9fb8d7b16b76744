package report

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"slices"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/theater"
)

// Plot sizes: one column of the page, panels stacked under each other.
// A panel is drawn at about the page's width, so that scaled to it the
// text stays the size of the page's.
const (
	plotW  = 34 * vg.Centimeter
	panelH = 7 * vg.Centimeter
)

// Legends sit in a column right of the data areas, so they cover no data.
// The column is as wide as the widest legend, at most a third of the
// width: a longer label is cut short (see legendLabel). A browser without
// the SVG's font draws the text in a wider one, clipped at the SVG's edge,
// so the column is wider than the legend as measured by legendSlack.
const (
	legendGap   = 3 * vg.Millimeter
	legendSlack = 1.3
	legendMaxW  = (plotW/3 - legendGap) / legendSlack
	panelPadY   = 3 * vg.Millimeter
)

// svgOf draws plots stacked in one column into an SVG fragment for
// inlining (no XML prolog). Each plot's legend is drawn beside its data
// area, in a group of class tg-legend.
func svgOf(plots ...*plot.Plot) (template.HTML, error) {
	legs := make([]plot.Legend, len(plots))
	var legW vg.Length
	for i, p := range plots {
		legs[i] = p.Legend
		p.Legend = plot.NewLegend() // drawn apart, outside the data area
		legs[i].Top, legs[i].Left = true, true
		legW = max(legW, legendRect(&legs[i]).Size().X)
	}
	w := plotW
	if legW > 0 {
		w -= legW*legendSlack + legendGap
	}
	// A panel is made taller where its legend is taller than its data
	// area; the aligned data areas all grow alike.
	h := panelH * vg.Length(len(plots))
	for range 3 {
		cs := stack(plots, draw.Canvas{Rectangle: vg.Rectangle{Max: vg.Point{X: w, Y: h}}})
		var short vg.Length
		for i, p := range plots {
			short = max(short, legendHeight(&legs[i])-p.DataCanvas(cs[i]).Size().Y)
		}
		if short <= 0 {
			break
		}
		h += short * vg.Length(len(plots))
	}
	c := vgsvg.New(plotW, h)
	dc := draw.New(c)
	// White under the legend column too, as under the plots.
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	dc.Max.X = w
	cs := stack(plots, dc)
	for i, p := range plots {
		p.Draw(cs[i])
	}
	s, err := svgString(c)
	if err != nil {
		return "", err
	}
	if legW > 0 {
		lc := vgsvg.New(plotW, h)
		for i, p := range plots {
			d := p.DataCanvas(cs[i])
			legs[i].Draw(draw.Canvas{Canvas: lc, Rectangle: vg.Rectangle{
				Min: vg.Point{X: d.Max.X + legendGap, Y: d.Min.Y},
				Max: vg.Point{X: d.Max.X + legendGap + legW*legendSlack, Y: d.Max.Y},
			}})
		}
		ls, err := svgString(lc)
		if err != nil {
			return "", err
		}
		if s, err = spliceGroup(s, ls, `<g class="tg-legend">`); err != nil {
			return "", err
		}
	}
	return template.HTML(s), nil
}

// stack lays plots out in one column of c, their data areas aligned.
func stack(plots []*plot.Plot, c draw.Canvas) []draw.Canvas {
	col := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		col[i] = []*plot.Plot{p}
	}
	cs := plot.Align(col, draw.Tiles{Rows: len(plots), Cols: 1, PadY: panelPadY}, c)
	out := make([]draw.Canvas, len(plots))
	for i := range cs {
		out[i] = cs[i][0]
	}
	return out
}

// legendRect is the size of l drawn (at the origin).
func legendRect(l *plot.Legend) vg.Rectangle {
	return l.Rectangle(draw.Canvas{})
}

// legendHeight is how far down l reaches when drawn: Legend.Draw puts
// its last entry's descent lower than Legend.Rectangle counts, by one and
// a half descents; two are counted, so the text keeps clear of the edge.
func legendHeight(l *plot.Legend) vg.Length {
	if legendRect(l).Size().Y == 0 {
		return 0
	}
	return legendRect(l).Size().Y + 2*l.TextStyle.FontExtents().Descent
}

// svgString is c written out, from its <svg> element on.
func svgString(c *vgsvg.Canvas) (string, error) {
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("report: rendering SVG: %w", err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return s, nil
}

// svgEnd closes the group that puts vgsvg's origin at the bottom left,
// and the document.
const svgEnd = "</g>\n</svg>"

// spliceGroup puts the drawing of part, an SVG of the same size as doc,
// into doc in a group opened by open. Both draw in the coordinates of
// their first group (origin at the bottom left), so the part's drawing
// goes inside doc's.
func spliceGroup(doc, part, open string) (string, error) {
	g := strings.Index(part, "<g ")
	if g >= 0 {
		if nl := strings.IndexByte(part[g:], '\n'); nl >= 0 {
			g += nl + 1
		} else {
			g = -1
		}
	}
	pe, de := strings.LastIndex(part, svgEnd), strings.LastIndex(doc, svgEnd)
	if g < 0 || pe < g || de < 0 {
		return "", fmt.Errorf("report: rendering SVG: unexpected vgsvg output")
	}
	return doc[:de] + open + "\n" + part[g:pe] + "</g>\n" + doc[de:], nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	p.Add(plotter.NewGrid())
	return p
}

func line(p *plot.Plot, i int, label string, xys plotter.XYs, dashed bool) {
	lines(p, i, label, []plotter.XYs{xys}, dashed)
}

// lines draws one series as separate pieces, so nothing is drawn across
// the gaps between them (stages, levels, missing samples), one legend
// entry for all; a piece of one point is drawn as a dot.
func lines(p *plot.Plot, i int, label string, pieces []plotter.XYs, dashed bool) {
	var entry plot.Thumbnailer
	for _, xys := range pieces {
		if len(xys) == 0 {
			continue
		}
		l, err := plotter.NewLine(xys)
		if err != nil {
			continue
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.4)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if len(xys) == 1 {
			if s, err := plotter.NewScatter(xys); err == nil {
				s.Color, s.Shape, s.Radius = plotutil.Color(i), draw.CircleGlyph{}, vg.Points(1.5)
				p.Add(s)
			}
		}
		if entry == nil {
			entry = l
		}
	}
	if label != "" && entry != nil {
		p.Legend.Add(legendLabel(p.Legend, label), entry)
	}
}

// split cuts xys (ascending in X) where two neighbours are more than gap
// apart or a break lies between them (a break at a point starts a piece).
func split(xys plotter.XYs, gap float64, breaks []float64) []plotter.XYs {
	var out []plotter.XYs
	start := 0
	for j := 1; j < len(xys); j++ {
		cut := xys[j].X-xys[j-1].X > gap
		for _, b := range breaks {
			if xys[j-1].X < b && b <= xys[j].X {
				cut = true
			}
		}
		if cut {
			out = append(out, xys[start:j])
			start = j
		}
	}
	if len(xys) > 0 {
		out = append(out, xys[start:])
	}
	return out
}

// legendLabel is label cut short, with an ellipsis, where its legend
// entry would be wider than the legend column may be.
func legendLabel(l plot.Legend, label string) string {
	fits := func(s string) bool {
		return l.ThumbnailWidth+l.TextStyle.Rectangle(" "+s).Max.X <= legendMaxW
	}
	if fits(label) {
		return label
	}
	r := []rune(label)
	for len(r) > 1 && !fits(string(r)+"…") {
		r = r[:len(r)-1]
	}
	return strings.TrimRight(string(r), " ") + "…"
}

func points(p *plot.Plot, i int, label string, xys plotter.XYs) {
	if len(xys) == 0 {
		return
	}
	l, s, err := plotter.NewLinePoints(xys)
	if err != nil {
		return
	}
	l.Color, s.Color = plotutil.Color(i), plotutil.Color(i)
	s.Shape = plotutil.Shape(i)
	p.Add(l, s)
	if label != "" {
		p.Legend.Add(legendLabel(p.Legend, label), l, s)
	}
}

// vline marks a value of the X axis across the whole plot, labelled at
// the top.
type vline struct {
	x     float64
	label string
	color color.Color
}

func (v vline) Plot(c draw.Canvas, p *plot.Plot) {
	x := c.X(p.X.Norm(v.x))
	if x < c.Min.X || x > c.Max.X {
		return
	}
	c.StrokeLine2(draw.LineStyle{Color: v.color, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(3), vg.Points(2)}}, x, c.Min.Y, x, c.Max.Y)
	if v.label != "" {
		sty := draw.TextStyle{Color: v.color, Font: font.From(plot.DefaultFont, vg.Points(7)), Handler: plot.DefaultTextHandler}
		c.FillText(sty, vg.Point{X: x + vg.Points(2), Y: c.Max.Y - vg.Points(9)}, v.label)
	}
}

// band shades X ranges (metric-theater buckets) behind the data.
type band struct {
	from, to []float64
	color    color.Color
}

func (b band) Plot(c draw.Canvas, p *plot.Plot) {
	for i := range b.from {
		x0, x1 := c.X(p.X.Norm(b.from[i])), c.X(p.X.Norm(b.to[i]))
		x0, x1 = max(x0, c.Min.X), min(x1, c.Max.X)
		if x1 <= x0 {
			continue
		}
		c.FillPolygon(b.color, []vg.Point{{X: x0, Y: c.Min.Y}, {X: x1, Y: c.Min.Y}, {X: x1, Y: c.Max.Y}, {X: x0, Y: c.Max.Y}})
	}
}

var (
	boundaryColor = color.Gray{Y: 110}
	sloMaxColor   = color.RGBA{R: 0, G: 130, B: 60, A: 255}
	kneeColor     = color.RGBA{R: 200, G: 100, B: 0, A: 255}
	theaterColor  = color.NRGBA{R: 255, G: 60, B: 60, A: 60}
)

// spectrumTicker labels -log10(1 − q) as percentiles: 0%, 90%, 99%, ….
var spectrumTicker = plot.TickerFunc(func(lo, hi float64) []plot.Tick {
	var t []plot.Tick
	for v := 0.0; v <= math.Ceil(hi)+1e-9; v++ {
		q := 100 * (1 - math.Pow(10, -v))
		t = append(t, plot.Tick{Value: v, Label: strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.4f", q), "0"), ".") + "%"})
	}
	return t
})

// spectrum is one series of sorted values per label.
type spectrumSeries struct {
	label  string
	values []float64 // ascending
	// total is the samples the values stand for, when they are a sample.
	total int64
}

// spectrumPlot draws latency against percentile, HDR style: the X axis is
// -log10(1 − q), so 90%, 99%, 99.9% are equally spaced.
func spectrumPlot(title string, series []spectrumSeries) *plot.Plot {
	p := newPlot(title, "percentile", "ms")
	p.X.Tick.Marker = spectrumTicker
	for i, s := range series {
		n := len(s.values)
		if n == 0 {
			continue
		}
		var xys plotter.XYs
		top := math.Log10(float64(n)) // the last rank: q = 1 − 1/n
		for k := 0; k <= 200; k++ {
			v := top * float64(k) / 200
			q := 1 - math.Pow(10, -v)
			idx := min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)
			xys = append(xys, plotter.XY{X: v, Y: s.values[idx]})
		}
		label := fmt.Sprintf("%s (n=%d)", s.label, n)
		if s.total > int64(n) {
			label = fmt.Sprintf("%s (%d of n=%d)", s.label, n, s.total)
		}
		line(p, i, label, xys, false)
	}
	return p
}

// bucketOf picks a time bucket: 1 s, or longer so a run has at most 300.
func bucketOf(span time.Duration) time.Duration {
	b := time.Second
	for span/b > 300 {
		b *= 2
	}
	return b
}

// perBucket is the quantile q of the values of each bucket of t.
func perBucket(n int, b time.Duration, keys []time.Duration, vals []float64, q float64) plotter.XYs {
	groups := make([][]float64, n)
	for i, k := range keys {
		if j := min(int(k/b), n-1); j >= 0 {
			groups[j] = append(groups[j], vals[i])
		}
	}
	var xys plotter.XYs
	for j, g := range groups {
		if len(g) == 0 {
			continue
		}
		slices.Sort(g)
		idx := min(max(int(math.Ceil(q*float64(len(g))))-1, 0), len(g)-1)
		xys = append(xys, plotter.XY{X: (float64(j) + 0.5) * b.Seconds(), Y: g[idx]})
	}
	return xys
}

// addBoundaries marks where each part (stage directory, sweep level)
// starts and, inside a part, each load stage: the first intended start of
// its records.
func addBoundaries(p *plot.Plot, src *Source) {
	for _, b := range boundaries(src) {
		p.Add(vline{x: b.at.Seconds(), label: b.name, color: boundaryColor})
	}
}

type boundary struct {
	at   time.Duration
	name string
}

func boundaries(src *Source) []boundary {
	var out []boundary
	for _, part := range src.Parts {
		if len(src.Parts) > 1 {
			out = append(out, boundary{part.Offset, part.Name})
		}
		first := map[string]time.Duration{}
		var order []string
		for _, r := range part.Reqs {
			if at, ok := first[r.stage]; !ok || r.intended < at {
				if !ok {
					order = append(order, r.stage)
				}
				first[r.stage] = r.intended
			}
		}
		if len(order) > 1 {
			for _, st := range order {
				out = append(out, boundary{first[st], st})
			}
		}
	}
	return out
}

// overTimePlots are latency and throughput over time, stage boundaries
// marked. Each part (stage, level) is bucketed on its own and drawn as its
// own pieces: a bucket never mixes two parts, and no line joins the end of
// one part to the start of the next.
func overTimePlots(src *Source) []*plot.Plot {
	ot := overTime(src)
	lat := newPlot("Latency over time (by intended start)", "s", "ms")
	lines(lat, 0, "TTFT p50", ot.ttft50, false)
	lines(lat, 1, "TTFT p99", ot.ttft99, true)
	lines(lat, 2, "E2E p50", ot.e2e50, false)
	lines(lat, 3, "E2E p99", ot.e2e99, true)
	addBoundaries(lat, src)
	tp := newPlot("Throughput over time (completions by end)", "s", "requests/s")
	lines(tp, 0, "completed/s", ot.completed, false)
	addBoundaries(tp, src)
	return []*plot.Plot{lat, tp}
}

// overTimeSeries are the pieces of each series over time.
type overTimeSeries struct {
	ttft50, ttft99, e2e50, e2e99, completed []plotter.XYs
}

func overTime(src *Source) overTimeSeries {
	b := bucketOf(sourceSpan(src))
	gap := 1.5 * b.Seconds()
	var ot overTimeSeries
	for _, part := range src.Parts {
		var atD []time.Duration
		var ttft, e2e []float64
		for _, r := range part.Reqs {
			if !r.ok || r.e2e == 0 {
				continue
			}
			atD = append(atD, r.intended-part.Offset)
			ttft, e2e = append(ttft, r.ttft), append(e2e, r.e2e)
		}
		n := partBuckets(part.Span, b)
		at := func(xys plotter.XYs) []plotter.XYs { return split(shiftX(xys, part.Offset), gap, nil) }
		ot.ttft50 = append(ot.ttft50, at(perBucket(n, b, atD, ttft, 0.5))...)
		ot.ttft99 = append(ot.ttft99, at(perBucket(n, b, atD, ttft, 0.99))...)
		ot.e2e50 = append(ot.e2e50, at(perBucket(n, b, atD, e2e, 0.5))...)
		ot.e2e99 = append(ot.e2e99, at(perBucket(n, b, atD, e2e, 0.99))...)
	}
	ot.completed = []plotter.XYs{completions(src, b)}
	return ot
}

// completions is the rate of completions by end time, in buckets of b
// over the whole source, parts and their drains alike: a request that
// ends after its part's schedule (in its grace) counts where it ended, so
// no bucket at a part's end gathers them over a sliver of time. The last
// bucket runs to the last end; one narrower than half a bucket joins the
// one before, so a few late completions over milliseconds are not read as
// a burst.
func completions(src *Source, b time.Duration) plotter.XYs {
	var last time.Duration
	var ends []time.Duration
	for _, part := range src.Parts {
		for _, r := range part.Reqs {
			if !r.ok || r.e2e == 0 {
				continue
			}
			ends = append(ends, r.end)
			last = max(last, r.end)
		}
	}
	if len(ends) == 0 {
		return nil
	}
	n := int(last/b) + 1
	if rest := last - time.Duration(n-1)*b; n > 1 && rest < b/2 {
		n-- // the sliver joins the bucket before
	}
	counts := make([]float64, n)
	for _, e := range ends {
		counts[min(int(e/b), n-1)]++
	}
	xys := make(plotter.XYs, 0, n)
	for j, c := range counts {
		from, to := time.Duration(j)*b, time.Duration(j+1)*b
		if j == n-1 {
			to = max(last, from+b/2)
		}
		xys = append(xys, plotter.XY{X: (from + (to-from)/2).Seconds(), Y: c / (to - from).Seconds()})
	}
	return xys
}

// partBuckets is how many buckets of b cover a part of span (at least 1).
func partBuckets(span, b time.Duration) int { return max(1, int((span+b-1)/b)) }

// sourceSpan is how long the source's parts last, one after another.
func sourceSpan(src *Source) time.Duration {
	var span time.Duration
	for _, part := range src.Parts {
		span = max(span, part.Offset+part.Span)
	}
	return span
}

func shiftX(xys plotter.XYs, off time.Duration) plotter.XYs {
	for i := range xys {
		xys[i].X += off.Seconds()
	}
	return xys
}

// utilisationPlots put GPU utilisation beside the server's queue delay and
// TTFT p99, metric-theater buckets shaded; nil without telemetry. The GPU
// panel is left out when utilisation was not measured.
func utilisationPlots(src *Source, buckets []theater.Bucket) []*plot.Plot {
	b := bucketOf(sourceSpan(src))
	var gpu, queue, waiting, tt []plotter.XYs
	sampled := false
	for _, part := range src.Parts {
		var g, q, w plotter.XYs
		for _, t := range part.Tel {
			x := t.t.Seconds()
			if t.hasGPU {
				g = append(g, plotter.XY{X: x, Y: 100 * t.gpu})
			}
			if t.hasQueue {
				q = append(q, plotter.XY{X: x, Y: t.queueMs})
			}
			if t.hasWaiting {
				w = append(w, plotter.XY{X: x, Y: t.waiting})
			}
		}
		sampled = sampled || len(g)+len(q)+len(w) > 0
		// A sample more than three intervals after the last is a gap.
		gap := 3 * sampleInterval(part.Tel)
		gpu, queue, waiting = append(gpu, split(g, gap, nil)...), append(queue, split(q, gap, nil)...), append(waiting, split(w, gap, nil)...)
		var atD []time.Duration
		var ttft []float64
		for _, r := range part.Reqs {
			if r.ok && r.e2e > 0 {
				atD, ttft = append(atD, r.intended-part.Offset), append(ttft, r.ttft)
			}
		}
		tt = append(tt, split(shiftX(perBucket(partBuckets(part.Span, b), b, atD, ttft, 0.99), part.Offset), 1.5*b.Seconds(), nil)...)
	}
	if !sampled {
		return nil
	}
	var sh band
	sh.color = theaterColor
	for _, b := range buckets {
		if b.Flag {
			sh.from, sh.to = append(sh.from, b.FromS), append(sh.to, b.ToS)
		}
	}
	var out []*plot.Plot
	if len(gpu) > 0 {
		g := newPlot("GPU utilisation", "s", "%")
		g.Add(sh)
		lines(g, 0, "GPU util (mean over GPUs)", gpu, false)
		g.Y.Min, g.Y.Max = 0, 100
		out = append(out, g)
	}
	q := newPlot("Server queue", "s", "ms / requests")
	q.Add(sh)
	lines(q, 1, "queue delay (mean per interval, ms)", queue, false)
	lines(q, 2, "waiting requests", waiting, true)
	p99 := newPlot("TTFT p99 (client)", "s", "ms")
	p99.Add(sh)
	lines(p99, 3, "TTFT p99", tt, false)
	out = append(out, q, p99)
	for _, p := range out {
		addBoundaries(p, src)
	}
	return out
}

// sampleInterval is the median gap between telemetry samples (1 s when
// there are too few to tell).
func sampleInterval(tel []telPoint) float64 {
	var d []float64
	for i := 1; i < len(tel); i++ {
		if g := (tel[i].t - tel[i-1].t).Seconds(); g > 0 {
			d = append(d, g)
		}
	}
	if len(d) == 0 {
		return 1
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// sweepPlots are latency and goodput against load, SLO-max and knee
// marked.
func sweepPlots(src *Source, cols []measure.Column) []*plot.Plot {
	sw := src.Sweep
	ls := slices.Clone(sw.Levels)
	slices.SortFunc(ls, func(a, b levelT) int { return cmpF(a.Load(), b.Load()) })
	xlabel := "offered load (requests/s)"
	if sw.Mode == "closed" {
		xlabel = "achieved throughput (requests/s)"
	}
	lat := newPlot("Latency against load", xlabel, "ms")
	thr := newPlot("Goodput against load", xlabel, "requests/s")
	lats := make([]plotter.XYs, len(cols)) // the metric table's columns of this plot
	var ach, good, ideal plotter.XYs
	for _, l := range ls {
		x := l.Load()
		if x <= 0 {
			continue
		}
		for i, c := range cols {
			lats[i] = append(lats[i], plotter.XY{X: x, Y: l.LatencyMs[c.Metric].Quantile(c.Q)})
		}
		ach = append(ach, plotter.XY{X: x, Y: l.AchievedPerS})
		if l.GoodputPerS != nil { // absent: not judged, not a rate of 0
			good = append(good, plotter.XY{X: x, Y: *l.GoodputPerS})
		}
		ideal = append(ideal, plotter.XY{X: x, Y: x})
	}
	for i, c := range cols {
		points(lat, i, c.Label, lats[i])
	}
	points(thr, 0, "achieved", ach)
	points(thr, 1, "goodput", good)
	if sw.Mode != "closed" {
		line(thr, 2, "offered", ideal, true)
	}
	for _, p := range []*plot.Plot{lat, thr} {
		if m := sw.SLOMax; m != nil {
			x := m.RatePerS
			if sw.Mode == "closed" {
				x = m.AchievedPerS
			}
			p.Add(vline{x: x, label: "SLO-max " + m.Level, color: sloMaxColor})
		}
		if k := sw.Knee; k != nil {
			x := k.RatePerS
			if sw.Mode == "closed" {
				x = k.AchievedPerS
			}
			p.Add(vline{x: x, label: "knee " + k.Level, color: kneeColor})
		}
	}
	return []*plot.Plot{lat, thr}
}

func cmpF(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
