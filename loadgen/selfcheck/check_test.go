package selfcheck

import (
	"math"
	"os"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// The 95% interval's upper end of a percentile: for 1..100 ms, p90's rank
// is 90 + 1.96·√9 = 95.88, the 96th value (HDR rounds the rank).
func TestQuantileHigh(t *testing.T) {
	t.Parallel()
	h := hdrhistogram.New(1, 3_600_000_000, 3)
	for i := int64(1); i <= 100; i++ {
		h.RecordValue(i * 1000)
	}
	if hi := quantileHigh(h, 90); !h.ValuesAreEquivalent(hi, 96000) {
		t.Errorf("p90 high %d µs, want 96 ms", hi)
	}
	if hi := quantileHigh(h, 50); !h.ValuesAreEquivalent(hi, 60000) { // 50 + 1.96·5 = 59.8
		t.Errorf("p50 high %d µs, want 60 ms", hi)
	}
	if hi := quantileHigh(h, 99); !h.ValuesAreEquivalent(hi, 100000) { // past the last rank: the max
		t.Errorf("p99 high %d µs, want 100 ms", hi)
	}
}

// The cause classifier on injected readings.
func TestCause(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		cpu     float64
		h       HostLoad
		dropped int64
		want    string
		text    string
	}{
		{"own CPU saturated", 0, HostLoad{WindowS: 5, Cores: 2, OwnCores: 1.85, OtherCores: 0.1, CPUPressure: 0.9, Source: "s"}, 0, CauseGeneratorCPU, "the generator used 1.85 of 2 cores"},
		{"other processes", 0, HostLoad{WindowS: 20, Cores: 2, OwnCores: 0.04, OtherCores: 1.9, CPUPressure: 0.65}, 0, CauseRunQueue, "other processes 1.90"},
		{"pressure, no /proc/stat", 0, HostLoad{WindowS: 20, Cores: 2, OwnCores: 0.04, OtherCores: -1, CPUPressure: 0.5}, 0, CauseGeneratorCPU, "PSI"},
		{"own share on a busy box", 0, HostLoad{WindowS: 20, Cores: 2, OwnCores: 1.2, OtherCores: 0.3, CPUPressure: 0.4}, 0, CauseGeneratorCPU, "on a busy machine"},
		{"in-flight cap", 0, HostLoad{WindowS: 5, Cores: 2, OwnCores: 0.5, OtherCores: 0.4, CPUPressure: 0.1}, 90422, CauseInFlightCap, "90422 were dropped"},
		{"quiet", 0, HostLoad{WindowS: 20, Cores: 2, OwnCores: 0.02, OtherCores: 0.1, CPUPressure: 0.01}, 0, CauseUnknown, "neither"},
		{"no readings: the run's CPU", 0.95, HostLoad{}, 0, CauseGeneratorCPU, "own CPU"},
		{"nothing readable", 0.01, HostLoad{WindowS: 3, Cores: 2, OwnCores: 0.02, OtherCores: -1, CPUPressure: -1}, 0, CauseUnknown, "neither"},
	} {
		kind, text := Cause(c.cpu, c.h, c.dropped)
		if kind != c.want || !strings.Contains(text, c.text) {
			t.Errorf("%s: %s %q, want %s containing %q", c.name, kind, text, c.want, c.text)
		}
	}
}

// Host readings from /proc files, and the load between two of them.
func TestHostLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stat, psi := dir+"/stat", dir+"/pressure"
	write := func(p, s string) {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(stat, "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\nintr 1\n")
	write(psi, "some avg10=1.00 avg60=0.50 avg300=0.10 total=1000000\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
	if busy, total := readProcStat(stat); busy != 150 || total != 1000 {
		t.Errorf("proc stat busy %d total %d", busy, total)
	}
	if v := readPSISome(psi); v != 1000000 {
		t.Errorf("psi %d", v)
	}
	if n := machineCPUs(stat); n != 2 {
		t.Errorf("cpus %d", n)
	}
	if r := (Sampler{StatPath: stat, PressurePath: psi}).Read(); r.busy != 150 || r.total != 1000 || r.psiSomeUs != 1000000 || r.cpus != 2 {
		t.Errorf("reading %+v", r)
	}
	a := Reading{at: time.Unix(0, 0), own: 0, busy: 150, total: 1000, psiSomeUs: 1000000, cpus: 2}
	b := Reading{at: time.Unix(10, 0), own: 2 * time.Second, busy: 1150, total: 2000, psiSomeUs: 4000000, cpus: 2}
	h := Between(a, b, 2)
	// 1000 of 1000 jiffies busy on 2 CPUs: 2 cores; the generator 0.2.
	if h.BusyCores != 2 || math.Abs(h.OwnCores-0.2) > 1e-9 || math.Abs(h.OtherCores-1.8) > 1e-9 || math.Abs(h.CPUPressure-0.3) > 1e-9 ||
		h.Source != "/proc/stat, /proc/pressure/cpu, getrusage" {
		t.Errorf("%+v", h)
	}
	// Unreadable files degrade to −1 and say which readings were used.
	r := (Sampler{StatPath: dir + "/none", PressurePath: dir + "/none"}).Read()
	if r.total != 0 || r.psiSomeUs != -1 {
		t.Errorf("missing files: %+v", r)
	}
	if h := Between(r, Reading{at: r.at.Add(time.Second), own: r.own}, 2); h.BusyCores != -1 || h.CPUPressure != -1 || h.Source != "getrusage" {
		t.Errorf("degraded: %+v", h)
	}
}
