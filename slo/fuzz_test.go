package slo

import (
	"errors"
	"testing"
)

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(chatSLO))
	f.Add([]byte("kind: SLO\nname: x\nowner: o\nobjectives: [{name: a, metric: ttft, threshold: 5O0ms, target: 99%}]\n"))
	f.Add([]byte("kind: SLO\nname: &a x\nowner: *a\nobjectives: [{name: a, metric: error_rate, threshold: 1%}]\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("f.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			for _, e := range es {
				if e.File != "f.yaml" || e.Err == nil {
					t.Fatalf("bad error %+v", e)
				}
			}
			return
		}
		seen := map[string]bool{}
		for _, o := range s.Objectives {
			if o.Name == "" || seen[o.Name] || o.Kind() == "" {
				t.Fatalf("objective %+v", o)
			}
			seen[o.Name] = true
			switch o.Kind() {
			case KindLatency:
				if o.Threshold <= 0 || o.Target.IsZero() || o.Target.CmpRatio(1, 1) < 0 {
					t.Fatalf("latency %+v", o)
				}
			case KindRatio:
				if o.Limit.CmpRatio(1, 1) < 0 {
					t.Fatalf("ratio %+v", o)
				}
			}
		}
		for _, w := range s.Waivers {
			if w.Owner == "" || w.Reason == "" || w.Expires.IsZero() || !seen[w.Objective] {
				t.Fatalf("waiver %+v", w)
			}
		}
	})
}

func FuzzParsePlan(f *testing.F) {
	f.Add([]byte(demoPlan))
	f.Add([]byte("kind: Plan\nname: p\ntarget: http://h:1\nmodel: m\nslo: s\nmix: m\nstages: [{name: a, concurrency: 2, duration: 1s}]\n"))
	f.Add([]byte("kind: Plan\nstages: [{name: a, manual: true, rate: 1}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan("p.yaml", data)
		if err != nil {
			var es Errors
			if !errors.As(err, &es) || len(es) == 0 {
				t.Fatalf("error %T %v is not Errors", err, err)
			}
			return
		}
		seen := map[string]bool{}
		for _, s := range p.Stages {
			if s.Name == "" || seen[s.Name] {
				t.Fatalf("stage %+v", s)
			}
			seen[s.Name] = true
			if s.Manual {
				if s.Rate != 0 || s.Concurrency != 0 || s.Duration != 0 {
					t.Fatalf("manual stage with load %+v", s)
				}
				continue
			}
			if (s.Rate > 0) == (s.Concurrency > 0) || s.Duration <= 0 || s.Warmup >= s.Duration {
				t.Fatalf("stage %+v", s)
			}
		}
	})
}
