package telemetry

import (
	"cmp"
	"slices"
	"strconv"

	dto "github.com/prometheus/client_model/go"
)

// EndpointGPU is one GPU as a metrics endpoint reports it. Nil fields were
// not exposed (or held dcgm-exporter's "blank" sentinel).
type EndpointGPU struct {
	// Source is the scrape it came from (filled in by the Run).
	Source string `json:"source,omitempty"`
	// GPU is the gpu label (the device index) or, without one, the UUID.
	GPU   string `json:"gpu"`
	UUID  string `json:"uuid,omitempty"`
	Model string `json:"model,omitempty"`
	// DriverVersion is dcgm-exporter's DCGM_FI_DRIVER_VERSION label.
	DriverVersion string `json:"driver_version,omitempty"`
	// MIG is the GPU instance id (dcgm-exporter's GPU_I_ID) of a MIG slice.
	MIG string `json:"mig,omitempty"`
	// Utilization is 0–1: DCGM_FI_DEV_GPU_UTIL / 100 or nv_gpu_utilization.
	Utilization *float64 `json:"utilization,omitempty"`
	// EngineActive is DCGM_FI_PROF_GR_ENGINE_ACTIVE, the fraction of time
	// the graphics/compute engine was active (more trustworthy than
	// GPU_UTIL on Hopper and later).
	EngineActive     *float64 `json:"engine_active,omitempty"`
	MemoryUsedBytes  *float64 `json:"memory_used_bytes,omitempty"`
	MemoryTotalBytes *float64 `json:"memory_total_bytes,omitempty"`
	PowerWatts       *float64 `json:"power_w,omitempty"`
	// EnergyJoules is DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (mJ since
	// boot), a counter: a window's energy is its increase.
	EnergyJoules *float64 `json:"energy_j,omitempty"`
	TemperatureC *float64 `json:"temperature_c,omitempty"`
	// TensorActive and DRAMActive are DCGM_FI_PROF_PIPE_TENSOR_ACTIVE
	// and DCGM_FI_PROF_DRAM_ACTIVE (0–1).
	TensorActive *float64 `json:"tensor_active,omitempty"`
	DRAMActive   *float64 `json:"dram_active,omitempty"`
	// XIDError is DCGM_FI_DEV_XID_ERRORS, the last XID error's code (0:
	// none); ClockEventReasons is DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, the
	// NVML clocks event reasons bitmask.
	XIDError          *float64 `json:"xid_error,omitempty"`
	ClockEventReasons *float64 `json:"clock_event_reasons,omitempty"`
}

// dcgmBlank is the smallest of DCGM's "blank" sentinels (int32 blank
// 0x7ffffff0; the int64 and fp64 blanks are larger): no real gauge we read
// (%, MiB, W, °C) gets near it. The energy counter is an int64 field that
// passes it after a few hours (mJ since boot), so it is held to DCGM's
// int64 blank (0x7ffffffffffffff0) instead.
const (
	dcgmBlank      = 2147483632
	dcgmBlankInt64 = 9223372036854775792
)

// gpuGauge says how one endpoint metric fills an EndpointGPU. A dialect
// row lists the gauges its endpoint carries (dialect.gpus).
type gpuGauge struct {
	name  string
	field int     // index into gpuAcc
	scale float64 // multiply the raw value by this; 0 means a percentage (÷100)
	max   float64 // drop raw values above this (0: no limit)
	dcgm  bool    // may hold DCGM's blank sentinel
}

const (
	gUtil = iota
	gEngine
	gUsed
	gFree
	gReserved
	gTotal
	gPower
	gTemp
	gTensor
	gDRAM
	gXID    // the last XID error code: kept as the largest, not averaged
	gClock  // clock event reasons bitmask: or-ed, not averaged
	gEnergy // energy counter, joules
	gFields
)

// dcgmGauges are dcgm-exporter's fields, under their classic, DCGM 4.6
// and --use-old-namespace names.
var dcgmGauges = []gpuGauge{
	{"DCGM_FI_DEV_GPU_UTIL", gUtil, 0, 100, true},
	{"DCGM_FI_PROF_GR_ENGINE_ACTIVE", gEngine, 1, 1, true},
	{"DCGM_FI_DEV_FB_USED", gUsed, 1 << 20, 0, true},
	{"DCGM_FI_DEV_FB_FREE", gFree, 1 << 20, 0, true},
	{"DCGM_FI_DEV_FB_RESERVED", gReserved, 1 << 20, 0, true},
	{"DCGM_FI_DEV_FB_TOTAL", gTotal, 1 << 20, 0, true},
	{"DCGM_FI_DEV_POWER_USAGE", gPower, 1, 0, true},
	// The energy counter, mJ since boot.
	{"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", gEnergy, 1e-3, 0, true},
	{"dcgm_total_energy_consumption", gEnergy, 1e-3, 0, true},
	{"DCGM_FI_DEV_GPU_TEMP", gTemp, 1, 0, true},
	// DCGM 4.6 names (the ones above are its legacy aliases).
	{"DCGM_FI_PROF_GR_ENGINE_UTIL_RATIO", gEngine, 1, 1, true},
	{"DCGM_FI_DEV_BOARD_POWER_WATTS", gPower, 1, 0, true},
	{"DCGM_FI_DEV_GPU_TEMP_CELSIUS", gTemp, 1, 0, true},
	// dcgm-exporter --use-old-namespace (with a lowercase uuid label).
	{"dcgm_gpu_utilization", gUtil, 0, 100, true},
	{"dcgm_prof_gr_engine_active", gEngine, 1, 1, true},
	{"dcgm_fb_used", gUsed, 1 << 20, 0, true},
	{"dcgm_fb_free", gFree, 1 << 20, 0, true},
	{"dcgm_power_usage", gPower, 1, 0, true},
	{"dcgm_gpu_temp", gTemp, 1, 0, true},
	// Tensor pipe and DRAM activity, XID errors and clock event reasons,
	// under their classic, DCGM 4.6 and old-namespace names.
	{"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", gTensor, 1, 1, true},
	{"DCGM_FI_PROF_TENSOR_UTIL_RATIO", gTensor, 1, 1, true},
	{"dcgm_prof_pipe_tensor_active", gTensor, 1, 1, true},
	{"DCGM_FI_PROF_DRAM_ACTIVE", gDRAM, 1, 1, true},
	{"DCGM_FI_PROF_DRAM_UTIL_RATIO", gDRAM, 1, 1, true},
	{"dcgm_prof_dram_active", gDRAM, 1, 1, true},
	{"DCGM_FI_DEV_XID_ERRORS", gXID, 1, 0, true},
	{"DCGM_FI_DEV_XID_ERROR", gXID, 1, 0, true},
	{"dcgm_xid_errors", gXID, 1, 0, true},
	{"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", gClock, 1, 0, true},
	{"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", gClock, 1, 0, true},
	{"dcgm_clock_throttle_reasons", gClock, 1, 0, true},
}

// tritonGPUGauges are Triton's own nv_gpu_* gauges.
var tritonGPUGauges = []gpuGauge{
	{"nv_gpu_utilization", gUtil, 1, 1, false},
	{"nv_gpu_memory_used_bytes", gUsed, 1, 0, false},
	{"nv_gpu_memory_total_bytes", gTotal, 1, 0, false},
	{"nv_gpu_power_usage", gPower, 1, 0, false},
}

// gpuGaugesOf lists the rows' GPU gauges, in table order.
func gpuGaugesOf(rows []dialect) []gpuGauge {
	var out []gpuGauge
	for _, d := range rows {
		out = append(out, d.gpus...)
	}
	return out
}

type gpuAcc struct {
	gpu EndpointGPU
	sum [gFields]float64
	n   [gFields]int
}

// endpointGPUs collects the per-GPU gauges of every dialect row. Series of
// one GPU that differ only in other labels (pod, container) are averaged,
// not summed: each is a reading of the same device.
func endpointGPUs(fams map[string]*dto.MetricFamily, rows []dialect) []EndpointGPU {
	accs := map[string]*gpuAcc{}
	for _, g := range gpuGaugesOf(rows) {
		for _, m := range fams[g.name].GetMetric() {
			v, ok := value(m)
			blank := float64(dcgmBlank)
			if g.field == gEnergy {
				blank = dcgmBlankInt64
			}
			if !ok || v < 0 || (g.dcgm && v >= blank) || (g.max > 0 && v > g.max) || v > maxGauge {
				continue
			}
			uuid := cmp.Or(label(m, "UUID"), label(m, "gpu_uuid"), label(m, "uuid"))
			gpu, mig := label(m, "gpu"), label(m, "GPU_I_ID")
			if uuid == "" && gpu == "" {
				continue
			}
			key := cmp.Or(uuid, "gpu:"+gpu) + "/" + mig
			a := accs[key]
			if a == nil {
				a = &gpuAcc{gpu: EndpointGPU{GPU: cmp.Or(gpu, uuid), UUID: uuid, MIG: mig}}
				accs[key] = a
			}
			if a.gpu.Model == "" {
				a.gpu.Model = cmp.Or(label(m, "modelName"), label(m, "model_name"))
			}
			if a.gpu.DriverVersion == "" {
				a.gpu.DriverVersion = label(m, "DCGM_FI_DRIVER_VERSION")
			}
			if g.scale == 0 {
				v /= 100
			} else {
				v *= g.scale
			}
			switch g.field {
			case gXID:
				a.sum[g.field] = max(a.sum[g.field], v)
			case gClock:
				a.sum[g.field] = float64(uint64(a.sum[g.field]) | uint64(v))
			default:
				a.sum[g.field] += v
			}
			a.n[g.field]++
		}
	}
	out := make([]EndpointGPU, 0, len(accs))
	for _, a := range accs {
		mean := func(f int) *float64 {
			if a.n[f] == 0 {
				return nil
			}
			return new(a.sum[f] / float64(a.n[f]))
		}
		g := a.gpu
		g.Utilization, g.EngineActive = mean(gUtil), mean(gEngine)
		g.MemoryUsedBytes, g.MemoryTotalBytes = mean(gUsed), mean(gTotal)
		if g.MemoryTotalBytes == nil && g.MemoryUsedBytes != nil && a.n[gFree] > 0 {
			total := *g.MemoryUsedBytes + *mean(gFree)
			if r := mean(gReserved); r != nil {
				total += *r
			}
			g.MemoryTotalBytes = &total
		}
		g.PowerWatts, g.TemperatureC = mean(gPower), mean(gTemp)
		g.TensorActive, g.DRAMActive = mean(gTensor), mean(gDRAM)
		g.EnergyJoules = mean(gEnergy)
		if a.n[gXID] > 0 {
			g.XIDError = new(a.sum[gXID])
		}
		if a.n[gClock] > 0 {
			g.ClockEventReasons = new(a.sum[gClock])
		}
		out = append(out, g)
	}
	sortGPUs(out)
	return out
}

// sortGPUs orders by source, numeric gpu index, then UUID and MIG id.
func sortGPUs(gs []EndpointGPU) {
	slices.SortFunc(gs, func(a, b EndpointGPU) int {
		if c := cmp.Compare(a.Source, b.Source); c != 0 {
			return c
		}
		ai, aerr := strconv.Atoi(a.GPU)
		bi, berr := strconv.Atoi(b.GPU)
		if aerr == nil && berr == nil && ai != bi {
			return cmp.Compare(ai, bi)
		}
		return cmp.Or(cmp.Compare(a.GPU, b.GPU), cmp.Compare(a.UUID, b.UUID), cmp.Compare(a.MIG, b.MIG))
	})
}
