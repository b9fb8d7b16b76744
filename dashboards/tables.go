package dashboards

// Accessors for the package's tables: each returns a copy.

import (
	"slices"
)

// Metrics returns a copy of the package's table (metricsTable), so that no
// caller can change what every other one reads.
func Metrics() []Metric {
	out := slices.Clone(metricsTable)
	for i := range out {
		out[i].Labels = slices.Clone(out[i].Labels)
	}
	return out
}
