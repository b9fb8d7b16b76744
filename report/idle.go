package report

import (
	"fmt"

	"github.com/tailgate-llm/tailgate/telemetry"
)

// gpuIdleShare is the telemetry summary's GPU idle share as text ("" when
// the summary has none).
func gpuIdleShare(t *telemetry.Summary) string {
	if t.GPUIdleShare == nil {
		return ""
	}
	return fmt.Sprintf("%.0f%%", 100**t.GPUIdleShare)
}

// queueP99 is the server queue delay's p99 as text: a quantile in the
// first bucket is only known to be under its bound.
func queueP99(h *telemetry.HistogramSummary) string {
	if h == nil || h.P99Ms == nil {
		return "-"
	}
	if len(h.P99Bkt) == 2 && h.P99Bkt[0] != nil && *h.P99Bkt[0] == 0 && h.P99Bkt[1] != nil {
		return fmt.Sprintf("≤ %.0f ms", *h.P99Bkt[1])
	}
	return fmt.Sprintf("%.1f ms", *h.P99Ms)
}
