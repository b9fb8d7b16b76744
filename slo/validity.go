package slo

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Problem is a reason the run itself is invalid: what the numbers measure
// is not the server under the planned load.
type Problem struct {
	Stage string `json:"stage,omitempty"`
	// Check is one of "no_requests", "unreachable", "errors",
	// "client_bottleneck", "no_data".
	Check  string `json:"check"`
	Detail string `json:"detail"`
}

func (p Problem) String() string {
	if p.Stage == "" {
		return p.Check + ": " + p.Detail
	}
	return "stage " + p.Stage + ": " + p.Check + ": " + p.Detail
}

// StageCounts counts a stage's records.
type StageCounts struct {
	Requests uint64 `json:"requests"` // measured records, dropped included
	OK       uint64 `json:"ok"`
	Failed   uint64 `json:"failed"` // sent and failed (loadgen.ErrorKind.Counted)
	Dropped  uint64 `json:"dropped"`
	// CutAtEnd were cut by the load generator at the end of the grace
	// period: neither ok nor failed.
	CutAtEnd uint64 `json:"cut_at_end,omitempty"`
	Connect  uint64 `json:"connect_errors"`
	Warmup   uint64 `json:"warmup"`
}

func (c *StageCounts) add(r *loadgen.Record) {
	if r.Warmup {
		c.Warmup++
		return
	}
	c.Requests++
	switch {
	case r.OK():
		c.OK++
	case r.ErrorKind == loadgen.ErrDropped:
		c.Dropped++
	case r.ErrorKind == loadgen.ErrCutAtEnd:
		c.CutAtEnd++
	default:
		c.Failed++
		if r.ErrorKind == loadgen.ErrConnect {
			c.Connect++
		}
	}
}

// CountStage counts the records of stage.
func CountStage(stage string, records []loadgen.Record) StageCounts {
	var c StageCounts
	for i := range records {
		if records[i].Stage == stage {
			c.add(&records[i])
		}
	}
	return c
}

// CheckValidity looks for what makes a stage's run invalid: no requests,
// an unreachable server, too many errors, or a load generator that could
// not keep its schedule (dropped requests, late sends, CPU saturated;
// clientCPU is the generator's CPU use 0–1, negative when unknown).
func CheckValidity(stage string, records []loadgen.Record, v Validity, clientCPU float64) []Problem {
	j := NewJudge(nil, &Spec{})
	j.validity = v
	for i := range records {
		if records[i].Stage == stage {
			j.Add(&records[i])
		}
	}
	s := j.stages[stage]
	if s == nil {
		s = j.newStage(stage, nil)
	}
	return s.problems(v, clientCPU)
}

// problems checks the stage's running counts against the validity bounds.
func (s *stageJudge) problems(v Validity, clientCPU float64) []Problem {
	c := s.counts
	stage := s.name
	var out []Problem
	add := func(check, format string, a ...any) {
		out = append(out, Problem{Stage: stage, Check: check, Detail: fmt.Sprintf(format, a...)})
	}
	if c.Requests == 0 {
		add("no_requests", "no request was scheduled outside warm-up")
		return out
	}
	sent := c.OK + c.Failed
	switch {
	case c.OK == 0 && c.Connect > 0:
		add("unreachable", "no request succeeded; %d of %d failed to connect", c.Connect, sent)
	case sent > 0 && v.MaxErrorRate.CmpRatio(c.Failed, sent) > 0:
		add("errors", "%d of %d sent requests failed (%s), above the %s validity bound",
			c.Failed, sent, percent(float64(c.Failed)/float64(sent)), v.MaxErrorRate)
	}
	if v.MaxDropped.CmpRatio(c.Dropped, c.Requests) > 0 {
		add("client_bottleneck", "%d of %d requests were dropped (never sent: no free slot), above %s",
			c.Dropped, c.Requests, v.MaxDropped)
	}
	// p99 > bound exactly when fewer than the nearest rank of 99% are
	// within it; the figure shown comes from the histogram.
	if v.MaxScheduleLag > 0 && s.lagTotal > 0 && s.lagWithin < MustDecimal("0.99").CeilMul(s.lagTotal) {
		p99, _ := rankValue(s.lagHist, MustDecimal("0.99").CeilMul(s.lagTotal))
		add("client_bottleneck", "p99 schedule lag %s is above %s: requests were sent late (%d of %d within it)",
			p99, v.MaxScheduleLag, s.lagWithin, s.lagTotal)
	}
	if clientCPU >= 0 && !v.MaxClientCPU.IsZero() {
		// clientCPU > limit, compared at 0.01% resolution.
		if v.MaxClientCPU.CmpRatio(uint64(clientCPU*10000+0.5), 10000) > 0 {
			add("client_bottleneck", "the load generator used %s of its CPU, above %s", percent(clientCPU), v.MaxClientCPU)
		}
	}
	return out
}
