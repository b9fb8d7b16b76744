package loadgen

// Accessors for the package's tables: each returns a copy.

import (
	"maps"
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

// LagMeasured returns a copy of the package's table (lagMeasuredTable), so that no
// caller can change what every other one reads.
func LagMeasured() []string {
	return slices.Clone(lagMeasuredTable)
}

// Definitions returns a copy of the package's table (definitionsTable), so that no
// caller can change what every other one reads.
func Definitions() map[string]string {
	return maps.Clone(definitionsTable)
}

// RunDefinitions returns a copy of the package's table (runDefinitionsTable), so that no
// caller can change what every other one reads.
func RunDefinitions() map[string]string {
	return maps.Clone(runDefinitionsTable)
}

// RateMetrics returns a copy of the package's table (rateMetricsTable), so that no
// caller can change what every other one reads.
func RateMetrics() []RateMetric {
	return slices.Clone(rateMetricsTable)
}
