//go:build !linux || !cgo

package telemetry

import "fmt"

// NewNVML reports ErrNoNVML: this binary was built without cgo or not for
// Linux, so it cannot load libnvidia-ml.so.
func NewNVML() (GPUSampler, error) {
	return nil, fmt.Errorf("%w: built without cgo or not for linux", ErrNoNVML)
}
