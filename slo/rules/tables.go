package rules

// Accessors for the package's tables: each returns a copy.

import (
	"github.com/tailgate-llm/tailgate/slo"
	"slices"
)

// Tiers returns a copy of the package's table (tiersTable), so that no
// caller can change what every other one reads.
func Tiers() []slo.BurnRateTier {
	return slices.Clone(tiersTable)
}
