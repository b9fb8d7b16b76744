package measure

import (
	"time"

	"github.com/tailgate-llm/tailgate/results/schema"
)

// runDefinitionsTable define the runner's figures in summary.json: the three
// request rates and their windows, cut_at_end and the self-check. The
// summary writes them beside Definitions.
var runDefinitionsTable = map[string]string{
	"offered_per_s":    "requests the schedule made due (sent or dropped) per second over the scheduled window; in closed loop the schedule offers what it sends",
	"sent_per_s":       "requests sent per second over the scheduled window; below offered_per_s when requests were dropped at the in-flight cap",
	"scheduled_window": "from the end of warm-up to the schedule's end, or to when sending stopped sooner (request count reached, prompts exhausted, interrupt, stop); excludes the drain after it",
	"measured_window":  "from the first measured request's intended start to the last measured request's end, the drain after the schedule included",
	"grace":            "how long requests still in flight at the schedule's end may take to finish before they are cut",
	"cut_at_end":       "requests still in flight when the grace period after the schedule's end ran out, cancelled by the load generator; counted apart from errors and left out of error rates",
	"self_check":       "whether the load generator may have distorted the figures: schedule lag moved a reported TTFT, TTFAT or E2E quantile (p50, p90, p99, each judged when at least 10 events lie beyond it) by more than the stated share (max_shift, default 10%), more than 1 ms, and past the 95% sampling interval of the same figure less each request's lag (on-time sends could not plausibly have given it); or its own CPU was above 90% of its cores while sending. The cause of late sends is named: the generator's own CPU, the machine's run queue (other processes: /proc/stat, /proc/pressure/cpu), the in-flight cap, or unknown",
	"stopped":          "the run was stopped early by the tool itself (e.g. results could no longer be written), not by the user; requests in flight then are cancelled",
}

// PerSecond is n over the window w: the one rate computation of
// throughput and goodput, for summary.json and the SLO judge's floors alike.
func PerSecond[N int64 | uint64](n N, w time.Duration) float64 { return float64(n) / w.Seconds() }

// rates fills t's offered and sent rates over a scheduled window of
// sched seconds, and the window lengths.
func (g *Group) rates(t *schema.Throughput, sched float64) {
	t.MeasuredWindowS = (g.last - g.first).Seconds()
	if sched <= 0 {
		return
	}
	t.ScheduledWindowS = sched
	t.OfferedPerS = float64(g.Sent+g.Dropped) / sched
	t.SentPerS = float64(g.Sent) / sched
}
