// Package pipeline runs one load run: the runner's records, as they
// arrive, handed on one goroutine to sinks (requests.jsonl, latency.hlog,
// the HDR metrics, the progress display, the SLO judge, the Prometheus sink
// of --push, anything that implements Sink), with the server's and the
// GPUs' telemetry sampled beside it.
//
// A run is one or more load stages (run's --stages, one acceptance stage,
// one sweep level). At the end the pipeline assembles the typed summary
// (results.Summary): the load generator's figures, the telemetry summary,
// the per-stage queue-delay and energy windows, the metric-theater section,
// the validity of the run and, when the Spec carries an SLO, the verdicts;
// it writes summary.json and histograms.json (and verdict.json when judged)
// once, also when the run was interrupted or a sink failed. Callers read
// the judgement from the Result; none re-judges.
//
// A failing sink is reported (SinkError, with the records it lost) and the
// others go on; unless Spec.KeepGoing, the run stops sending, because its
// results on disk would be incomplete.
package pipeline
