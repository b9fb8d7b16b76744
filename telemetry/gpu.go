package telemetry

import "errors"

// ErrNoNVML is wrapped by every error that means "no NVML here": the binary
// was built without cgo or not for Linux, libnvidia-ml.so is missing, Init
// failed, or the driver sees no GPU. Callers treat it as "run without GPU
// sampling", not as a failure: errors.Is(err, ErrNoNVML).
var ErrNoNVML = errors.New("telemetry: NVML not available")

// GPUSampler reads the GPUs of the machine the server runs on. NewNVML
// gives the NVML implementation; tests and remote setups can supply their
// own. Sample may be called from a goroutine other than the one that made
// the sampler, never concurrently with itself; Close is called once, by the
// owner (a Run never closes the sampler it was given).
type GPUSampler interface {
	// Sample reads every device once. A non-nil error with a non-empty
	// slice means some readings failed; those fields are nil.
	Sample() ([]GPUStat, error)
	// Devices describes the devices, in the order Sample reports them.
	Devices() []GPUInfo
	// Close releases the library.
	Close()
}

// GPUStat is one reading of one GPU. A nil field was not read (not
// supported on this device, e.g. utilization on a MIG instance, or the call
// failed).
type GPUStat struct {
	// Index is the NVML device index.
	Index int `json:"index"`
	// Utilization is the fraction (0–1) of the driver's last sample period
	// during which one or more kernels ran (nvmlDeviceGetUtilizationRates;
	// a reading above 100 %, which drivers occasionally give, is dropped
	// and reported as an error).
	Utilization *float64 `json:"utilization,omitempty"`
	// MemoryUsedBytes and MemoryTotalBytes are the framebuffer in use and
	// installed (nvmlDeviceGetMemoryInfo).
	MemoryUsedBytes  *uint64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes *uint64 `json:"memory_total_bytes,omitempty"`
	// PowerWatts is the board power draw.
	PowerWatts *float64 `json:"power_w,omitempty"`
	// EnergyJoules is the energy the board has used since the driver
	// loaded (nvmlDeviceGetTotalEnergyConsumption, mJ): a counter, so the
	// energy of a window is the increase between two readings.
	EnergyJoules *float64 `json:"energy_j,omitempty"`
	// SMClockMHz is the current SM clock.
	SMClockMHz *uint32 `json:"sm_clock_mhz,omitempty"`
	// TemperatureC is the GPU core temperature in °C.
	TemperatureC *uint32 `json:"temperature_c,omitempty"`
}

// GPUInfo identifies one GPU for the evidence pack: model, driver and
// serial.
type GPUInfo struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	UUID  string `json:"uuid"`
	// Serial is the board serial number; empty where the device does not
	// report one (most consumer boards).
	Serial        string `json:"serial,omitempty"`
	DriverVersion string `json:"driver_version"`
	// CUDAVersion is the newest CUDA version the driver supports, "12.4".
	CUDAVersion string `json:"cuda_version,omitempty"`
}
