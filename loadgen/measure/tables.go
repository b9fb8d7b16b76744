package measure

// Accessors for the package's tables: each returns a copy.

import (
	"slices"
)

// LatencyMetrics returns a copy of the package's table (latencyMetricsTable), so that no
// caller can change what every other one reads.
func LatencyMetrics() []LatencyMetric {
	return slices.Clone(latencyMetricsTable)
}

// MetricNames returns a copy of the package's table (metricNamesTable), so that no
// caller can change what every other one reads.
func MetricNames() []string {
	return slices.Clone(metricNamesTable)
}

// RateMetrics returns a copy of the package's table (rateMetricsTable), so that no
// caller can change what every other one reads.
func RateMetrics() []RateMetric {
	return slices.Clone(rateMetricsTable)
}
