package slo

import (
	"fmt"
	"math"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// Demand is the load a stage offered by itself, set where the schedule,
// not the server, decides how much is asked: an open loop's rate. A
// closed loop offers what the server serves and has no demand of its own.
type Demand struct {
	// OfferedPerS is the rate the schedule offered, requests per second.
	OfferedPerS float64
}

// applyDemand marks a floor the stage's offered load could not reach by
// itself NotApplicable: a fixed rate above what the load asks for says
// nothing of the server, whatever it does. The reachable rate is the most
// the floor's own measure could show had the server served every offered
// request at once and in full: the requests offered (of the floor's class
// and turn, failed and dropped ones too) over the measured window
// (requests_per_s, goodput_per_s), times the most output tokens a request
// asked for (output_tokens_per_s; with a request sent without max_tokens no
// bound is known and the floor applies). The measure can never exceed it,
// so a floor is set aside only when surely out of reach. A floor judged as
// a share of the offered load always applies.
func (oj *objectiveJudge) applyDemand(v *Verdict, d *Demand) {
	o := oj.o
	if d == nil || d.OfferedPerS <= 0 || o.Kind() != KindFloor || o.ShareOfOffered || v.Result == NoData || v.WindowS <= 0 {
		return
	}
	offered := fmt.Sprintf("offered %s req/s (%d requests in the %.1f s measured window)", fmtRate(d.OfferedPerS), oj.offered, v.WindowS)
	reqs := float64(oj.offered) / v.WindowS
	var reach float64
	var why string
	var by measure.Reach
	if oj.rate != nil {
		by = oj.rate.Reach
	}
	switch by {
	case measure.ReachRequests:
		reach = reqs
		why = fmt.Sprintf("%s can reach at most %s req/s", offered, fmtRate(reach))
	case measure.ReachTokens:
		if oj.unbounded || oj.maxTokens <= 0 {
			return
		}
		reach = reqs * float64(oj.maxTokens)
		why = fmt.Sprintf("%s × max %d tokens can reach at most %s tok/s", offered, oj.maxTokens, fmtRate(reach))
	default:
		return // input tokens: what the prompts hold, not bounded here
	}
	v.ReachablePerS, v.Offered = reach, oj.offered
	if o.Limit.Float() <= reach {
		return
	}
	v.Result = NotApplicable
	addNote(v, fmt.Sprintf("not applicable: %s, below the floor of %s/s whatever the server does (demand, not capacity)", why, o.Limit))
}

// fmtRate prints a rate with at most 3 significant digits below 100:
// "2", "256", "12.5", "1.99".
func fmtRate(r float64) string {
	if r >= 100 || r == math.Trunc(r) {
		return fmt.Sprintf("%.0f", r)
	}
	return fmt.Sprintf("%.3g", r)
}
