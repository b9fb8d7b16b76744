package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// cpuTimes is the machine's CPU time counters (Linux /proc/stat's "cpu"
// line, in clock ticks): all of it and the part idle or waiting for I/O.
type cpuTimes struct{ total, idle int64 }

func machineCPU() (cpuTimes, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	// user nice system idle iowait irq softirq steal (guest time is
	// already in user and nice).
	if len(f) < 9 || f[0] != "cpu" {
		return cpuTimes{}, false
	}
	var c cpuTimes
	for i, s := range f[1:9] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return cpuTimes{}, false
		}
		c.total += v
		if i == 3 || i == 4 {
			c.idle += v
		}
	}
	return c, true
}

// clockTick is Linux's USER_HZ, the unit of /proc's CPU times: 100 on
// every architecture Go runs on.
const clockTick = time.Second / 100

// processCPU is a process's user + system CPU time so far (Linux
// /proc/PID/stat's utime and stime).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command's name, in parentheses, may hold spaces: the fields
	// after it start at state (field 3), so utime (14) and stime (15) are
	// the 12th and 13th.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * clockTick, true
}

// meter measures the machine's busy share and the server process's CPU
// time over one client run; a figure that cannot be read (not Linux) is
// left out of its words, never written as zero.
type meter struct {
	pid      int
	m0       cpuTimes
	s0       time.Duration
	mok, sok bool
}

func startMeter(serverPID int) *meter {
	m := &meter{pid: serverPID}
	m.m0, m.mok = machineCPU()
	m.s0, m.sok = processCPU(serverPID)
	return m
}

// words says what the run cost, with the client's CPU time from its own
// accounting: "machine 87% busy, server 1.52 CPU-s, client 2.10 CPU-s".
func (m *meter) words(client time.Duration) string {
	var w []string
	if m1, ok := machineCPU(); ok && m.mok && m1.total > m.m0.total {
		w = append(w, fmt.Sprintf("machine %.0f%% busy", 100*(1-float64(m1.idle-m.m0.idle)/float64(m1.total-m.m0.total))))
	}
	if s1, ok := processCPU(m.pid); ok && m.sok {
		w = append(w, fmt.Sprintf("server %.2f CPU-s", (s1-m.s0).Seconds()))
	}
	w = append(w, fmt.Sprintf("client %.2f CPU-s", client.Seconds()))
	return strings.Join(w, ", ")
}
