// Package prom exports tailgate's figures to Prometheus through
// client_golang, under one fixed contract of names and labels (names.go):
// request and error counters, TTFT/ITL/TPOT/E2E histograms (classic
// buckets holding every SLO threshold exactly, plus native histograms),
// per-objective SLI event counters, error budget and burn-rate gauges,
// build info and the canary's reload gauges.
//
// A Sink is a pipeline.Sink fed by loadgen.Records. Every figure comes
// from loadgen's metric table and every good/bad event from the slo
// package's per-record rules (slo/events.go), so a histogram, a verdict
// and an SLI counter never disagree about what a record measured. The
// canary (package canary) serves the registry at /metrics; tailgate run
// and validate --push send a run's final metrics to a Pushgateway (Push).
//
// How objective kinds become events: per-request latency objectives
// (ttft, ttfat, tpot, e2e) give one event per request, itl one per output
// token, icl one per chunk gap, error_rate one per request (ok = good).
// Floor objectives (output_tokens_per_s, goodput_per_s, …) are rates over
// a stretch of load and queue_delay comes from the server's histogram:
// neither has per-record events, so neither has event series; a low-rate
// canary cannot judge them, and acceptance does.
package prom
