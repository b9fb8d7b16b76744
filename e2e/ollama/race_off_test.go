//go:build !race

package ollama

const raceEnabled = false
