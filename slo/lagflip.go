package slo

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// The lag-flip rule. Open-loop latencies (TTFT, TTFAT, E2E) run from the
// intended start, so they include the load generator's schedule lag (send
// − intended start) by design: a late send is the server's queue as a
// user would meet it, unless the lateness was the generator's own. An event
// that missed its threshold only by that lag (value > threshold ≥ value −
// lag) could be the generator's doing; when counting every such event as
// met would change a FAIL or INCONCLUSIVE verdict, the verdict may be the
// generator's and the stage is invalid (client_bottleneck). A PASS cannot
// flip: lag only ever adds misses.

// lagMeasured reports whether m runs from the intended start, so that it
// includes schedule lag.
func lagMeasured(m Metric) bool { return m == TTFT || m == TTFAT || m == E2E }

// countLagMiss counts r's sample when it missed only by its schedule lag.
func (oj *objectiveJudge) countLagMiss(r *loadgen.Record) {
	if !lagMeasured(oj.o.Metric) {
		return
	}
	v, ok := oj.metric.Of(r)
	if !ok || oj.o.meets(v) {
		return
	}
	if lag := scheduleLag(r); lag > 0 && oj.o.meets(v-lag) {
		oj.lagMissed++
	}
}

// lagFlip is the status v would have with its lag-only misses counted as
// met, and whether that differs from v.Result.
func (oj *objectiveJudge) lagFlip(v *Verdict) (Status, bool) {
	if v.LagMissed == 0 || (v.Result != Fail && v.Result != Inconclusive) {
		return v.Result, false
	}
	p0, _ := oj.o.ErrorBudget()
	s, _ := Decide(v.Total-v.Good-v.LagMissed, v.Total, p0, oj.conf)
	return s, s != v.Result
}

// lagFlips notes on each verdict of vs whose outcome its lag-only misses
// could change, and returns one client_bottleneck problem per such
// verdict; clientCPU (0–1, negative: unknown) names the generator's share.
func (s *stageJudge) lagFlips(vs []Verdict, clientCPU float64) []Problem {
	var out []Problem
	for i := range vs {
		v := &vs[i]
		for _, oj := range s.objs {
			if oj.o.Name != v.Objective {
				continue
			}
			to, flips := oj.lagFlip(v)
			if !flips {
				break
			}
			d := fmt.Sprintf("objective %s: %d of %d events missed %s only by the load generator's schedule lag; counted as met, %s would be %s",
				v.Objective, v.LagMissed, v.Total, v.ThresholdText, v.Result, to)
			if clientCPU >= 0 {
				d += fmt.Sprintf(" (the generator used %s of its CPU)", percent(clientCPU))
			}
			addNote(v, d)
			out = append(out, Problem{Stage: s.name, Check: "client_bottleneck", Detail: d})
			break
		}
	}
	return out
}
