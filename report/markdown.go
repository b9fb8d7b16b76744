package report

import (
	"fmt"
	"io"
	"strings"
)

// WriteMarkdown writes a Markdown summary of srcs for tickets and monthly
// reviews: the summary and verdict tables, the sweep's SLO-max, knee and
// headroom, metric-theater findings and warnings. It has no plots.
func WriteMarkdown(w io.Writer, srcs []*Source, opt Options) error {
	pg, err := buildTables(srcs, opt)
	if err != nil {
		return err
	}
	b := &strings.Builder{}
	fmt.Fprintf(b, "# %s\n\n_Generated %s by tailgate %s. Latencies in ms, from each request's intended start; warm-up left out._\n", pg.Title, pg.Generated, pg.Version)
	for _, s := range pg.Sources {
		fmt.Fprintf(b, "\n## %s (%s)\n\n", s.Dir, s.Kind)
		if s.Status != "" {
			fmt.Fprintf(b, "**Result: %s**\n\n", s.Status)
		}
		fmt.Fprintln(b, "| part | sent | ok | errors | completed/s | goodput/s | "+mdCells(pg.PartRateColsMD)+mdCells(pg.PartColsMD)+"GPU util | GPU idle | queue p99 | validity |")
		fmt.Fprintln(b, "|---|--:|--:|--:|--:|--:|"+strings.Repeat("--:|", len(pg.PartRateColsMD)+len(pg.PartColsMD))+"---|--:|--:|---|")
		for _, p := range s.Parts {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s | %s | %s%s%s | %s | %s | %s |\n", md(p.Name), p.Sent, p.OK, p.Errors,
				p.ReqPerS, p.GoodPerS, mdCells(p.RatesMD), mdCells(p.LatMD), p.GPU, p.IdleShare, p.QueueP99, md(p.Valid))
		}
		if len(s.Verdicts) > 0 {
			fmt.Fprintln(b, "\n| objective | stage | class | measured | threshold | target | status |")
			fmt.Fprintln(b, "|---|---|---|--:|--:|--:|---|")
			for _, v := range s.Verdicts {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", md(v.Objective), md(v.Stage), md(v.Class), md(v.Measured), md(v.Threshold), v.Target, v.Status)
			}
		}
		for _, p := range s.Problems {
			fmt.Fprintf(b, "\n- problem: %s", md(p))
		}
		if sw := s.Sweep; sw != nil {
			sep := ":"
			if sw.SLOMaxBound {
				sep = ""
			}
			fmt.Fprintf(b, "\n### Sweep (%s loop)\n\n- **SLO-max%s** %s\n- **Knee:** %s\n", sw.Mode, sep, md(sw.SLOMax), md(sw.Knee))
			if sw.Headroom != "" {
				fmt.Fprintf(b, "- **Headroom:** %s\n", md(sw.Headroom))
			}
			fmt.Fprintln(b, "\n| level | offered/s | achieved/s | goodput/s | "+mdCells(pg.LevelCols)+"GPU util | queue p99 | verdict |")
			fmt.Fprintln(b, "|---|--:|--:|--:|"+strings.Repeat("--:|", len(pg.LevelCols))+"--:|--:|---|")
			for _, l := range sw.Levels {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s%s | %s | %s |\n", l.Name, l.Offered, l.Achieved, l.Goodput, mdCells(l.Lat), l.GPU, l.Queue, md(l.Verdict))
			}
			for _, w := range sw.Warnings {
				fmt.Fprintf(b, "\n- warning: %s", md(w))
			}
		}
		if len(s.Theater) > 0 {
			fmt.Fprintln(b, "\n**Metric theater:** the GPUs looked busy while users waited longer:")
			for _, t := range s.Theater {
				fmt.Fprintf(b, "- %s %s: %s\n", md(t.Part), t.When, md(t.Why))
			}
		}
		for _, p := range s.Parts {
			for _, r := range p.Invalid {
				fmt.Fprintf(b, "\n- %s: invalid: %s", md(p.Name), md(r))
			}
			for _, w := range p.Warnings {
				fmt.Fprintf(b, "\n- %s: warning: %s", md(p.Name), md(w))
			}
		}
		fmt.Fprintln(b)
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// md escapes the characters that would break a table cell.
// mdCells are cells of a Markdown row, each followed by " | ".
func mdCells(cells []string) string {
	out := ""
	for _, c := range cells {
		out += c + " | "
	}
	return out
}

func md(s string) string {
	return strings.NewReplacer("|", "\\|", "\n", " ").Replace(s)
}
