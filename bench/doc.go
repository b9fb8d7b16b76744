// Package bench holds the engine benchmarks run by `make bench`: the load
// generator's own capacity against the built-in simulator at zero delay,
// and its schedule lag with many requests in flight.
package bench
