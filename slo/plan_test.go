package slo

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const demoPlan = `
kind: Plan
name: chat-acceptance
target: http://127.0.0.1:8000
model: sim
slo: slo.yaml
mix: mix.yaml
seed: 7
validity:
  max_error_rate: 20%
  max_schedule_lag: 100ms
stages:
  - name: normal
    rate: 20
    arrival: poisson
    duration: 30s
    warmup: 5s
  - name: peak
    rate: 60
    arrival: gamma
    burstiness: 0.5
    duration: 1m
    objectives: [itl-p95, errors]
  - name: saturate
    concurrency: 64
    duration: 20s
    objectives: all
  - name: failover
    manual: true
    description: kill one replica during peak
waivers:
  - objective: manual
    stage: failover
    owner: bob
    reason: no second replica in the lab
    expires: 2026-09-30
`

func TestParsePlan(t *testing.T) {
	p, err := ParsePlan("plan.yaml", []byte(strings.TrimLeft(demoPlan, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "chat-acceptance" || p.Target != "http://127.0.0.1:8000" || p.Model != "sim" || p.Seed != 7 {
		t.Fatalf("header: %+v", p)
	}
	if p.Validity.MaxErrorRate.String() != "20%" || p.Validity.MaxScheduleLag != 100*ms1 || p.Validity.MaxDropped.String() != "1%" {
		t.Fatalf("validity: %+v", p.Validity)
	}
	if len(p.Stages) != 4 {
		t.Fatalf("stages: %d", len(p.Stages))
	}
	n, pk, sat, fo := p.Stages[0], p.Stages[1], p.Stages[2], p.Stages[3]
	if n.Rate != 20 || n.Duration != 30*time.Second || n.Warmup != 5*time.Second || n.Arrival != "poisson" || n.Objectives != nil {
		t.Fatalf("normal: %+v", n)
	}
	if pk.Burstiness != 0.5 || !pk.Applies("errors") || pk.Applies("ttft-p99") {
		t.Fatalf("peak: %+v", pk)
	}
	if sat.Concurrency != 64 || sat.Objectives != nil || !sat.Applies("anything") {
		t.Fatalf("saturate: %+v", sat)
	}
	if !fo.Manual || fo.Description == "" {
		t.Fatalf("failover: %+v", fo)
	}
	if p.Resolve("slo.yaml") != "slo.yaml" || (&Plan{File: "a/b/plan.yaml"}).Resolve("../s.yaml") != "a/s.yaml" {
		t.Fatal("Resolve")
	}
}

func TestParsePlanErrors(t *testing.T) {
	head := "kind: Plan\nname: p\ntarget: http://127.0.0.1:8000\nmodel: m\nslo: s.yaml\nmix: m.yaml\nstages:\n"
	for _, c := range []struct{ name, stages, want string }{
		{"rate and concurrency", "  - {name: a, rate: 1, concurrency: 2, duration: 1s}\n", "plan.yaml:8: stages[0].concurrency: give rate (open loop) or concurrency"},
		{"no load", "  - {name: a, duration: 1s}\n", "plan.yaml:8: stages[0].rate: required"},
		{"no duration", "  - {name: a, rate: 5}\n", "plan.yaml:8: stages[0].duration missing"},
		{"bad duration", "  - name: a\n    rate: 5\n    duration: 3 minutes\n", `plan.yaml:10: stages[0].duration: "3 minutes" is not a duration`},
		{"warmup too long", "  - {name: a, rate: 5, duration: 10s, warmup: 10s}\n", "stages[0].warmup: 10s leaves nothing"},
		{"bad arrival", "  - {name: a, rate: 5, duration: 10s, arrival: uniform}\n", `stages[0].arrival: "uniform": want constant, poisson or gamma`},
		{"burstiness without gamma", "  - {name: a, rate: 5, duration: 10s, burstiness: 2}\n", "stages[0].burstiness: only gamma arrivals"},
		{"arrival closed loop", "  - {name: a, concurrency: 5, duration: 10s, arrival: poisson}\n", "a closed-loop (concurrency) stage has no arrival"},
		{"manual with load", "  - {name: a, manual: true, rate: 5}\n", "stages[0].rate: a manual stage is not run"},
		{"duplicate stage", "  - {name: a, rate: 1, duration: 1s}\n  - {name: a, rate: 2, duration: 1s}\n", `plan.yaml:9: stages[1].name: "a" is already the name of stages[0]`},
		{"zero rate", "  - {name: a, rate: 0, duration: 1s}\n", "stages[0].rate: must be > 0"},
		{"objectives empty", "  - {name: a, rate: 1, duration: 1s, objectives: []}\n", "stages[0].objectives: empty"},
		{"bad name", "  - {name: 'a b', rate: 1, duration: 1s}\n", `stages[0].name: "a b" is not a name`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParsePlan("plan.yaml", []byte(head+c.stages))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error\n%v\nwant\n%s", err, c.want)
			}
		})
	}
	_, err := ParsePlan("plan.yaml", []byte("kind: Plan\nname: p\ntarget: 127.0.0.1:8000\nmodel: m\nslo: s\nmix: m\nstages: [{name: a, rate: 1, duration: 1s}]\n"))
	if err == nil || !strings.Contains(err.Error(), `plan.yaml:3: target: "127.0.0.1:8000" is not a URL`) {
		t.Fatalf("target: %v", err)
	}
}

func TestLoadPlanCrossChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.TrimLeft(s, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("slo.yaml", chatSLO)
	p, err := LoadPlan(write("plan.yaml", demoPlan))
	if err != nil {
		t.Fatal(err)
	}
	if p.SLO == nil || p.SLO.Name != "chat" || len(p.AllWaivers()) != 2 {
		t.Fatalf("SLO not loaded: %+v", p.SLO)
	}
	bad := strings.Replace(demoPlan, "objectives: [itl-p95, errors]", "objectives: [itl-p95, eror]", 1)
	bad = strings.Replace(bad, "stage: failover", "stage: normal", 1)
	_, err = LoadPlan(write("bad.yaml", bad))
	if err == nil || !strings.Contains(err.Error(), `stages[1].objectives[1]: "eror" is not an objective`) ||
		!strings.Contains(err.Error(), `waivers[0].stage: "normal" is not a manual stage`) {
		t.Fatalf("cross-check: %v", err)
	}
	_, err = LoadPlan(write("missing.yaml", strings.Replace(demoPlan, "slo: slo.yaml", "slo: nope.yaml", 1)))
	if err == nil || !strings.Contains(err.Error(), "missing.yaml:5: slo: ") {
		t.Fatalf("missing slo: %v", err)
	}
	write("broken.yaml", "kind: SLO\nname: x\n")
	_, err = LoadPlan(write("p2.yaml", strings.Replace(demoPlan, "slo: slo.yaml", "slo: broken.yaml", 1)))
	if err == nil || !strings.Contains(err.Error(), "broken.yaml:1: owner missing") {
		t.Fatalf("broken slo: %v", err)
	}
}

// A plan with two independent mistakes, far apart, reports both with their
// lines, each an *Error that errors.As finds.
func TestParsePlanReportsEveryMistake(t *testing.T) {
	data := "kind: Plan\nname: p\ntarget: 127.0.0.1:8000\nmodel: m\nslo: s.yaml\nmix: m.yaml\nstages:\n" +
		"  - name: a\n    rate: 5\n    duration: 3 minutes\n"
	_, err := ParsePlan("plan.yaml", []byte(data))
	want := `plan.yaml:3: target: "127.0.0.1:8000" is not a URL (http://host:port, https://…, grpc://…)` + "\n" +
		`plan.yaml:10: stages[0].duration: "3 minutes" is not a duration (want e.g. 150ms, 2s, 5m, 30d)`
	if err == nil || err.Error() != want {
		t.Fatalf("got\n%v\nwant\n%s", err, want)
	}
	var es Errors
	var e *Error
	if !errors.As(err, &es) || len(es) != 2 || es[0].Line != 3 || es[1].Line != 10 || !errors.As(err, &e) || e != es[0] {
		t.Fatalf("%T %v: want Errors of two *Error, on lines 3 and 10", err, err)
	}
}

// A plan is copied byte for byte into the evidence pack, so a credential
// in its target is refused at its line; an environment reference in its
// place is expanded when the target is used, and the copy keeps the
// reference only.
func TestPlanTargetCredentials(t *testing.T) {
	plan := func(target string) string {
		return strings.Replace(demoPlan, "target: http://127.0.0.1:8000", "target: "+target, 1)
	}
	for _, c := range []struct{ target, what string }{
		{"http://user:SECRET@127.0.0.1:8000", `the password of user \"user\"`},
		{"http://127.0.0.1:8000/v1?api_key=SECRET", `query parameter \"api_key\"`},
		{"https://sk-SECRET@llm.example.com", "user info"},
		{"http://user:${TOKEN}x@127.0.0.1:8000", `the password of user \"user\"`},
	} {
		_, err := ParsePlan("plan.yaml", []byte(plan(c.target)))
		var e *Error
		if !errors.As(err, &e) || e.Line != 4 || e.Field != "target" || !strings.Contains(err.Error(), "carries a credential") ||
			!strings.Contains(strconvQuote(err.Error()), c.what) {
			t.Errorf("%s: %v", c.target, err)
		}
		if err != nil && strings.Contains(err.Error(), "SECRET") {
			t.Errorf("the error repeats the secret: %v", err)
		}
	}
	for _, ok := range []string{"http://127.0.0.1:8000/v1?api-version=2024-06-01", "http://user:${TAILGATE_TEST_TOKEN}@127.0.0.1:8000",
		"http://127.0.0.1:8000/?api_key=${TAILGATE_TEST_TOKEN}"} {
		p, err := ParsePlan("plan.yaml", []byte(plan(ok)))
		if err != nil {
			t.Errorf("%s: %v", ok, err)
			continue
		}
		if strings.Contains(ok, "${") {
			if _, err := p.TargetURL(); err == nil || !strings.Contains(err.Error(), "plan.yaml:4: target: ${TAILGATE_TEST_TOKEN} is not set") {
				t.Errorf("unset reference: %v", err)
			}
			t.Setenv("TAILGATE_TEST_TOKEN", "s3cr3t")
			u, err := p.TargetURL()
			if err != nil || !strings.Contains(u, "s3cr3t") || strings.Contains(u, "${") {
				t.Errorf("expanded %q, %v", u, err)
			}
			if strings.Contains(p.Target, "s3cr3t") {
				t.Errorf("the plan's own target holds the secret: %q", p.Target)
			}
			os.Unsetenv("TAILGATE_TEST_TOKEN")
		}
	}
}

func strconvQuote(s string) string { return strings.ReplaceAll(s, `"`, `\"`) }
