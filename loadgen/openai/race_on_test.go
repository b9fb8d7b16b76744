//go:build race

package openai

// raceOn: the race detector instruments this build; its frames are larger.
const raceOn = true
