package prompts

import (
	"math/bits"
	"math/rand/v2"

	"github.com/tailgate-llm/tailgate/internal/splitmix"
)

// rng is the package's only source of randomness: PCG-DXSM from
// math/rand/v2, whose output for a seed is fixed by golden tests in the
// standard library. Everything built on it (uniform integers, floats) uses
// integer arithmetic or exactly rounded float operations, so a seed yields
// the same values on every platform and Go release.
type rng struct{ pcg rand.PCG }

// splitmix64 derives independent stream seeds; the repository's one
// definition is splitmix.Mix64.
func splitmix64(x uint64) uint64 { return splitmix.Mix64(x) }

// fnv64 hashes a name into a stream key, so a class keeps its stream when
// other classes are added, removed or reordered.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// newRNG returns the stream for seed and the given keys.
func newRNG(seed int64, keys ...uint64) *rng {
	a, b := splitmix64(uint64(seed)), splitmix64(^uint64(seed))
	for _, k := range keys {
		a = splitmix64(a ^ k)
		b = splitmix64(b + k)
	}
	r := &rng{}
	r.pcg.Seed(a, b)
	return r
}

func (r *rng) uint64() uint64 { return r.pcg.Uint64() }

// float64 is uniform on [0, 1) with 53 random bits.
func (r *rng) float64() float64 { return float64(r.pcg.Uint64()>>11) * 0x1p-53 }

// intn is uniform on [0, n), n > 0 (Lemire's nearly divisionless method).
func (r *rng) intn(n int) int {
	un := uint64(n)
	hi, lo := bits.Mul64(r.pcg.Uint64(), un)
	if lo < un {
		thresh := -un % un
		for lo < thresh {
			hi, lo = bits.Mul64(r.pcg.Uint64(), un)
		}
	}
	return int(hi)
}

// perm fills p with a permutation of 0..len(p)-1 (Fisher–Yates).
func (r *rng) perm(p []int) {
	for i := range p {
		p[i] = i
	}
	for i := len(p) - 1; i > 0; i-- {
		j := r.intn(i + 1)
		p[i], p[j] = p[j], p[i]
	}
}
