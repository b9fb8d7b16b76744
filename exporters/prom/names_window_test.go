package prom

import (
	"slices"
	"testing"
)

// TestBurnRateWindowLabels: the window label values are the tier table's
// windows as Prometheus spells durations (what the rules' selectors use).
func TestBurnRateWindowLabels(t *testing.T) {
	t.Parallel()
	if want := []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"}; !slices.Equal(burnRateWindowsTable, want) {
		t.Errorf("BurnRateWindows %v, want %v", burnRateWindowsTable, want)
	}
}
