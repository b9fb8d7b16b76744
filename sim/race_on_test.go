//go:build race

package sim

// raceEnabled: the race detector slows the simulator's handlers and the
// test's client several times and adds pauses of ten milliseconds and
// more, which the timing tests would measure. `make test` runs them again
// without it.
const raceEnabled = true
