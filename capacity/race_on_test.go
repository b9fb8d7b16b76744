//go:build race

package capacity

// raceEnabled: the race detector slows the client and the simulator five
// to ten times, so tests that hold measurements against the simulator's
// model would measure the detector. `make test` runs them again without it.
const raceEnabled = true
