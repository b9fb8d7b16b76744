// Package slo reads SLO and plan files, judges a run's records against the
// objectives, applies waivers, and holds the error-budget and burn-rate
// arithmetic of the operate phase.
//
// # Model
//
// An objective is a metric, a threshold and, for latency metrics, a target
// fraction: "99% of chat requests get TTFT ≤ 500 ms". Three kinds exist:
//
//   - latency (ttft, ttfat, icl, itl, tpot, e2e, schedule_lag, queue_delay):
//     the fraction of events whose value is ≤ threshold must be ≥ target. An
//     event is one successful request (itl: one output token; icl: one chunk
//     gap). A value exactly at the threshold meets it.
//   - ratio (error_rate): failed requests / all requests ≤ threshold.
//   - floor (output_tokens_per_s, input_tokens_per_s, requests_per_s,
//     goodput_per_s): a count of successful work over the measured window
//     ≥ threshold; with share_of_offered (requests_per_s, goodput_per_s)
//     completed (good) requests / offered requests ≥ threshold. Given the
//     stage's Demand (a sweep's open-loop level), a fixed floor above what
//     the offered load could show whatever the server does is N/A there
//     (demand.go).
//
// # Populations
//
// Warm-up records are left out of everything. Latency objectives count
// successful requests only, the same population as the summary's
// histograms, so "99% ≤ 500 ms" agrees with "p99 ≤ 500 ms"; failures are the
// error_rate objective's business (a spec with latency objectives and no
// error_rate objective draws a warning). TPOT counts requests with at least
// two output tokens; TTFAT requests with an answer token; ICL, ITL and TPOT
// streamed answers only (one that came as one body has no gaps: an
// objective with none is NO_DATA, never PASS). error_rate counts every sent
// record of the stage and every error kind unless the objective names
// kinds; it leaves out requests the load generator dropped (never sent) or
// cut at the end of its grace period (cut_at_end), unless named, and the
// verdict says how many. Floor objectives count
// successful requests and their tokens over the measured window: the first
// intended start to the last end of the stage's sent, non-warm-up records
// (all classes), unless the caller gives a window.
//
// # Exactness
//
// A Judge counts, per objective and stage, the events within the threshold
// and all events as records arrive (memory stays flat however long the
// run), at the microsecond resolution of requests.jsonl: every instant is
// truncated to the microsecond first, so judging the live records and
// judging the saved file give the same verdict. Only the quantile shown
// beside a verdict comes from an HDR histogram. Targets and thresholds are kept as the decimals
// written in the file and compared in integers: 999 good of 1000 meets
// "99.9%" exactly.
//
// # Verdicts and exit codes
//
// Each objective × stage gets a Verdict: PASS, FAIL, WAIVED (a failure, or a
// missing measurement, that an unexpired waiver covers; the underlying
// result stays in Verdict.Result) or NO_DATA (nothing to measure: no
// eligible event, or no queue-delay telemetry). NO_DATA makes the run
// invalid (exit 3): an acceptance test that measured nothing has not
// passed. See Report.ExitCode.
package slo
