// Package results owns the layout of a results directory and its readers
// and writers: what `run`, `validate`, `check` and `sign` read and write,
// under one set of file names.
//
// A run directory holds, as results arrive:
//
//	requests.jsonl     one line per request (loadgen.Record's JSON form), appended as each ends
//	latency.hlog       HdrHistogram interval log, one interval a second
//	telemetry.jsonl    server /metrics and GPU samples, as sampled
//	queue_delay.json   the server's queue-delay histogram per stage (what queue_delay objectives judge)
//	summary.json       the typed Summary (schema tailgate.summary/v1), at the end, also when stopped
//
// and an acceptance (validate) directory adds verdict.json, junit.xml,
// manual.json, stages/NAME/ (a run directory per stage) and the evidence
// files that package evidence names (environment.json, inputs/, manifest).
// Its records are in the stages' run directories only (Dir.ReadRunRecords
// reads them as one stream); packs written before kept a plan-wide
// requests.jsonl too, which is read instead where present.
//
// Writers report failures as *WriteError, so a command can tell "results
// could not be written" (exit 3) from a bad input (exit 2). Readers read a
// file as a stream and tolerate what a killed or full-disk run leaves: a
// torn last line is reported, not fatal.
package results
