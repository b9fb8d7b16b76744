package slo

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Per-record measurements come from loadgen's metric table, which truncates
// every instant to the microsecond first, exactly as Record.MarshalJSON
// does, so a live record and its saved copy measure the same.

func trunc(d time.Duration) time.Duration { return loadgen.TruncMicros(d) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// scheduleLag is r's send lateness; unlike the metric's samples it is
// defined for failed requests too (validity judges every sent request).
func scheduleLag(r *loadgen.Record) time.Duration { return loadgen.ScheduleLagOf(r) }
