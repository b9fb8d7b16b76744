package loadgen

import (
	"syscall"
	"time"
)

// nap sleeps d in a system call: the thread sleeps on the kernel's
// high-resolution timer, where Go's timers would wait in the poller, whose
// wait is in whole milliseconds when no thread is awake.
func nap(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil) // woken early (a signal): the waiter yields the rest
}
