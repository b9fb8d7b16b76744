//go:build !race

package kserve_test

// raceOn: the race detector instruments this build; sync.Pool drops
// what is put back at random under it.
const raceOn = false
