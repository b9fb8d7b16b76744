package prom

// Accessors for the package's tables: each returns a copy.

import (
	"slices"
)

// Names returns a copy of the package's table (namesTable), so that no
// caller can change what every other one reads.
func Names() []string {
	return slices.Clone(namesTable)
}

// BurnRateWindows returns a copy of the package's table (burnRateWindowsTable), so that no
// caller can change what every other one reads.
func BurnRateWindows() []string {
	return slices.Clone(burnRateWindowsTable)
}
