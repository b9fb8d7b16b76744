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
// evidence. The intervals are simultaneous: with k rows (stage × metric ×
// percentile) each is the (1 − 0.05/k) interval (Bonferroni), so the
// chance that any row of two equal runs shows a change is at most 5%.
//
// A row whose interval lies wholly above 0 is a regression, wholly below 0
// an improvement, else no significant change. The gate (exit 1) is a
// regression whose interval lies wholly above Tolerance (default 5%): the
// candidate is slower by more than the tolerance with 95% confidence.
//
// # Same plan, same demand
//
// Results of different plans or mixes are refused unless Force: the plan
// and mix hashes of evidence packs (environment.json) when both have them,
// else the request classes. A stage whose offered load (open-loop rate
// within 5%, the same concurrency, the same arrival process) or class
// shares (within 5 points) differ is demand change, not regression: its
// slower rows read "slower, demand changed" and do not gate.
package comparison
