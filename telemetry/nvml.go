//go:build linux && cgo

package telemetry

import (
	"errors"
	"fmt"
	"sync"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// NewNVML loads libnvidia-ml.so, initialises NVML and enumerates the GPUs.
// Without a driver, without GPUs, or when Init fails it returns an error
// wrapping ErrNoNVML (and the NVML return code), never panics. Close the
// sampler when done.
func NewNVML() (GPUSampler, error) {
	return newNVMLFrom(nvml.New())
}

// nvmlSampler reads GPUs through an nvml.Interface: the real library or a
// go-nvml mock.
type nvmlSampler struct {
	lib     nvml.Interface
	devices []nvml.Device
	info    []GPUInfo

	closeOnce sync.Once
	mu        sync.Mutex // serialises Sample against Close
	closed    bool
}

// newNVMLFrom initialises lib and reads each device's identity once.
func newNVMLFrom(lib nvml.Interface) (s GPUSampler, err error) {
	initialised := false
	defer func() {
		if p := recover(); p != nil {
			if initialised {
				func() {
					defer func() { _ = recover() }()
					lib.Shutdown()
				}()
			}
			s, err = nil, fmt.Errorf("%w: nvml panicked: %v", ErrNoNVML, p)
		}
	}()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return nil, fmt.Errorf("%w: init: %w", ErrNoNVML, ret)
	}
	initialised = true
	fail := func(err error) (GPUSampler, error) {
		lib.Shutdown()
		return nil, err
	}
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return fail(fmt.Errorf("%w: device count: %w", ErrNoNVML, ret))
	}
	if n == 0 {
		return fail(fmt.Errorf("%w: the driver sees no GPU", ErrNoNVML))
	}
	driver, ret := lib.SystemGetDriverVersion()
	if ret != nvml.SUCCESS {
		driver = ""
	}
	cuda := ""
	if v, ret := lib.SystemGetCudaDriverVersion(); ret == nvml.SUCCESS && v > 0 {
		cuda = fmt.Sprintf("%d.%d", v/1000, v%1000/10)
	}
	ns := &nvmlSampler{lib: lib}
	for i := range n {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return fail(fmt.Errorf("telemetry: nvml device %d: %w", i, ret))
		}
		gi := GPUInfo{Index: i, DriverVersion: driver, CUDAVersion: cuda}
		if idx, ret := d.GetIndex(); ret == nvml.SUCCESS {
			gi.Index = idx
		}
		gi.Name = okString(d.GetName())
		gi.UUID = okString(d.GetUUID())
		gi.Serial = okString(d.GetSerial())
		ns.devices = append(ns.devices, d)
		ns.info = append(ns.info, gi)
	}
	return ns, nil
}

// okString keeps a string NVML returned successfully; otherwise "" (e.g.
// GetSerial is NOT_SUPPORTED on consumer boards).
func okString(s string, ret nvml.Return) string {
	if ret != nvml.SUCCESS {
		return ""
	}
	return s
}

func (s *nvmlSampler) Devices() []GPUInfo {
	out := make([]GPUInfo, len(s.info))
	copy(out, s.info)
	return out
}

// Sample reads utilization, memory, power, SM clock and temperature of every
// device. NOT_SUPPORTED readings are left nil silently; other failures are
// left nil and reported in the error.
func (s *nvmlSampler) Sample() (stats []GPUStat, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("telemetry: nvml: sampler closed")
	}
	defer func() {
		if p := recover(); p != nil {
			err = errors.Join(err, fmt.Errorf("telemetry: nvml panicked: %v", p))
		}
	}()
	var errs []error
	failed := func(i int, what string, ret nvml.Return) bool {
		switch ret {
		case nvml.SUCCESS:
			return false
		case nvml.ERROR_NOT_SUPPORTED:
		default:
			errs = append(errs, fmt.Errorf("gpu %d %s: %w", s.info[i].Index, what, ret))
		}
		return true
	}
	stats = make([]GPUStat, 0, len(s.devices))
	for i, d := range s.devices {
		st := GPUStat{Index: s.info[i].Index}
		if u, ret := d.GetUtilizationRates(); !failed(i, "utilization", ret) {
			if u.Gpu <= 100 {
				st.Utilization = new(float64(u.Gpu) / 100)
			} else { // drivers occasionally report garbage such as 4294967295
				errs = append(errs, fmt.Errorf("gpu %d utilization: reading %d%% out of range, dropped", st.Index, u.Gpu))
			}
		}
		if m, ret := d.GetMemoryInfo(); !failed(i, "memory", ret) {
			st.MemoryUsedBytes, st.MemoryTotalBytes = new(m.Used), new(m.Total)
		}
		if mw, ret := d.GetPowerUsage(); !failed(i, "power", ret) {
			st.PowerWatts = new(float64(mw) / 1000)
		}
		if mj, ret := d.GetTotalEnergyConsumption(); !failed(i, "energy", ret) {
			st.EnergyJoules = new(float64(mj) / 1000)
		}
		if c, ret := d.GetClockInfo(nvml.CLOCK_SM); !failed(i, "sm clock", ret) {
			st.SMClockMHz = new(c)
		}
		if t, ret := d.GetTemperature(nvml.TEMPERATURE_GPU); !failed(i, "temperature", ret) {
			st.TemperatureC = new(t)
		}
		stats = append(stats, st)
	}
	if len(errs) > 0 {
		err = fmt.Errorf("telemetry: nvml: %w", joinErrors(errs))
	}
	return stats, err
}

func (s *nvmlSampler) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.lib.Shutdown()
	})
}
