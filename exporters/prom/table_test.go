package prom

import (
	"slices"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// The contract's histogram constants spell the metric table's Prom faces,
// in table order.
func TestLatencyConstantsAreTheTablesNames(t *testing.T) {
	t.Parallel()
	want := []string{TTFTSeconds, ITLSeconds, TPOTSeconds, E2ESeconds}
	if got := latencyNames(measure.LatencyMetrics()); !slices.Equal(got, want) {
		t.Errorf("metric table's Prometheus names %v, constants %v", got, want)
	}
}

// The contract's counter constants spell the rate table's Prom faces, in
// table order.
func TestRateConstantsAreTheTablesNames(t *testing.T) {
	t.Parallel()
	want := []string{OutputTokensTotal}
	if got := rateNames(measure.RateMetrics()); !slices.Equal(got, want) {
		t.Errorf("rate table's Prometheus names %v, constants %v", got, want)
	}
}
