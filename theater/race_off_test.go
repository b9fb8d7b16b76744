//go:build !race

package theater_test

const raceEnabled = false
