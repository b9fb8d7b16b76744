package report

import (
	"fmt"
	"html/template"
	"io"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/theater"
)

type levelT = results.SweepLevel

// Options tune a report.
type Options struct {
	Title string
	// Version is tailgate's, printed in the footer.
	Version string
	// Now stamps the report (nil: time.Now).
	Now func() time.Time
	// Latency is the metric table the latency columns and plots come from
	// (nil: measure.LatencyMetrics()); a test passes a table with a
	// made-up row.
	Latency []measure.LatencyMetric
	// Rates is the rate table the rate columns come from (nil:
	// measure.RateMetrics()); a test passes a table with a made-up row.
	Rates []measure.RateMetric
}

// page is what the template renders.
type page struct {
	Title, Generated, Version string
	Sources                   []sourceView
	Spectrum                  []template.HTML
	// UPlotJS and UPlotCSS are the vendored chart library, inlined when a
	// source has interactive charts.
	UPlotJS, ChartsInit template.JS
	UPlotCSS            template.CSS
	// PartCols, ClassCols and LevelCols head the latency columns of the
	// summary, per-class and sweep tables (the metric table's Columns);
	// PartColsMD the Markdown summary's.
	PartCols, PartColsMD, ClassCols, LevelCols []string
	// PartRateCols and PartRateColsMD head the parts' rate columns beyond
	// the fixed ones (completed/s, goodput/s, out tok/s).
	PartRateCols, PartRateColsMD []string
}

type sourceView struct {
	Dir, Kind string
	Parts     []partView
	Verdicts  []verdictView
	Status    string
	Problems  []string
	Classes   []classView
	OverTime  template.HTML
	// Charts are OverTime's plots as interactive charts (JSON for the
	// page's script); OverTime is then the fallback without JavaScript.
	Charts  []template.JS
	Util    template.HTML
	Theater []theaterView
	// GPUMeasured: some telemetry sample had GPU utilisation; without it
	// metric theater cannot be judged, and the page says so.
	GPUMeasured bool
	Sweep       *sweepView
}

type partView struct {
	Name                                    string
	Sent, OK, Errors, CutAtEnd              int64
	ReqPerS, OfferedPerS, TokPerS, GoodPerS string
	Lat, LatMD                              []string // under PartCols, PartColsMD
	Rates, RatesMD                          []string // under PartRateCols, PartRateColsMD
	Valid                                   string
	Invalid, Warnings                       []string
	GPU, QueueP99, IdleShare                string
}

type verdictView struct {
	Objective, Stage, Class, Measured, Threshold, Target, Status, Note string
	Fail                                                               bool
}

type classView struct {
	Part, Class      string
	Requests, Errors int64
	ReqPerS          string
	Lat              []string // under ClassCols
}

type theaterView struct {
	Part, When, Why string
}

type sweepView struct {
	Mode, SLOMax, Knee, Headroom string
	// SLOMaxBound: the SLO-max is a lower bound ("SLO-max ≥ r16").
	SLOMaxBound bool
	Levels      []levelView
	Plots       template.HTML
	Rules       []string
	Warnings    []string
}

type levelView struct {
	Name, Offered, Achieved, Goodput, GPU, Queue, Verdict string
	Lat                                                   []string // under LevelCols
	Pass                                                  bool
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// f1p is f1 of a figure that may be absent (not measured): "-".
func f1p(v *float64) string {
	if v == nil {
		return "-"
	}
	return f1(*v)
}

func msText(h schema.Hist, pick func(schema.Hist) float64) string {
	if h.Count == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", pick(h))
}

// latText are the figures of cols from a latency_ms map (ms, "-" where a
// metric has no samples).
func latText(l map[string]schema.Hist, cols []measure.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = msText(l[c.Metric], func(h schema.Hist) float64 { return h.Quantile(c.Q) })
	}
	return out
}

// columns are the latency columns of each table, from the metric table.
type columns struct {
	rows                    []measure.LatencyMetric
	parts, partsMD, classes []measure.Column
	levels, sweepLat        []measure.Column
	// rates, ratesMD are the rate table's columns of the parts tables.
	rates, ratesMD []*measure.RateMetric
}

func columnsOf(rows []measure.LatencyMetric, rates []measure.RateMetric) *columns {
	if rows == nil {
		rows = measure.LatencyMetrics()
	}
	if rates == nil {
		rates = measure.RateMetrics()
	}
	return &columns{rows: rows, rates: measure.RateColumnsOf(rates, measure.TableReportParts),
		ratesMD: measure.RateColumnsOf(rates, measure.TableReportPartsMD), parts: measure.ColumnsOf(rows, measure.TableReportParts),
		partsMD: measure.ColumnsOf(rows, measure.TableReportPartsMD), classes: measure.ColumnsOf(rows, measure.TableReportClasses),
		levels: measure.ColumnsOf(rows, measure.TableReportLevels), sweepLat: measure.ColumnsOf(rows, measure.TableReportSweepLat)}
}

func rateLabels(rows []*measure.RateMetric) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Label
	}
	return out
}

// rateText are the rows' values in a throughput block ("-": absent).
func rateText(t *schema.Throughput, rows []*measure.RateMetric) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = "-"
		if r.Of == nil {
			continue
		}
		switch v, ok := r.Of(t); {
		case !ok:
		case r.Kind == measure.RateRatio:
			out[i] = fmt.Sprintf("%.2f%%", 100*v)
		default:
			out[i] = f1(v)
		}
	}
	return out
}

func labels(cols []measure.Column) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = c.Label
	}
	return out
}

// buildTables assembles the page's figures without plots.
func buildTables(srcs []*Source, opt Options) (*page, error) { return assemble(srcs, opt, false) }

// build assembles the page's figures and plots.
func build(srcs []*Source, opt Options) (*page, error) { return assemble(srcs, opt, true) }

func assemble(srcs []*Source, opt Options, plots bool) (*page, error) {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	cols := columnsOf(opt.Latency, opt.Rates)
	pg := &page{Title: opt.Title, Generated: now().UTC().Format(time.RFC3339), Version: opt.Version,
		PartRateCols: rateLabels(cols.rates), PartRateColsMD: rateLabels(cols.ratesMD), PartCols: labels(cols.parts), PartColsMD: labels(cols.partsMD), ClassCols: labels(cols.classes), LevelCols: labels(cols.levels)}
	if pg.Title == "" {
		var dirs []string
		for _, s := range srcs {
			dirs = append(dirs, s.Dir)
		}
		pg.Title = "tailgate report: " + strings.Join(dirs, ", ")
	}
	many := len(srcs) > 1
	spec := map[string][]spectrumSeries{}
	for _, src := range srcs {
		sv := sourceView{Dir: src.Dir, Kind: src.Kind}
		var theaterBuckets []theater.Bucket
		for _, part := range src.Parts {
			sv.Parts = append(sv.Parts, viewPart(part, cols))
			sv.Classes = append(sv.Classes, viewClasses(part, cols)...)
			if s := part.Summary; s != nil && s.MetricTheater != nil {
				for _, b := range s.MetricTheater.Buckets {
					// A bucket is clipped to its part: the last one of a
					// level ends with the level, not in the next.
					from, to := part.Offset.Seconds(), (part.Offset + part.Span).Seconds()
					b.FromS, b.ToS = min(max(b.FromS+from, from), to), min(b.ToS+from, to)
					if b.ToS <= b.FromS {
						continue
					}
					theaterBuckets = append(theaterBuckets, b)
					if b.Flag {
						sv.Theater = append(sv.Theater, theaterView{Part: part.Name, When: fmt.Sprintf("%.1f–%.1f s", b.FromS, b.ToS), Why: b.Why})
					}
				}
			}
			sv.GPUMeasured = sv.GPUMeasured || part.hasGPU()
			label := part.Name
			if many {
				label = src.Dir + ": " + part.Name
			}
			for _, m := range []string{measure.MetricTTFT, measure.MetricITL, measure.MetricE2E} {
				ss := spectrumSeries{label: label, values: part.values(m)}
				if m == measure.MetricITL {
					ss.total = part.itlSeen
				}
				spec[m] = append(spec[m], ss)
			}
		}
		if v := src.Verdict; v != nil {
			sv.Status = fmt.Sprintf("%s (exit %d)", v.Status, v.ExitCode)
			for _, x := range v.Verdicts {
				sv.Verdicts = append(sv.Verdicts, verdictView{Objective: x.Objective, Stage: x.Stage, Class: x.Class,
					Measured: x.MeasuredText(), Threshold: x.ThresholdLabel(), Target: x.TargetText, Status: string(x.Status),
					Note: x.Note, Fail: x.Status != "PASS" && x.Status != "WAIVED"})
			}
			for _, p := range v.Problems {
				sv.Problems = append(sv.Problems, strings.TrimSpace(p.Stage+" "+p.Check+": "+p.Detail))
			}
		}
		var err error
		if plots {
			if sv.Charts, err = overTimeCharts(src); err != nil {
				return nil, err
			}
			pg.UPlotJS, pg.UPlotCSS, pg.ChartsInit = template.JS(uplotJS), template.CSS(uplotCSS), template.JS(chartsInit)
			if sv.OverTime, err = svgOf(overTimePlots(src)...); err != nil {
				return nil, err
			}
			if ps := utilisationPlots(src, theaterBuckets); ps != nil {
				if sv.Util, err = svgOf(ps...); err != nil {
					return nil, err
				}
			}
		}
		if src.Sweep != nil {
			if sv.Sweep, err = viewSweep(src, plots, cols); err != nil {
				return nil, err
			}
			// The summary reads in load order, as the sweep's table does;
			// the plots over time keep the order the levels ran in.
			load := map[string]float64{}
			for _, l := range src.Sweep.Levels {
				load[l.Name] = l.Load()
			}
			slices.SortStableFunc(sv.Parts, func(a, b partView) int { return cmpF(load[a.Name], load[b.Name]) })
		}
		pg.Sources = append(pg.Sources, sv)
	}
	for _, m := range []string{measure.MetricTTFT, measure.MetricITL, measure.MetricE2E} {
		if !plots {
			break
		}
		if !slices.ContainsFunc(spec[m], func(s spectrumSeries) bool { return len(s.values) > 0 }) {
			continue
		}
		svg, err := svgOf(spectrumPlot(strings.ToUpper(m)+" percentile spectrum", spec[m]))
		if err != nil {
			return nil, err
		}
		pg.Spectrum = append(pg.Spectrum, svg)
	}
	return pg, nil
}

// values are the part's sorted samples of a metric (ms).
func (p *Part) values(metric string) []float64 {
	var v []float64
	if metric == measure.MetricITL {
		v = make([]float64, len(p.itl))
		for i, x := range p.itl {
			v[i] = float64(x)
		}
		slices.Sort(v)
		return v
	}
	for _, r := range p.Reqs {
		if !r.ok || r.e2e == 0 {
			continue
		}
		switch metric {
		case measure.MetricTTFT:
			v = append(v, r.ttft)
		case measure.MetricE2E:
			v = append(v, r.e2e)
		}
	}
	slices.Sort(v)
	return v
}

func viewPart(p *Part, cols *columns) partView {
	v := partView{Name: p.Name, ReqPerS: "-", OfferedPerS: "-", TokPerS: "-", GoodPerS: "-", Valid: "-", GPU: "-", QueueP99: "-", IdleShare: "-"}
	s := p.Summary
	if s == nil {
		return v
	}
	q, th, l := s.Requests, s.Throughput, s.LatencyMs
	v.Sent, v.OK, v.Errors, v.CutAtEnd = q.Sent, q.OK, q.Errors, q.CutAtEnd
	v.ReqPerS, v.TokPerS, v.GoodPerS = f1(th.RequestsPerS), f1(th.OutputTokensPerS), f1p(th.GoodputPerS)
	if th.OfferedPerS > 0 {
		v.OfferedPerS = f1(th.OfferedPerS)
	}
	v.Lat, v.LatMD = latText(l, cols.parts), latText(l, cols.partsMD)
	v.Rates, v.RatesMD = rateText(&th, cols.rates), rateText(&th, cols.ratesMD)
	v.Valid = "valid"
	v.Warnings = s.Warnings
	if !s.Validity.Valid {
		v.Valid = "INVALID"
		v.Invalid = s.Validity.Reasons
	}
	if t := s.Telemetry; t != nil {
		if t.GPUUtilization != nil {
			v.GPU = fmt.Sprintf("%.0f%% mean, %.0f%% max", 100*t.GPUUtilization.Mean, 100*t.GPUUtilization.Max)
		}
		v.QueueP99 = queueP99(t.QueueDelay)
		if idle := gpuIdleShare(t); idle != "" {
			v.IdleShare = idle
		}
	}
	return v
}

func viewClasses(p *Part, cols *columns) []classView {
	s := p.Summary
	if s == nil {
		return nil
	}
	names := make([]string, 0, len(s.Classes))
	for n := range s.Classes {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []classView
	for _, n := range names {
		c := s.Classes[n]
		l := c.LatencyMs
		out = append(out, classView{Part: p.Name, Class: n, Requests: c.Requests.Sent, Errors: c.Requests.Errors,
			ReqPerS: f1(c.Throughput.RequestsPerS), Lat: latText(l, cols.classes)})
	}
	return out
}

func viewSweep(src *Source, plots bool, cols *columns) (*sweepView, error) {
	sw := src.Sweep
	v := &sweepView{Mode: sw.Mode, SLOMax: "none: no level met every objective", Knee: "not found among the levels run", Warnings: sw.Warnings}
	if m := sw.SLOMax; m != nil {
		v.SLOMax, v.SLOMaxBound = m.Label()+": "+m.Note, m.LowerBound
	}
	if k := sw.Knee; k != nil {
		v.Knee = fmt.Sprintf("%s (%.1f req/s achieved): %s", k.Level, k.AchievedPerS, k.Note)
	}
	if h := sw.Headroom; h != nil {
		v.Headroom = h.Note
	}
	ls := slices.Clone(sw.Levels)
	slices.SortFunc(ls, func(a, b levelT) int { return cmpF(a.Load(), b.Load()) })
	for _, l := range ls {
		lv := levelView{Name: l.Name, Offered: "-", Achieved: f1(l.AchievedPerS), Goodput: f1p(l.GoodputPerS),
			Lat: latText(l.LatencyMs, cols.levels),
			GPU: "-", Queue: "-", Verdict: "PASS", Pass: l.Pass}
		if l.OfferedPerS > 0 {
			lv.Offered = f1(l.OfferedPerS)
		}
		if l.GPUUtilization != nil {
			lv.GPU = fmt.Sprintf("%.0f%%", 100*l.GPUUtilization.Mean)
		}
		lv.Queue = queueP99(l.QueueDelay)
		switch {
		case !l.Valid:
			lv.Verdict = "INVALID"
		case l.Saturated:
			lv.Verdict = "FAIL (saturated: " + l.Saturation + ")"
		case l.Short:
			lv.Verdict = "FAIL (short)"
		case l.FloorsOnly:
			lv.Verdict = "FAIL (floors only: too little demand)"
		case !l.Pass:
			lv.Verdict = "FAIL"
		}
		if len(l.NotApplicable) > 0 {
			lv.Verdict += " · N/A: " + strings.Join(l.NotApplicable, ", ")
		}
		v.Levels = append(v.Levels, lv)
	}
	for _, k := range []string{"min_requests", "search", "saturation", "floors", "lower_bound", "knee", "headroom"} {
		if r, ok := sw.Rules[k]; ok {
			v.Rules = append(v.Rules, k+": "+r)
		}
	}
	if !plots {
		return v, nil
	}
	var err error
	v.Plots, err = svgOf(sweepPlots(src, cols.sweepLat)...)
	return v, err
}

// WriteHTML writes the report of srcs as one self-contained HTML page.
func WriteHTML(w io.Writer, srcs []*Source, opt Options) error {
	pg, err := build(srcs, opt)
	if err != nil {
		return err
	}
	return pageTemplate.Execute(w, pg)
}

var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; padding: 0 1.5em; max-width: 110em; color: #222; background: #fff; }
h1 { font-size: 1.5em; } h2 { font-size: 1.25em; border-bottom: 1px solid #ccc; margin-top: 2em; } h3 { font-size: 1.05em; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; } th { background: #f2f2f2; }
td.l, th.l { text-align: left; }
.pass { color: #0a6b2d; font-weight: bold; } .fail { color: #b00020; font-weight: bold; }
.warn { color: #8a5a00; } svg { display: block; margin: 0.5em 0; width: 100%; height: auto; }
.chart { width: 100%; margin: 0.5em 0 1.5em; } .uplot .u-legend { font-size: 0.85em; }
.note { color: #555; font-size: 0.85em; }
</style>
{{if .UPlotJS}}<style>{{.UPlotCSS}}</style>
<script>{{.UPlotJS}}</script>{{end}}
</head>
<body>
<h1>{{.Title}}</h1>
<p class="note">Generated {{.Generated}} by tailgate {{.Version}}. Latencies are measured from each request's intended start; warm-up is left out.</p>
{{range .Sources}}
<h2>{{.Dir}} ({{.Kind}})</h2>
{{if .Status}}<p>Result: <span class="{{if eq (printf "%.4s" .Status) "PASS"}}pass{{else}}fail{{end}}">{{.Status}}</span></p>{{end}}
<h3>Summary</h3>
<table>
<tr><th class="l">part</th><th>sent</th><th>ok</th><th>errors</th><th>cut</th><th>offered/s</th><th>completed/s</th><th>goodput/s</th><th>out tok/s</th>{{range $.PartRateCols}}<th>{{.}}</th>{{end}}{{range $.PartCols}}<th>{{.}}</th>{{end}}<th class="l">GPU util</th><th>GPU idle</th><th>queue p99</th><th class="l">validity</th></tr>
{{range .Parts}}<tr><td class="l">{{.Name}}</td><td>{{.Sent}}</td><td>{{.OK}}</td><td>{{.Errors}}</td><td>{{.CutAtEnd}}</td><td>{{.OfferedPerS}}</td><td>{{.ReqPerS}}</td><td>{{.GoodPerS}}</td><td>{{.TokPerS}}</td>{{range .Rates}}<td>{{.}}</td>{{end}}{{range .Lat}}<td>{{.}}</td>{{end}}<td class="l">{{.GPU}}</td><td>{{.IdleShare}}</td><td>{{.QueueP99}}</td><td class="l">{{.Valid}}</td></tr>
{{end}}</table>
<p class="note">Latencies in ms.</p>
{{range .Parts}}{{$p := .Name}}{{range .Invalid}}<p class="fail">{{$p}}: invalid: {{.}}</p>{{end}}{{range .Warnings}}<p class="warn">{{$p}}: warning: {{.}}</p>{{end}}{{end}}
{{if .Verdicts}}<h3>Verdicts</h3>
<table>
<tr><th class="l">objective</th><th class="l">stage</th><th class="l">class</th><th>measured</th><th>threshold</th><th>target</th><th class="l">status</th><th class="l">note</th></tr>
{{range .Verdicts}}<tr><td class="l">{{.Objective}}</td><td class="l">{{.Stage}}</td><td class="l">{{.Class}}</td><td>{{.Measured}}</td><td>{{.Threshold}}</td><td>{{.Target}}</td><td class="l {{if .Fail}}fail{{else}}pass{{end}}">{{.Status}}</td><td class="l">{{.Note}}</td></tr>
{{end}}</table>{{end}}
{{range .Problems}}<p class="fail">problem: {{.}}</p>{{end}}
{{with .Sweep}}<h3>Sweep ({{.Mode}} loop)</h3>
<p><b>SLO-max{{if not .SLOMaxBound}}:{{end}}</b> {{.SLOMax}}<br><b>Knee:</b> {{.Knee}}{{if .Headroom}}<br><b>Headroom:</b> {{.Headroom}}{{end}}</p>
<table>
<tr><th class="l">level</th><th>offered/s</th><th>achieved/s</th><th>goodput/s</th>{{range $.LevelCols}}<th>{{.}}</th>{{end}}<th>GPU util</th><th>queue p99</th><th class="l">verdict</th></tr>
{{range .Levels}}<tr><td class="l">{{.Name}}</td><td>{{.Offered}}</td><td>{{.Achieved}}</td><td>{{.Goodput}}</td>{{range .Lat}}<td>{{.}}</td>{{end}}<td>{{.GPU}}</td><td>{{.Queue}}</td><td class="l {{if .Pass}}pass{{else}}fail{{end}}">{{.Verdict}}</td></tr>
{{end}}</table>
{{.Plots}}
{{range .Warnings}}<p class="warn">warning: {{.}}</p>{{end}}
<ul class="note">{{range .Rules}}<li>{{.}}</li>{{end}}</ul>
{{end}}
<h3>Latency and throughput over time</h3>
{{if .Charts}}<p class="note">Hover for values; click a legend entry to hide or show its series; drag to zoom a time range, double-click to reset.</p>
{{range .Charts}}<script type="application/json" class="tg-chart">{{.}}</script>
{{end}}<noscript>{{.OverTime}}</noscript>{{else}}{{.OverTime}}{{end}}
{{if .Classes}}<h3>Per class</h3>
<table>
<tr><th class="l">part</th><th class="l">class</th><th>requests</th><th>errors</th><th>completed/s</th>{{range $.ClassCols}}<th>{{.}}</th>{{end}}</tr>
{{range .Classes}}<tr><td class="l">{{.Part}}</td><td class="l">{{.Class}}</td><td>{{.Requests}}</td><td>{{.Errors}}</td><td>{{.ReqPerS}}</td>{{range .Lat}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
<h3>GPU utilisation, server queue and TTFT</h3>
{{if not .Util}}<p class="note">No server or GPU telemetry was sampled: GPU utilisation was not measured, so metric theater cannot be judged.</p>
{{else}}{{.Util}}
{{if not .GPUMeasured}}<p class="note">GPU utilisation was not measured (no NVML, dcgm-exporter or server GPU gauge): metric theater cannot be judged.</p>
{{else if .Theater}}<p class="fail">Metric theater: the GPUs look busy while users wait longer (shaded above):</p><ul>{{range .Theater}}<li>{{.Part}} {{.When}}: {{.Why}}</li>{{end}}</ul>
{{else}}<p class="note">No metric theater: no time bucket had the GPUs busy while the queue delay or the TTFT tail grew.</p>{{end}}{{end}}
{{end}}
{{if .Spectrum}}<h2>Latency percentile spectrum</h2>
<p class="note">HDR style: the percentile axis is log-scaled in 1/(1 − q), so 90%, 99% and 99.9% are equally spaced; each run, stage or level is one line.</p>
{{range .Spectrum}}{{.}}
{{end}}{{end}}
{{if .UPlotJS}}<script>{{.ChartsInit}}</script>{{end}}
</body>
</html>
`))
