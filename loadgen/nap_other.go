//go:build !linux

package loadgen

import "time"

// nap is nil where no sleeping system call is written: the waiter yields
// through its whole spin window.
var nap func(time.Duration)
