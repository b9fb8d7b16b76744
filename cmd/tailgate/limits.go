package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
)

// fdReserve is what a run opens beside its streams: results files, the
// telemetry scrapes, the Go runtime's own descriptors.
const fdReserve = 64

// hostLimits are what bounds the connections one process can hold: its
// open-file limit, and the ephemeral ports toward one server address.
type hostLimits struct {
	files, filesHard int64
	ports            int64  // 0: unknown
	portRange        string // as the kernel gives it, "32768 60999"
}

func readHostLimits() hostLimits {
	var l hostLimits
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err == nil {
		l.files, l.filesHard = int64(r.Cur), int64(r.Max)
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		f := strings.Fields(string(b))
		if len(f) == 2 {
			lo, err1 := strconv.ParseInt(f[0], 10, 64)
			hi, err2 := strconv.ParseInt(f[1], 10, 64)
			if err1 == nil && err2 == nil && hi >= lo {
				l.ports, l.portRange = hi-lo+1, f[0]+"–"+f[1]
			}
		}
	}
	return l
}

// plannedConnections is how many connections this process's closed loop
// holds at its peak: one per stream for the HTTP clients (one request per
// connection at a time), none counted for gRPC, which multiplexes. The
// open loop is bounded by its in-flight cap, which a run rarely reaches,
// so it is not refused.
func plannedConnections(api string, o loadgen.Options) int64 {
	if !o.Closed || api == kserve.APIGRPC {
		return 0
	}
	var peak int64
	for _, st := range o.Stages {
		peak = max(peak, o.Shard.Share(int64(st.Concurrency)))
	}
	return peak
}

// checkConnections refuses, before any connection is opened, a load this
// process cannot hold: past the open-file limit every new connection
// fails at once, and the closed loop would only count connect errors.
func checkConnections(need int64, l hostLimits) error {
	if need <= 0 {
		return nil
	}
	if l.files > 0 && need+fdReserve > l.files {
		return usageErr("%d concurrent streams need about %d open files, but this process may open %d (RLIMIT_NOFILE, hard limit %d): "+
			"raise the limit (ulimit -n) or split the load into shards (--shard I/N), each its own process (scripts/scale-65k.sh)", need, need+fdReserve, l.files, l.filesHard)
	}
	if l.ports > 0 && need > l.ports {
		return usageErr("%d concurrent streams need %d connections to one server address, but the kernel has %d ephemeral ports (ip_local_port_range %s): "+
			"split the load into shards (--shard I/N), each toward its own server address (--connect-to), or over several client machines", need, need, l.ports, l.portRange)
	}
	return nil
}
