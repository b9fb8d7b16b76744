package exporters

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteVerdictTable(t *testing.T) {
	r := sampleReport(t)
	var buf bytes.Buffer
	if err := WriteVerdictTable(&buf, r); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"OBJECTIVE  STAGE     CLASS  MEASURED",
		"ttft-p99   normal    -      100% (p99 100ms)  ≤ 500ms",
		"WAIVED (FAIL)",
		"errors     normal    -      0%                ≤ 1%",
		"manual     failover",
		"PENDING",
		"itl-p95/normal: waived by alice until 2026-12-31",
		"e2e-p90/normal: waiver by bob expired 2026-01-31 (old): no longer waives",
		"The run is invalid:",
		"Result: INVALID (exit 3)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in\n%s", want, out)
		}
	}
}
