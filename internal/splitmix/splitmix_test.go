package splitmix

import "testing"

// The published first outputs of the SplitMix64 generator seeded with
// 1234567 (Rosetta Code, "Pseudo-random numbers/Splitmix64"): the generator
// advances its state by the golden-ratio increment and returns Mix64 of the
// state before the step, so output k is Mix64(seed + k·increment).
func TestMix64MatchesReference(t *testing.T) {
	t.Parallel()
	want := []uint64{6457827717110365317, 3203168211198807973, 9817491932198370423, 4593380528125082431, 16408922859458223821}
	state := uint64(1234567)
	for i, w := range want {
		if got := Mix64(state); got != w {
			t.Errorf("output %d: %d, want %d", i, got, w)
		}
		state += 0x9e3779b97f4a7c15
	}
}
