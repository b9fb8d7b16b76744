//go:build linux && cgo

package telemetry

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/gpus"
)

// go-nvml v0.13.4-1 ships mock/dgxa100, dgxh100, dgxh200 and dgxb200, but
// they are built on mock/server, which imports github.com/google/uuid,
// a module this repository does not depend on. So the fake below is
// assembled from the plain moq mocks (mock.Interface, mock.Device) and the
// H200 description in mock/gpus, with dgxh200's driver (550.54.15) and
// CUDA (12040) versions. Every mock method the sampler calls is set: moq
// mocks panic on a nil Func.

func fakeH200(n int) (*mock.Interface, []*mock.Device) {
	cfg := gpus.H200_SXM5_141GB
	devs := make([]*mock.Device, n)
	energy := make([]uint64, n)
	handles := make([]nvml.Device, n)
	for i := range devs {
		d := &mock.Device{
			GetIndexFunc:  func() (int, nvml.Return) { return i, nvml.SUCCESS },
			GetNameFunc:   func() (string, nvml.Return) { return cfg.Name, nvml.SUCCESS },
			GetUUIDFunc:   func() (string, nvml.Return) { return fmt.Sprintf("GPU-h200-%d", i), nvml.SUCCESS },
			GetSerialFunc: func() (string, nvml.Return) { return fmt.Sprintf("165092406%04d", i), nvml.SUCCESS },
			GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) {
				return nvml.Utilization{Gpu: uint32(40 + 5*i), Memory: 20}, nvml.SUCCESS
			},
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
				total := cfg.MemoryMB << 20
				return nvml.Memory{Total: total, Used: total / 2, Free: total / 2}, nvml.SUCCESS
			},
			GetPowerUsageFunc: func() (uint32, nvml.Return) { return uint32(450000 + 1000*i), nvml.SUCCESS }, // mW
			// mJ since the driver loaded: 1 kJ more at every reading.
			GetTotalEnergyConsumptionFunc: func() (uint64, nvml.Return) {
				energy[i] += 1_000_000
				return energy[i], nvml.SUCCESS
			},
			GetClockInfoFunc: func(ct nvml.ClockType) (uint32, nvml.Return) {
				if ct != nvml.CLOCK_SM {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				return 1980, nvml.SUCCESS
			},
			GetTemperatureFunc: func(s nvml.TemperatureSensors) (uint32, nvml.Return) {
				if s != nvml.TEMPERATURE_GPU {
					return 0, nvml.ERROR_INVALID_ARGUMENT
				}
				return uint32(50 + i), nvml.SUCCESS
			},
		}
		devs[i], handles[i] = d, d
	}
	lib := &mock.Interface{
		InitFunc:                       func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:                   func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:             func() (int, nvml.Return) { return len(handles), nvml.SUCCESS },
		SystemGetDriverVersionFunc:     func() (string, nvml.Return) { return "550.54.15", nvml.SUCCESS },
		SystemGetCudaDriverVersionFunc: func() (int, nvml.Return) { return 12040, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(handles) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return handles[i], nvml.SUCCESS
		},
	}
	return lib, devs
}

func TestNVMLMockH200(t *testing.T) {
	t.Parallel()
	lib, _ := fakeH200(8)
	s, err := newNVMLFrom(lib)
	if err != nil {
		t.Fatal(err)
	}
	devs := s.Devices()
	if len(devs) != 8 {
		t.Fatalf("%d devices", len(devs))
	}
	want := GPUInfo{Index: 3, Name: "NVIDIA H200 141GB HBM3e", UUID: "GPU-h200-3", Serial: "1650924060003",
		DriverVersion: "550.54.15", CUDAVersion: "12.4"}
	if devs[3] != want {
		t.Errorf("device 3 = %+v, want %+v", devs[3], want)
	}
	stats, err := s.Sample()
	if err != nil || len(stats) != 8 {
		t.Fatalf("%d stats, %v", len(stats), err)
	}
	g := stats[2]
	total := uint64(144384) << 20
	if g.Index != 2 || *g.Utilization != 0.5 || *g.MemoryTotalBytes != total || *g.MemoryUsedBytes != total/2 ||
		*g.PowerWatts != 452 || *g.SMClockMHz != 1980 || *g.TemperatureC != 52 {
		t.Errorf("gpu 2: idx %d util %v mem %v/%v power %v clock %v temp %v", g.Index, *g.Utilization,
			*g.MemoryUsedBytes, *g.MemoryTotalBytes, *g.PowerWatts, *g.SMClockMHz, *g.TemperatureC)
	}
	// The energy counter (mJ) in joules; a second reading is 1 kJ more.
	if g.EnergyJoules == nil || *g.EnergyJoules != 1000 {
		t.Errorf("gpu 2 energy %v, want 1000 J", g.EnergyJoules)
	}
	if again, _ := s.Sample(); again[2].EnergyJoules == nil || *again[2].EnergyJoules != 2000 {
		t.Errorf("gpu 2 energy at the second reading: %v", again[2].EnergyJoules)
	}
	s.Close()
	s.Close()
	if n := len(lib.ShutdownCalls()); n != 1 {
		t.Errorf("Shutdown called %d times", n)
	}
	if _, err := s.Sample(); err == nil {
		t.Error("Sample after Close")
	}
}

func TestNVMLUnsupportedAndFailingReadings(t *testing.T) {
	t.Parallel()
	lib, devs := fakeH200(2)
	// GPU 0 is a MIG-enabled card: utilization NOT_SUPPORTED, no serial.
	devs[0].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{}, nvml.ERROR_NOT_SUPPORTED }
	devs[0].GetSerialFunc = func() (string, nvml.Return) { return "", nvml.ERROR_NOT_SUPPORTED }
	// GPU 1 fell off the bus for power, and reports garbage utilization.
	devs[1].GetPowerUsageFunc = func() (uint32, nvml.Return) { return 0, nvml.ERROR_GPU_IS_LOST }
	devs[1].GetUtilizationRatesFunc = func() (nvml.Utilization, nvml.Return) {
		return nvml.Utilization{Gpu: 4294967295}, nvml.SUCCESS
	}
	s, err := newNVMLFrom(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if d := s.Devices(); d[0].Serial != "" || d[1].Serial == "" {
		t.Errorf("serials %+v", d)
	}
	stats, err := s.Sample()
	if len(stats) != 2 {
		t.Fatalf("stats %+v", stats)
	}
	if stats[0].Utilization != nil || stats[0].PowerWatts == nil || stats[1].PowerWatts != nil || stats[1].Utilization != nil {
		t.Errorf("stats %+v", stats)
	}
	if err == nil || !strings.Contains(err.Error(), "gpu 1 power: ERROR_GPU_IS_LOST") ||
		!strings.Contains(err.Error(), "gpu 1 utilization: reading 4294967295% out of range") ||
		strings.Contains(err.Error(), "gpu 0") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v", err)
	}
	if errors.Is(err, ErrNoNVML) {
		t.Errorf("a partial reading failure is not ErrNoNVML: %v", err)
	}
}

func TestNVMLUnavailable(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		edit     func(*mock.Interface)
		ret      nvml.Return
		shutdown int
	}{
		{"no library", func(l *mock.Interface) {
			l.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
		}, nvml.ERROR_LIBRARY_NOT_FOUND, 0},
		{"driver not loaded", func(l *mock.Interface) {
			l.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
		}, nvml.ERROR_DRIVER_NOT_LOADED, 0},
		{"count fails", func(l *mock.Interface) {
			l.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
		}, nvml.ERROR_UNKNOWN, 1},
		{"no GPUs", func(l *mock.Interface) {
			l.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.SUCCESS }
		}, nvml.SUCCESS, 1},
		{"a mock without the funcs (panics inside)", func(l *mock.Interface) {
			l.DeviceGetCountFunc = nil
		}, nvml.SUCCESS, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			lib, _ := fakeH200(1)
			c.edit(lib)
			s, err := newNVMLFrom(lib)
			if s != nil || !errors.Is(err, ErrNoNVML) {
				t.Fatalf("sampler %v, err %v", s, err)
			}
			if c.ret != nvml.SUCCESS && !errors.Is(err, c.ret) {
				t.Errorf("%v does not wrap %v", err, c.ret)
			}
			if n := len(lib.ShutdownCalls()); n != c.shutdown {
				t.Errorf("Shutdown called %d times, want %d", n, c.shutdown)
			}
		})
	}
}

func TestNewNVMLOnThisMachine(t *testing.T) {
	t.Parallel()
	s, err := NewNVML()
	if err != nil {
		if !errors.Is(err, ErrNoNVML) {
			t.Fatalf("NewNVML without a usable driver: %v is not ErrNoNVML", err)
		}
		t.Logf("no NVML here: %v", err)
		return
	}
	defer s.Close()
	stats, err := s.Sample()
	t.Logf("devices %+v; stats %d; err %v", s.Devices(), len(stats), err)
	if len(stats) != len(s.Devices()) || len(stats) == 0 {
		t.Errorf("%d stats for %d devices", len(stats), len(s.Devices()))
	}
}

func TestRunWithNVMLMock(t *testing.T) {
	t.Parallel()
	lib, _ := fakeH200(2)
	s, err := newNVMLFrom(lib)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := Start(t.Context(), Config{GPU: s, Interval: 20 * time.Millisecond}, nil)
	r.Snapshot()
	sum := r.Stop()
	if sum.GPUUtilizationFrom != "nvml" || sum.GPUUtilization == nil || !near(sum.GPUUtilization.Mean, 0.425) ||
		len(sum.GPUs) != 2 || sum.GPUs[1].Name != "NVIDIA H200 141GB HBM3e" || sum.GPUs[1].PowerWatts.Max != 451 ||
		len(sum.Devices) != 2 || sum.Devices[0].Serial != "1650924060000" {
		t.Errorf("summary %+v", sum)
	}
}
