package slo

import (
	"fmt"
	"sort"
	"time"

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
	Failed   uint64 `json:"failed"` // sent and failed
	Dropped  uint64 `json:"dropped"`
	Connect  uint64 `json:"connect_errors"`
	Warmup   uint64 `json:"warmup"`
}

// CountStage counts the records of stage.
func CountStage(stage string, records []loadgen.Record) StageCounts {
	var c StageCounts
	for i := range records {
		r := &records[i]
		if r.Stage != stage {
			continue
		}
		if r.Warmup {
			c.Warmup++
			continue
		}
		c.Requests++
		switch {
		case r.OK():
			c.OK++
		case r.ErrorKind == loadgen.ErrDropped:
			c.Dropped++
		default:
			c.Failed++
			if r.ErrorKind == loadgen.ErrConnect {
				c.Connect++
			}
		}
	}
	return c
}

// CheckValidity looks for what makes a stage's run invalid: no requests,
// an unreachable server, too many errors, or a load generator that could
// not keep its schedule (dropped requests, late sends, CPU saturated;
// clientCPU is the generator's CPU use 0–1, negative when unknown).
func CheckValidity(stage string, records []loadgen.Record, v Validity, clientCPU float64) []Problem {
	c := CountStage(stage, records)
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
	if v.MaxScheduleLag > 0 {
		var lags []time.Duration
		for i := range records {
			r := &records[i]
			if r.Stage == stage && !r.Warmup && r.ErrorKind != loadgen.ErrDropped {
				lags = append(lags, scheduleLag(r))
			}
		}
		if len(lags) > 0 {
			sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
			p99 := lags[MustDecimal("0.99").CeilMul(uint64(len(lags)))-1]
			if p99 > v.MaxScheduleLag {
				add("client_bottleneck", "p99 schedule lag %s is above %s: requests were sent late", p99, v.MaxScheduleLag)
			}
		}
	}
	if clientCPU >= 0 && !v.MaxClientCPU.IsZero() {
		// clientCPU > limit, compared at 0.01% resolution.
		if v.MaxClientCPU.CmpRatio(uint64(clientCPU*10000+0.5), 10000) > 0 {
			add("client_bottleneck", "the load generator used %s of its CPU, above %s", percent(clientCPU), v.MaxClientCPU)
		}
	}
	return out
}
