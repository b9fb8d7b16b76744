package capacity

// Accessors for the package's tables: each returns a copy.

import (
	"maps"
)

// Rules returns a copy of the package's table (rulesTable), so that no
// caller can change what every other one reads.
func Rules() map[string]string {
	return maps.Clone(rulesTable)
}
