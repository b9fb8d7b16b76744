package slo

// Accessors for the package's tables: each returns a copy.

import (
	"slices"
	"time"
)

// DefaultValidity returns a copy of the package's table (defaultValidityTable), so that no
// caller can change what every other one reads.
func DefaultValidity() Validity {
	return defaultValidityTable
}

// Unbounded returns a copy of the package's table (unboundedTable), so that no
// caller can change what every other one reads.
func Unbounded() *Validity {
	v := unboundedTable
	return &v
}

// SlothTiers returns a copy of the package's table (slothTiersTable), so that no
// caller can change what every other one reads.
func SlothTiers() []BurnRateTier {
	return slices.Clone(slothTiersTable)
}

// BurnRateWindows returns a copy of the package's table (burnRateWindowsTable), so that no
// caller can change what every other one reads.
func BurnRateWindows() []time.Duration {
	return slices.Clone(burnRateWindowsTable)
}
