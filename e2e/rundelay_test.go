package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// runDelay is how long this process's threads have waited on the
// operating system's run queues, from /proc/self/task/*/schedstat (its
// second field); ok is false where the kernel does not say.
func runDelay() (d time.Duration, ok bool) {
	files, _ := filepath.Glob("/proc/self/task/*/schedstat")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread exited
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			return 0, false
		}
		ns, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			return 0, false
		}
		d += time.Duration(ns)
		ok = true
	}
	return d, ok
}
