package loadgen

import (
	"strconv"
	"strings"
)

// Describe is the load as summary.json's run.load block shows it: mode,
// arrival process, stages (LEVEL@DURATION[~RAMP], cN for concurrencies),
// limits and seed. A trace replay names no arrival process or rate: its
// timestamps are the schedule.
func (o Options) Describe() map[string]any {
	m := map[string]any{"timeout_s": o.Timeout.Seconds(), "seed": o.Seed}
	if o.Grace < 0 {
		m["grace_s"] = 0.0
	} else if o.Grace > 0 {
		m["grace_s"] = o.Grace.Seconds()
	}
	switch {
	case o.Trace:
		m["mode"] = "trace"
		m["max_inflight"] = o.MaxInFlight
	case o.Closed:
		m["mode"] = "closed"
	default:
		m["mode"] = "open"
		m["arrival"] = string(o.Arrival)
		m["max_inflight"] = o.MaxInFlight
		if o.Arrival == ArrivalGamma {
			m["burstiness"] = o.Burstiness
		}
		if o.Arrival == ArrivalUniform {
			m["jitter"] = o.Jitter
		}
	}
	var stages []string
	for _, s := range o.Stages {
		var lvl string
		switch {
		case o.Trace:
			lvl = "trace"
		case o.Closed:
			lvl = "c" + strconv.Itoa(s.Concurrency)
		default:
			lvl = strconv.FormatFloat(s.Rate, 'g', -1, 64)
		}
		st := lvl + "@" + s.Duration.String()
		if s.Ramp > 0 {
			st += "~" + s.Ramp.String()
		}
		stages = append(stages, st)
	}
	m["stages"] = strings.Join(stages, ",")
	if o.Requests > 0 {
		m["requests"] = o.Requests
	}
	if o.WarmupRequests > 0 {
		m["warmup_requests"] = o.WarmupRequests
	}
	if o.WarmupDuration > 0 {
		m["warmup_s"] = o.WarmupDuration.Seconds()
	}
	return m
}
