package pipeline

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/results"
)

// validity judges whether a run's figures can be trusted (see
// results.Validity). Interruption is not a reason: a stopped run's figures
// are true for what ran, and the summary says it was interrupted.
func validity(res *Result, spec Spec) results.Validity {
	limit := spec.MaxErrorRate
	if limit == 0 {
		limit = DefaultMaxErrorRate
	}
	return Validity(res.Summary, limit, spec.SelfCheckWarns, res.WriteErr())
}

// Validity judges a summary's figures by the run's rules: limit is the
// error-rate limit applied (negative: none), selfCheckWarns makes a
// distorting generator a warning only, writeErr is the first failure to
// write results. Merge judges a merged result with it, as one run.
func Validity(s *results.Summary, limit float64, selfCheckWarns bool, writeErr error) results.Validity {
	v := results.Validity{MaxErrorRate: limit}
	q := s.Requests
	switch {
	case q.Sent == 0 && q.Warmup == 0:
		v.Reasons = append(v.Reasons, "no request was sent")
	case q.Sent == 0:
		v.Reasons = append(v.Reasons, fmt.Sprintf("nothing was measured: all %d requests were warm-up", q.Warmup))
	case q.OK == 0:
		v.Reasons = append(v.Reasons, fmt.Sprintf("no request succeeded (%d sent)", q.Sent))
	case limit >= 0 && float64(q.Errors) > limit*float64(q.Sent):
		v.Reasons = append(v.Reasons, fmt.Sprintf("%.1f%% of requests failed (%d of %d), above the %.1f%% limit (--max-error-rate)",
			100*float64(q.Errors)/float64(q.Sent), q.Errors, q.Sent, 100*limit))
	}
	if sc := s.SelfCheck; sc.Distorted && !selfCheckWarns {
		for _, r := range sc.Reasons {
			v.Reasons = append(v.Reasons, "the load generator distorted the figures: "+r)
		}
	}
	if writeErr != nil {
		v.Reasons = append(v.Reasons, "results could not be written: "+writeErr.Error())
	}
	v.Valid = len(v.Reasons) == 0
	return v
}
