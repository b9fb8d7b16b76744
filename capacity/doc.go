// Package capacity is the capacity review: a sweep of load levels, each one
// pipeline run judged by package slo exactly as validate judges a stage, a
// search for the highest level that meets every objective (the SLO-max),
// the knee of the latency curve, and the headroom against current demand
// and its forecast growth.
//
// # Levels
//
// A level is an open-loop rate (requests per second, constant, Poisson or
// gamma arrivals) or a closed-loop concurrency. Each runs as its own
// pipeline run into OUT/levels/NAME (summary.json, requests.jsonl,
// latency.hlog, telemetry.jsonl) and is judged by a fresh slo.Judge fed
// the run's records, as `run --slo` and validate judge theirs. A level
// passes when its report is PASS, the run is valid (see pipeline), it is
// not saturated and it measured enough requests.
//
// # Minimum length of a level
//
// A verdict is PASS only when the sample decides it at the SLO's
// confidence (slo's confidence rule). The rule: a level measures at least
// MinRequests requests after its warm-up, the fewest that can pass the
// highest target fraction q of the SLO's latency objectives with no miss
// at that confidence: ⌈ln(1 − confidence) / ln q⌉ (at 95%: 99% → 299,
// 95% → 59, 99.9% → 2995; 99% when there is no latency objective). Open loop: the level lasts warm-up + 1.1 × MinRequests / rate
// (the 10% covers Poisson's spread), and at least MinDuration. Closed loop:
// the level stops after 2 × concurrency warm-up requests (the batch filling
// up) plus MinRequests, or at MaxDuration. A level that still measured
// fewer cannot pass; it is marked short.
//
// # Saturation
//
// A level is saturated when more than the error-rate limit of its requests
// failed, when more than 1% were dropped or cut at the end (still queued
// when the grace period ran out), or when queue delay grows without bound:
// the median TTFT (which holds the wait in the server's queue) of the last
// quarter of its measured requests, by intended start, is at least twice
// that of the first quarter and 50 ms more. A saturated level fails; an
// ascending sweep (--levels) stops at the first.
//
// # Search
//
// Given a range, the sweep runs its bottom (which must pass, else the
// SLO-max is below the range) and its top (if that passes, the SLO-max is
// at least the top), then narrows the bracket [highest pass, lowest fail]
// until hi/lo ≤ 1 + Precision (default 5%) or, for concurrencies, hi − lo
// ≤ 1. Each next level is found by interpolation when both ends have a
// score (the worst latency objective's quantile over its threshold; 1 is
// the boundary) and the failing end is not saturated: the level where
// 1/score, linear in load between the ends, reaches 1 (near saturation
// latency goes as 1/(1 − load/capacity), so 1/score is about linear in
// load), kept within the middle 60% of the bracket so it always shrinks by
// at least 20%. Otherwise, and after two interpolations in a row that
// moved the same end, it bisects in log load. Once the bracket is that
// narrow, its failing top is run again unless it was saturated (at most
// twice in a sweep): a loaded machine can slow one level, rarely the same
// level twice; if the rerun passes, the level passes and the bracket's
// top becomes the next failure above. The SLO-max is the highest passing
// level: assuming latency rises with load, the true boundary lies in
// [SLO-max, SLO-max × (1 + Precision)). A list of levels (--levels) is run
// in ascending order, all of them, until one saturates.
//
// # Floors against demand
//
// An open-loop level is judged with its rate as the stage's demand
// (slo.Demand): a throughput or goodput floor its offered load could not
// show whatever the server does is N/A there, and the level is judged by
// the objectives that apply. A level that fails only on floors, below
// every level that passed, is too little demand: the search reads it as
// low (a list goes on, a range bracket moves up) and it draws no
// non-monotone warning, since floors rise with load.
//
// # Lower bound
//
// When no valid level above the SLO-max failed (the top of the range or
// of the list passed, or the sweep stopped first), the SLO-max is a lower
// bound (Sweep.LowerBound): said "SLO-max ≥ …", and the headroom and the
// forecast are at least theirs.
//
// # Knee
//
// The knee is where latency starts to climb faster than load: over the
// levels that are not saturated, ordered by achieved throughput (completed
// requests per second, so closed and open loop read alike), the elasticity
// of the median E2E against throughput, Δln(E2E p50) / Δln(throughput), is
// computed from each level to the next one at least 10% above it in
// throughput (closer levels, which bisection leaves near the SLO-max, read
// a median's noise as a slope); the knee is the lower level of the first
// such pair whose elasticity exceeds 1. The median is used because few
// samples fix it; the knee is only as fine as the levels run.
//
// # Headroom and forecast
//
// With a current demand R (requests per second), headroom is SLO-max rate
// / R − 1, where the SLO-max rate is the level's rate (open loop) or its
// achieved throughput (closed loop). With a growth g per month (compound),
// demand reaches the SLO-max after ln(SLO-max rate / R) / ln(1 + g) months.
package capacity
