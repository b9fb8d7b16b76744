// Package comparison compares two results of the same plan or mix, a
// baseline and a candidate, and says per stage, metric and percentile
// whether the candidate is a regression, an improvement or no significant
// change, so a rollout can be gated on it and a slowdown told apart from
// demand growth.
//
// # Method
//
// The change of a percentile is candidate / baseline − 1, both the
// nearest-rank percentile of the raw records' samples (requests.jsonl, the
// metric table's definitions). Its confidence interval is a percentile
// bootstrap over requests: each side's requests are resampled with
// replacement, independently, Resamples times (default 2000, seeded, so a
// comparison is reproducible), every sample of a drawn request going with
// it, so ITL's many samples per request count as one request's worth of
// evidence. The intervals are simultaneous: with k rows judged (stage ×
// metric × percentile rows that have the sample, below) each is the
// (1 − 0.05/k) interval (Bonferroni), so the chance that any judged row of
// two equal runs shows a change is at most 5%. Rows without the sample are
// not counted: they would widen every other interval for nothing. A
// stage of more than MaxRequests (20,000) measured requests is compared on
// a uniform sample of that many (a seeded reservoir), so a long run
// compares in bounded memory and time, with intervals as wide as the
// sample makes them.
//
// A row whose interval lies wholly above +Tolerance (default 5%) is a
// regression: the candidate is slower by more than the tolerance, with
// 95% confidence over all judged rows; wholly below −Tolerance an
// improvement; else "not shown to differ" — by more than the tolerance:
// when the interval excludes 0 the note gives its range, which may still
// reach past the tolerance. A regression gates (exit 1). A percentile is
// judged only with at least ⌈10/(1 − q)⌉ requests a side (p50: 20, p99:
// 1000): below that its bootstrap only reshuffles the few largest values.
// A comparison that judged no row exits 4: it cannot say whether the
// candidate regressed. Two results of one stage each (two runs, two sweep
// levels) are compared whatever their stages are named.
//
// # Same plan, same demand
//
// Results of different plans or mixes are refused unless Force: the plan
// and mix hashes of evidence packs (environment.json) when both have them,
// else the request classes. A stage whose load (the schedule's rates or
// concurrencies, the arrival process; the realized offered rate within 5%
// when the schedule is not known) or class shares (more than 5 points and
// a two-proportion z above 3) differ is demand change, not regression: its
// slower rows read "slower, demand changed" and do not gate.
package comparison
