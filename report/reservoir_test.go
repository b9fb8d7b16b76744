package report

import (
	"slices"
	"testing"
)

// Past the cap the reservoir stays uniform: the sample's median and p99
// are the stream's, within a fraction of a percent.
func TestITLReservoir(t *testing.T) {
	t.Parallel()
	p := &Part{}
	const n = 3 * maxITLSamples
	for i := range n {
		p.addITL(float64(i)) // rising: keeping the first (or the last) would move the median
	}
	if len(p.itl) != maxITLSamples || p.itlSeen != n {
		t.Fatalf("kept %d of %d", len(p.itl), p.itlSeen)
	}
	v := p.values("itl")
	if !slices.IsSorted(v) {
		t.Fatal("not sorted")
	}
	if med, p99 := v[len(v)/2]/n, v[len(v)*99/100]/n; med < 0.495 || med > 0.505 || p99 < 0.985 || p99 > 0.995 {
		t.Errorf("median at %.4f, p99 at %.4f of the stream: want 0.5 and 0.99", med, p99)
	}
}
