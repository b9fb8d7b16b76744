package slo

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

const chatSLO = `
kind: SLO
name: chat
owner: inference-team
window: 28d
goodput:
  ttft: 500ms
  tpot: 50ms
objectives:
  - name: ttft-p99
    metric: ttft
    threshold: 500ms
    target: 99%
    class: chat
  - name: itl-p95
    metric: itl
    threshold: 50ms
    target: 0.95
  - name: errors
    metric: error_rate
    threshold: 1%
    error_kinds: [http_5xx, timeout]
  - name: tokens
    metric: output_tokens_per_s
    threshold: 1000
  - name: goodput
    metric: goodput_per_s
    threshold: 2.5
waivers:
  - objective: itl-p95
    stage: peak
    owner: alice
    reason: known decode regression, INF-123
    expires: 2026-12-31
`

func TestParseSpec(t *testing.T) {
	t.Parallel()
	s := mustSpec(t, chatSLO)
	if s.Name != "chat" || s.Owner != "inference-team" || s.Window != 28*24*time.Hour {
		t.Fatalf("header: %+v", s)
	}
	if s.Goodput.TTFT != 500*ms1 || s.Goodput.TPOT != 50*ms1 {
		t.Fatalf("goodput: %+v", s.Goodput)
	}
	if len(s.Objectives) != 5 {
		t.Fatalf("objectives: %d", len(s.Objectives))
	}
	o := s.Objectives[0]
	if o.Kind() != KindLatency || o.Threshold != 500*ms1 || o.Target.String() != "99%" || o.Class != "chat" || o.Line != 9 {
		t.Fatalf("objective 0: %+v", o)
	}
	if e := s.Objectives[2]; e.Kind() != KindRatio || e.Limit.String() != "1%" || len(e.ErrorKinds) != 2 {
		t.Fatalf("objective 2: %+v", e)
	}
	if f := s.Objectives[4]; f.Kind() != KindFloor || f.Limit.String() != "2.5" {
		t.Fatalf("objective 4: %+v", f)
	}
	if b, ok := s.Objectives[2].ErrorBudget(); !ok || b != 0.01 {
		t.Fatalf("error budget of error_rate ≤ 1%%: %v", b)
	}
	w := s.Waivers[0]
	if w.Owner != "alice" || w.Stage != "peak" || !w.Expires.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("waiver: %+v", w)
	}
	if len(s.Warnings) != 0 {
		t.Fatalf("warnings: %v", s.Warnings)
	}
}

func TestParseSpecErrorsNameLineAndField(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, yaml, want string
	}{
		{"bad duration", `
kind: SLO
name: x
owner: o
objectives:
  - name: a
    metric: error_rate
    threshold: 1%
  - name: b
    metric: ttft
    threshold: 5O0ms
    target: 99%
`, `slo.yaml:10: objectives[1].threshold: "5O0ms" is not a duration`},
		{"unknown field", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - name: a\n    metric: ttft\n    treshold: 1s\n    target: 1\n",
			`slo.yaml:7: objectives[0].treshold: unknown field`},
		{"missing threshold", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - name: a\n    metric: ttft\n    target: 1\n",
			`slo.yaml:5: objectives[0].threshold missing`},
		{"unknown metric", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: latency, threshold: 1s}\n",
			`slo.yaml:5: objectives[0].metric: "latency" is not a metric`},
		{"target above 1", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: ttft, threshold: 1s, target: 101%}\n",
			`slo.yaml:5: objectives[0].target: 101% is not a fraction in (0, 1]`},
		{"target on a ratio", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - name: a\n    metric: error_rate\n    threshold: 1%\n    target: 99%\n",
			`slo.yaml:8: objectives[0].target: only latency objectives have a target`},
		{"ratio above 1", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: error_rate, threshold: 1.5}\n",
			`slo.yaml:5: objectives[0].threshold: 1.5 is above 1`},
		{"duplicate name", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: error_rate, threshold: 1%}\n  - {name: a, metric: requests_per_s, threshold: 1}\n",
			`slo.yaml:6: objectives[1].name: "a" is already the name of objectives[0]`},
		{"wrong kind", "kind: Plan\nname: x\nowner: o\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n",
			`slo.yaml:1: kind: "Plan": want SLO`},
		{"no owner", "kind: SLO\nname: x\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n",
			`slo.yaml:1: owner missing`},
		{"goodput without constraints", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: goodput_per_s, threshold: 1}\n",
			`slo.yaml:5: objectives[0].metric: goodput_per_s needs goodput constraints`},
		{"waiver of unknown objective", "kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\nwaivers:\n  - {objective: b, owner: o, reason: r, expires: 2026-01-01}\n",
			`slo.yaml:6: waivers[0].objective: "b" is not an objective of this SLO`},
		{"waiver bad expiry", "kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\nwaivers:\n  - objective: a\n    owner: o\n    reason: r\n    expires: next week\n",
			`slo.yaml:9: waivers[0].expires: "next week" is not an RFC 3339 date`},
		{"waiver without owner", "kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\nwaivers:\n  - {objective: a, reason: r, expires: 2026-01-01}\n",
			`slo.yaml:6: waivers[0].owner missing`},
		{"invalid yaml", "kind: SLO\nname: [x\n", `slo.yaml:`},
		{"not a mapping", "- a\n- b\n", `slo.yaml:1: want a mapping (key: value), got a list`},
		{"empty", "", `slo.yaml: empty file`},
		{"runbook not a URL", "kind: SLO\nname: x\nowner: o\nrunbook: wiki/chat\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n",
			`slo.yaml:4: runbook: "wiki/chat" is not an absolute http(s) URL`},
		{"objective runbook not http", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: error_rate, threshold: 1%, runbook: 'file:///etc/x'}\n",
			`slo.yaml:5: objectives[0].runbook: "file:///etc/x" is not an absolute http(s) URL`},
		{"threshold is a list", "kind: SLO\nname: x\nowner: o\nobjectives:\n  - name: a\n    metric: ttft\n    threshold: [1s]\n    target: 1\n",
			`slo.yaml:7: objectives[0].threshold: want a single value, got a list`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec("slo.yaml", []byte(strings.TrimLeft(c.yaml, "\n")))
			if err == nil {
				t.Fatal("no error")
			}
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T is not Errors", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\ndoes not contain\n%s", err, c.want)
			}
		})
	}
}

// runbook is optional at both levels; an objective's own wins, and a file
// without one parses as before.
func TestParseSpecRunbook(t *testing.T) {
	t.Parallel()
	s := mustSpec(t, `
kind: SLO
name: chat
owner: o
runbook: https://runbooks.example.com/chat
objectives:
  - {name: a, metric: error_rate, threshold: 1%}
  - {name: b, metric: ttft, threshold: 1s, target: 99%, runbook: "https://runbooks.example.com/chat#ttft"}
`)
	if s.Runbook != "https://runbooks.example.com/chat" {
		t.Fatalf("spec runbook %q", s.Runbook)
	}
	if got := s.RunbookURL(&s.Objectives[0]); got != s.Runbook {
		t.Errorf("objective a inherits %q, want the spec's", got)
	}
	if got := s.RunbookURL(&s.Objectives[1]); got != "https://runbooks.example.com/chat#ttft" {
		t.Errorf("objective b: %q, want its own", got)
	}
	plain := mustSpec(t, chatSLO)
	if plain.Runbook != "" || plain.RunbookURL(&plain.Objectives[0]) != "" {
		t.Errorf("no runbook field: got %q", plain.Runbook)
	}
}

func TestParseSpecCollectsEveryError(t *testing.T) {
	t.Parallel()
	_, err := ParseSpec("s.yaml", []byte("kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: ttft, threshold: 1x, target: 1}\n  - {name: b, metric: e2e, threshold: 1s, target: 2}\n"))
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 5 || es[1].Line != 6 {
		t.Fatalf("want two errors on lines 5 and 6, got %v", err)
	}
}

func TestSpecWarnsWithoutErrorRate(t *testing.T) {
	t.Parallel()
	s := mustSpec(t, "kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: ttft, threshold: 1s, target: 1}]\n")
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0], "no error_rate objective") {
		t.Fatalf("warnings: %v", s.Warnings)
	}
}

// Errors come sorted by line, whatever order the fields are read in
// (goodput is read before objectives), and a YAML syntax error names the
// line at fault.
func TestParseSpecErrorsSortedByLine(t *testing.T) {
	t.Parallel()
	_, err := ParseSpec("s.yaml", []byte("kind: SLO\nname: x\nowner: o\nobjectives:\n  - {name: a, metric: ttft, threshold: 1x, target: 1}\ngoodput: {ttft: soon}\n"))
	var es Errors
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 5 || es[1].Line != 6 {
		t.Fatalf("want errors on lines 5 then 6, got %v", err)
	}
	_, err = ParseSpec("s.yaml", []byte("kind: SLO\nname: x\nobjectives:\n  - name: a\n    metric: ttft\n   threshold: 1s\n"))
	if err == nil || !strings.HasPrefix(err.Error(), "s.yaml:6: bad YAML: ") {
		t.Fatalf("want a syntax error at line 6, got %v", err)
	}
}

// SLO files read durations in the one dialect of tailgate's files
// (yamlwalk.ParseDuration), the same as mix files.
func TestSpecDurationDialect(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"500ms", "1.5s", "250us", "1h30m", "30d", "4w", "5O0ms", "1.5d", "-1s", "2", "d", "99999999w"} {
		data := "kind: SLO\nname: x\nowner: o\ngoodput: {ttft: " + s + "}\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n"
		spec, err := ParseSpec("slo.yaml", []byte(data))
		want, werr := yamlwalk.ParseDuration(s)
		switch {
		case werr != nil && (err == nil || !strings.HasSuffix(err.Error(), "goodput.ttft: "+werr.Error())):
			t.Errorf("ttft: %s: got %v, want %v", s, err, werr)
		case werr == nil && (err != nil || spec.Goodput.TTFT != want):
			t.Errorf("ttft: %s: got %v, want %v", s, err, want)
		}
	}
}
