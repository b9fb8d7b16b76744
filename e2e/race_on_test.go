//go:build race

package e2e

// raceEnabled: the race detector slows the client and the simulator five
// to ten times, so timing-accuracy assertions would measure the detector.
// `make test` runs this package a second time without it.
const raceEnabled = true
