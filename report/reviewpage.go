package report

import (
	"fmt"
	"html/template"
	"io"
	"strings"
	texttemplate "text/template"
	"time"
)

// WriteReview writes the review in format (FormatHTML or FormatMarkdown).
func WriteReview(w io.Writer, rv *Review, format string, opt Options) error {
	now := time.Now
	if opt.Now != nil {
		now = opt.Now
	}
	v := reviewView{Review: rv, Generated: now().UTC().Format(time.RFC3339), Version: opt.Version,
		Period: fmt.Sprintf("%s to %s", rv.From.Format(time.DateOnly), rv.To.Format(time.DateOnly))}
	v.Title = opt.Title
	if v.Title == "" {
		v.Title = "tailgate review of " + rv.Root + ", " + v.Period
	}
	if format == FormatMarkdown {
		return reviewMarkdown.Execute(w, v)
	}
	return reviewHTML.Execute(w, v)
}

type reviewView struct {
	*Review
	Title, Generated, Version, Period string
}

var reviewFuncs = template.FuncMap{
	"date": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") },
	"day":  func(t time.Time) string { return t.UTC().Format(time.DateOnly) },
	"pct":  func(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) },
	"pctp": func(f *float64) string {
		if f == nil {
			return "not measured"
		}
		return fmt.Sprintf("%.0f%%", 100**f)
	},
	"good": func(g, t uint64) string {
		if t == 0 {
			return "no events"
		}
		return fmt.Sprintf("%.2f%% of %d", 100*float64(g)/float64(t), t)
	},
	"days": func(s float64) string { return fmt.Sprintf("%.1f d", s/86400) },
	"num": func(f *float64) string {
		if f == nil {
			return "not measured"
		}
		return fmt.Sprintf("%.3g", *f)
	},
	"join": strings.Join,
	"md":   md,
	"reaches": func(t *time.Time) string {
		if t == nil {
			return "-"
		}
		return t.UTC().Format(time.DateOnly)
	},
}

var reviewHTML = template.Must(template.New("review").Funcs(reviewFuncs).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 72em; color: #222; }
h2 { font-size: 1.2em; border-bottom: 1px solid #ccc; margin-top: 1.8em; }
table { border-collapse: collapse; font-size: 0.85em; } th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: left; }
th { background: #f2f2f2; } .note { color: #555; font-size: 0.85em; } .fail { color: #b00020; font-weight: bold; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="note">Generated {{.Generated}} by tailgate {{.Version}} from {{len .Results}} results under {{.Root}}.</p>
<h2>SLO performance</h2>
{{if .Canaries}}<table><tr><th>target</th><th>objective</th><th>goal</th><th>good events (SLO window)</th><th>window seen</th><th>budget left</th><th>as of</th></tr>
{{range .Canaries}}<tr><td>{{.Target}}</td><td>{{.Objective}}</td><td>{{pct .Goal}}</td><td>{{good .Good .Total}}</td><td>{{days .SeenS}}</td><td{{if lt .BudgetRemaining 0.0}} class="fail"{{end}}>{{pct .BudgetRemaining}}</td><td>{{date .EvaluatedAt}}</td></tr>
{{end}}</table>{{else}}<p class="note">No canary status in the period (save a canary's /status as JSON under the directory).</p>{{end}}
<table><tr><th>when</th><th>result</th><th>kind</th><th>status</th><th>changes</th></tr>
{{range .Results}}<tr><td>{{date .At}}</td><td>{{.Dir}}</td><td>{{.Kind}}</td><td>{{.Status}}</td><td>{{join .Changes ", "}}</td></tr>
{{else}}<tr><td colspan="5">no results in the period</td></tr>{{end}}</table>
<h2>Changes</h2>
{{if .Changes}}<ul>{{range .Changes}}<li>{{.ID}}: {{.Dir}} ({{date .At}})</li>{{end}}</ul>{{else}}<p class="note">No change ids recorded (--change) in the period.</p>{{end}}
<h2>Capacity and forecast</h2>
{{if .Capacity}}<table><tr><th>when</th><th>sweep</th><th>SLO-max</th><th>knee</th><th>headroom</th><th>demand reaches SLO-max</th></tr>
{{range .Capacity}}<tr><td>{{date .At}}</td><td>{{.Dir}}</td><td>{{.SLOMax}}</td><td>{{.Knee}}</td><td>{{.Headroom}}</td><td>{{if and .LowerBound .ReachesAt}}not before {{end}}{{reaches .ReachesAt}}</td></tr>
{{end}}</table>{{else}}<p class="note">No sweep in the period: capacity was not measured.</p>{{end}}
<h2>Efficiency</h2>
{{if .Efficiency}}<table><tr><th>result</th><th>part</th><th>GPU utilisation (mean)</th><th>GPU idle share</th><th>output tokens/s</th><th>J per output token</th><th>$ per million output tokens</th></tr>
{{range .Efficiency}}<tr><td>{{.Dir}}</td><td>{{.Part}}</td><td>{{pctp .GPUUtilMean}}</td><td>{{pctp .GPUIdleShare}}</td><td>{{printf "%.1f" .OutputTokensPerS}}</td><td>{{num .JoulesPerOutputToken}}</td><td>{{num .CostPerMillionOutputTokensUSD}}</td></tr>
{{end}}</table>{{else}}<p class="note">GPU utilisation was not measured in the period (no NVML, dcgm-exporter or server GPU gauge).</p>{{end}}
<h2>Performance regressions</h2>
{{if .Regressions}}<table><tr><th>baseline</th><th>candidate</th><th>verdict</th><th>rows</th></tr>
{{range .Regressions}}<tr><td>{{.Baseline}}</td><td>{{.Candidate}}</td><td>{{.Verdict}}</td><td>{{join .Rows "; "}}</td></tr>
{{end}}</table>{{else}}<p class="note">No two results of the same plan or mix in the period to compare.</p>{{end}}
<h2>Open waivers</h2>
{{if .Waivers}}<table><tr><th>objective</th><th>stage</th><th>owner</th><th>reason</th><th>expires</th><th>days left</th></tr>
{{range .Waivers}}<tr><td>{{.Objective}}</td><td>{{.Stage}}</td><td>{{.Owner}}</td><td>{{.Reason}}</td><td>{{day .Expires}}</td><td{{if lt .DaysLeft 30}} class="fail"{{end}}>{{.DaysLeft}}</td></tr>
{{end}}</table>{{else}}<p class="note">No waiver still open at the end of the period.</p>{{end}}
{{range .Skipped}}<p class="note">skipped: {{.}}</p>{{end}}
</body>
</html>
`))

var reviewMarkdown = texttemplate.Must(texttemplate.New("review.md").Funcs(texttemplate.FuncMap(reviewFuncs)).Parse(`# {{md .Title}}

Generated {{.Generated}} by tailgate {{.Version}} from {{len .Results}} results under {{md .Root}}.

## SLO performance
{{if .Canaries}}
| target | objective | goal | good events (SLO window) | window seen | budget left | as of |
|---|---|--:|--:|--:|--:|---|
{{range .Canaries}}| {{md .Target}} | {{md .Objective}} | {{pct .Goal}} | {{good .Good .Total}} | {{days .SeenS}} | {{pct .BudgetRemaining}} | {{date .EvaluatedAt}} |
{{end}}{{else}}
No canary status in the period.
{{end}}
| when | result | kind | status | changes |
|---|---|---|---|---|
{{range .Results}}| {{date .At}} | {{md .Dir}} | {{.Kind}} | {{md .Status}} | {{md (join .Changes ", ")}} |
{{end}}
## Changes
{{range .Changes}}
- {{md .ID}}: {{md .Dir}} ({{date .At}}){{else}}
No change ids recorded in the period.{{end}}

## Capacity and forecast
{{if .Capacity}}
| when | sweep | SLO-max | knee | headroom | demand reaches SLO-max |
|---|---|---|---|---|---|
{{range .Capacity}}| {{date .At}} | {{md .Dir}} | {{md .SLOMax}} | {{md .Knee}} | {{md .Headroom}} | {{if and .LowerBound .ReachesAt}}not before {{end}}{{reaches .ReachesAt}} |
{{end}}{{else}}
No sweep in the period: capacity was not measured.
{{end}}
## Efficiency
{{if .Efficiency}}
| result | part | GPU utilisation (mean) | GPU idle share | output tokens/s | J per output token | $ per million output tokens |
|---|---|--:|--:|--:|--:|--:|
{{range .Efficiency}}| {{md .Dir}} | {{md .Part}} | {{pctp .GPUUtilMean}} | {{pctp .GPUIdleShare}} | {{printf "%.1f" .OutputTokensPerS}} | {{num .JoulesPerOutputToken}} | {{num .CostPerMillionOutputTokensUSD}} |
{{end}}{{else}}
GPU utilisation was not measured in the period.
{{end}}
## Performance regressions
{{if .Regressions}}
| baseline | candidate | verdict | rows |
|---|---|---|---|
{{range .Regressions}}| {{md .Baseline}} | {{md .Candidate}} | {{md .Verdict}} | {{md (join .Rows "; ")}} |
{{end}}{{else}}
No two results of the same plan or mix in the period to compare.
{{end}}
## Open waivers
{{if .Waivers}}
| objective | stage | owner | reason | expires | days left |
|---|---|---|---|---|--:|
{{range .Waivers}}| {{md .Objective}} | {{md .Stage}} | {{md .Owner}} | {{md .Reason}} | {{day .Expires}} | {{.DaysLeft}} |
{{end}}{{else}}
No waiver still open at the end of the period.
{{end}}`))
