//go:build !linux || !cgo

package telemetry

import (
	"errors"
	"testing"
)

// Run by TestBuildsAndStubWorksWithoutCgo (CGO_ENABLED=0), or directly on
// a platform without cgo.
func TestStubNewNVML(t *testing.T) {
	t.Parallel()
	s, err := NewNVML()
	if s != nil || !errors.Is(err, ErrNoNVML) {
		t.Fatalf("NewNVML() = %v, %v; want nil, ErrNoNVML", s, err)
	}
}
