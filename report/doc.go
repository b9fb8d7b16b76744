// Package report turns results directories (a run, an acceptance run, a
// sweep) into one self-contained HTML file, or a Markdown summary for
// tickets and monthly reviews.
//
// The HTML needs no network and no JavaScript: styles are inline, every
// plot is an SVG drawn by gonum/plot and written into the page, and a
// Content-Security-Policy of default-src 'none' makes a browser refuse
// anything else. Its parts: summary and verdicts; the latency percentile
// spectrum (HDR style, a log scale of 1/(1 − q) on the percentile axis,
// every run, stage or level overlaid); latency and throughput over time
// with stage boundaries; a per-class breakdown; GPU utilisation beside the
// server's queue delay and TTFT over time, with the metric-theater buckets
// marked; and for a sweep, latency and goodput against load with the
// SLO-max and the knee marked.
//
// Figures come from the files, never recomputed differently: percentiles
// and time series from requests.jsonl (the metric table's definitions,
// warm-up left out), tables from summary.json, verdict.json and sweep.json,
// GPU and queue series from telemetry.jsonl (the queue delay of an
// interval is the increase of the server histogram's sum over that of its
// count).
package report
