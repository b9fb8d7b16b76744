package sim

// Accessors for the package's tables: each returns a copy.

import (
	"slices"
)

// Profiles returns a copy of the package's table (profilesTable), so that no
// caller can change what every other one reads.
func Profiles() []string {
	return slices.Clone(profilesTable)
}

// FaultKinds returns a copy of the package's table (faultKindsTable), so that no
// caller can change what every other one reads.
func FaultKinds() []FaultKind {
	return slices.Clone(faultKindsTable)
}
