package selfcheck

import (
	"bufio"
	"bytes"
	"cmp"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// HostLoad is what the machine was doing while the generator sent: the
// generator's own CPU and the CPU the machine's other processes kept busy
// or queued, so that a late send can be put down to its cause (see
// Cause). A reading that could not be taken is negative.
type HostLoad struct {
	// WindowS is the sending window the readings cover.
	WindowS float64 `json:"window_s"`
	// Cores is the CPUs the generator may use (GOMAXPROCS).
	Cores int `json:"cores"`
	// OwnCores is the generator's CPU time over the window, in cores busy.
	OwnCores float64 `json:"own_cores"`
	// BusyCores is the whole machine's busy CPU over the window, in cores
	// (/proc/stat); OtherCores = BusyCores − OwnCores, what other
	// processes used. −1: not readable.
	BusyCores  float64 `json:"busy_cores"`
	OtherCores float64 `json:"other_cores"`
	// CPUPressure is the share of the window in which some runnable task
	// waited for a CPU (/proc/pressure/cpu "some", Linux PSI). −1: not
	// readable (no PSI in this kernel).
	CPUPressure float64 `json:"cpu_pressure"`
	// Source names the readings used.
	Source string `json:"source"`
}

// Reading is one instant's cumulative counters (Sampler.Read); the load
// between two is Between.
type Reading struct {
	at          time.Time
	own         time.Duration
	busy, total uint64 // /proc/stat jiffies, all CPUs; total 0: unreadable
	psiSomeUs   int64  // /proc/pressure/cpu some total=; −1: unreadable
	cpus        int    // the machine's CPUs as /proc/stat counts them
}

// Sampler names the files read for HostLoad: a value each caller (each
// loadgen.Runner) carries rather than package variables, so that tests
// point their own readings at their own files and can run in parallel.
// The zero Sampler reads the system's files.
type Sampler struct {
	// StatPath is /proc/stat, PressurePath /proc/pressure/cpu, when empty.
	StatPath, PressurePath string
}

// Read takes the counters now.
func (p Sampler) Read() Reading {
	stat := cmp.Or(p.StatPath, "/proc/stat")
	h := Reading{at: time.Now(), own: CPUTime(), psiSomeUs: -1}
	h.busy, h.total = readProcStat(stat)
	h.psiSomeUs = readPSISome(cmp.Or(p.PressurePath, "/proc/pressure/cpu"))
	h.cpus = machineCPUs(stat)
	return h
}

// Between is the load from reading a to reading b, for a generator
// allowed cores CPUs.
func Between(a, b Reading, cores int) HostLoad {
	w := b.at.Sub(a.at).Seconds()
	hl := HostLoad{WindowS: w, Cores: cores, BusyCores: -1, OtherCores: -1, CPUPressure: -1}
	if w <= 0 {
		return hl
	}
	hl.OwnCores = (b.own - a.own).Seconds() / w
	var src []string
	if a.total > 0 && b.total > a.total {
		// Jiffies count every CPU of the machine, which may be more than
		// GOMAXPROCS: scale by the machine's CPUs as /proc/stat counts them.
		share := float64(b.busy-a.busy) / float64(b.total-a.total)
		hl.BusyCores = share * float64(cmp.Or(b.cpus, numCPU()))
		hl.OtherCores = max(hl.BusyCores-hl.OwnCores, 0)
		src = append(src, "/proc/stat")
	}
	if a.psiSomeUs >= 0 && b.psiSomeUs >= a.psiSomeUs {
		hl.CPUPressure = min(float64(b.psiSomeUs-a.psiSomeUs)/1e6/w, 1)
		src = append(src, "/proc/pressure/cpu")
	}
	src = append(src, "getrusage")
	hl.Source = strings.Join(src, ", ")
	return hl
}

// CPUTime is the process's CPU time so far, user and system (0 when
// getrusage fails).
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func numCPU() int { return runtime.GOMAXPROCS(0) }

// readProcStat returns the busy and total jiffies of the "cpu" line (0, 0
// when unreadable). Busy is everything but idle and iowait.
func readProcStat(path string) (busy, total uint64) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 || fields[0] != "cpu" {
			continue
		}
		// user nice system idle iowait irq softirq steal [guest guest_nice]:
		// guest time is already in user, so only the first eight count.
		for i, s := range fields[1:min(len(fields), 9)] {
			v, err := strconv.ParseUint(s, 10, 64)
			if err != nil {
				return 0, 0
			}
			total += v
			if i != 3 && i != 4 {
				busy += v
			}
		}
		return busy, total
	}
	return 0, 0
}

// machineCPUs counts the "cpuN" lines of /proc/stat at path (GOMAXPROCS
// when it cannot).
func machineCPUs(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return numCPU()
	}
	n := 0
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(l) > 3 && bytes.HasPrefix(l, []byte("cpu")) && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		return numCPU()
	}
	return n
}

// readPSISome returns the "some" line's total= (µs), −1 when unreadable.
func readPSISome(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "some ") {
			continue
		}
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "total="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return -1
				}
				return n
			}
		}
	}
	return -1
}
