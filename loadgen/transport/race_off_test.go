//go:build !race

package transport

// raceOn: the race detector instruments this build; sync.Pool drops
// what is put back at random under it.
const raceOn = false
