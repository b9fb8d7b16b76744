// Package splitmix holds SplitMix64's finaliser, the one mixing function
// the repository uses to derive seeds and seeded per-request decisions.
// It lives here, not in prompts or sim, so that every package can import
// it without tying them together.
package splitmix

// Mix64 is SplitMix64's step (Steele, Lea and Flood, "Fast splittable
// pseudorandom number generators", 2014): add the golden-ratio increment,
// then scramble. Consecutive or nearly equal inputs give unrelated outputs,
// and the function is a bijection, so distinct keys never collide.
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
