// Package measure sums a run's records (package loadgen) up: the latency
// metric table and the rate table every consumer reads (summary.json, the
// slo package, the exporters, the report), the HDR histograms by class
// and by stage (Metrics, microseconds, 1 µs to 1 h, 3 significant
// digits), their mergeable state (histograms.json), and summary.json
// itself (Metrics.Summary), whose definitions key says what every figure
// means.
//
// Completions are per second of the measured window (first measured
// intended start to last end, drain included); offered and sent rates per
// second of the scheduled window (loadgen.Info.Scheduled: end of warm-up
// to the schedule's end, drain excluded).
//
// It imports loadgen, never the other way round: the runner sends and
// times requests and reads nothing of what is made of them here. One
// goroutine owns a Metrics (it is not safe for concurrent use), fed from
// the runner's output channel.
package measure
