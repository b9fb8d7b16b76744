package results

import (
	"strings"

	"github.com/tailgate-llm/tailgate/slo"
)

// Exit is the one mapping from a judgement to a command's exit status:
// run, validate, check, merge and sweep all exit through it, so the same
// directory gets the same code from each. v is the run's validity (nil when
// the report carries it, as a plan's does), rep its SLO report (nil when
// the run was not judged against an SLO). Precedence: invalid (3) > an
// objective failed or a manual stage pending (1) > not decided by the
// sample (4) > pass (0). why says what decided, for stderr ("" on pass).
func Exit(v *Validity, rep *slo.Report) (code int, why string) {
	if v != nil && !v.Valid {
		return slo.ExitInvalid, "RUN INVALID: " + strings.Join(v.Reasons, "; ")
	}
	if rep == nil {
		return slo.ExitOK, ""
	}
	if rep.Status == slo.ReportInvalid || rep.ExitCode == slo.ExitInvalid {
		var reasons []string
		for _, p := range rep.Problems {
			reasons = append(reasons, p.String())
		}
		return slo.ExitInvalid, "RUN INVALID: " + strings.Join(reasons, "; ")
	}
	switch rep.ExitCode {
	case slo.ExitOK:
		return slo.ExitOK, ""
	case slo.ExitFailed:
		return slo.ExitFailed, "SLO " + rep.Status
	}
	// Any other code the report chose (INCONCLUSIVE: 4) stands.
	return rep.ExitCode, "SLO " + rep.Status
}
