package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
)

// profileEnv names a directory where the process writes its own profiles
// (cpu.pprof for the whole command, heap.pprof and goroutine counts at its
// end, trace.out with TAILGATE_TRACE=1): how the generator's cost is
// measured in bench-peers and how a user shows where a client's CPU went.
// An environment variable, not a flag, so that every command has it and
// no plan or results directory records it.
const profileEnv = "TAILGATE_PPROF"

// startProfiles starts what profileEnv asks for and returns the function
// that ends it; a profile that cannot be written is said on stderr and
// never fails the command.
func startProfiles(stderr io.Writer) func() {
	dir := os.Getenv(profileEnv)
	if dir == "" {
		return func() {}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(stderr, "tailgate: %s: %v\n", profileEnv, err)
		return func() {}
	}
	var stops []func()
	if f, err := os.Create(filepath.Join(dir, "cpu.pprof")); err == nil && pprof.StartCPUProfile(f) == nil {
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	} else {
		fmt.Fprintf(stderr, "tailgate: %s: cpu profile: %v\n", profileEnv, err)
	}
	if os.Getenv("TAILGATE_TRACE") == "1" {
		if f, err := os.Create(filepath.Join(dir, "trace.out")); err == nil && trace.Start(f) == nil {
			stops = append(stops, func() { trace.Stop(); f.Close() })
		} else {
			fmt.Fprintf(stderr, "tailgate: %s: trace: %v\n", profileEnv, err)
		}
	}
	return func() {
		for _, stop := range stops {
			stop()
		}
		runtime.GC()
		if f, err := os.Create(filepath.Join(dir, "heap.pprof")); err == nil {
			pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
}
