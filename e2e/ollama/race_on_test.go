//go:build race

package ollama

const raceEnabled = true
