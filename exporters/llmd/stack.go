package llmd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strings"

	"github.com/tailgate-llm/tailgate/telemetry"
)

// Component is one entry of scenario.stack.
type Component struct {
	Metadata     ComponentMetadata `json:"metadata"`
	Standardized Generic           `json:"standardized"`
	Native       ComponentNative   `json:"native"`
}

// ComponentMetadata is a component's metadata: the label results'
// observability refers to it by, and a digest of its standardized block.
type ComponentMetadata struct {
	Label       string `json:"label"`
	CfgID       string `json:"cfg_id"`
	Description string `json:"description,omitempty"`
}

// Generic is a component of kind "generic". The published
// inference_engine kind needs a role, replicas and parallelism that
// telemetry does not tell; generic takes extra keys, so the model and
// accelerator are written in inference_engine's shapes.
type Generic struct {
	Kind        string       `json:"kind"`
	Tool        string       `json:"tool"`
	ToolVersion string       `json:"tool_version"`
	Model       *ModelName   `json:"model,omitempty"`
	Accelerator *Accelerator `json:"accelerator,omitempty"`
}

// ModelName is the served model.
type ModelName struct {
	Name string `json:"name"`
}

// Accelerator is the GPUs the telemetry sampled: their model names
// (distinct, joined) and how many.
type Accelerator struct {
	Model string `json:"model,omitempty"`
	Count int    `json:"count"`
}

// ComponentNative is the component in tailgate's own terms.
type ComponentNative struct {
	Config map[string]any `json:"config,omitempty"`
}

// Observability is results.observability: one component's aggregate.
type Observability struct {
	Components []ComponentObservability `json:"components"`
}

// ComponentObservability is one component's resource figures.
type ComponentObservability struct {
	ComponentLabel string          `json:"component_label"`
	Aggregate      ResourceMetrics `json:"aggregate"`
	TimeSeries     *ResourceSeries `json:"time_series,omitempty"`
}

// ResourceMetrics holds the published resource metrics tailgate's
// telemetry measures; one it did not measure is absent.
type ResourceMetrics struct {
	KVCacheUsage     *Statistics `json:"kv_cache_usage,omitempty"`
	CacheHitRate     *Statistics `json:"cache_hit_rate,omitempty"`
	GPUMemoryUsage   *Statistics `json:"gpu_memory_usage,omitempty"`
	GPUUtilization   *Statistics `json:"gpu_utilization,omitempty"`
	PowerConsumption *Statistics `json:"power_consumption,omitempty"`
	RunningRequests  *Statistics `json:"running_requests,omitempty"`
	WaitingRequests  *Statistics `json:"waiting_requests,omitempty"`
}

// unknownServer is the stack component's tool when no server family was
// told from the scraped metrics (dcgm-exporter alone is GPUs, not a server).
const unknownServer = "inference-server"

// stackOf is the serving stack as telemetry t saw it, serving model, and
// its resource figures; both nil without telemetry.
func stackOf(t *telemetry.Summary, model string) ([]Component, *Observability) {
	if t == nil {
		return nil, nil
	}
	tool := t.Family
	if tool == "" || tool == string(telemetry.FamilyUnknown) || tool == string(telemetry.FamilyDCGM) {
		tool = unknownServer
	}
	// The server's version is not in its metrics; the schema requires
	// the key, and "unknown" is its word elsewhere for what is not known.
	g := Generic{Kind: "generic", Tool: tool, ToolVersion: "unknown"}
	if model != "" {
		g.Model = &ModelName{Name: model}
	}
	gpus := sampledGPUs(t)
	if names, n := gpuModels(t, gpus); n > 0 {
		g.Accelerator = &Accelerator{Model: names, Count: n}
	}
	b, _ := json.Marshal(g)
	sum := sha256.Sum256(b)
	cfg := map[string]any{"family": t.Family}
	if t.GPUUtilizationFrom != "" {
		cfg["gpu_utilization_from"] = t.GPUUtilizationFrom
	}
	c := Component{
		Metadata: ComponentMetadata{Label: tool, CfgID: hex.EncodeToString(sum[:16]),
			Description: "serving stack as tailgate's telemetry saw it (server metrics and GPU sampling)"},
		Standardized: g,
		Native:       ComponentNative{Config: cfg},
	}
	m := resources(t, gpus)
	if m == (ResourceMetrics{}) {
		return []Component{c}, nil
	}
	return []Component{c}, &Observability{Components: []ComponentObservability{{ComponentLabel: tool, Aggregate: m}}}
}

// sampledGPUs is the GPUs of one source: the GPU sampler's when it ran,
// else the scraped ones, so a GPU both report is not counted twice.
func sampledGPUs(t *telemetry.Summary) []telemetry.GPUSummary {
	var nvml, other []telemetry.GPUSummary
	for _, g := range t.GPUs {
		if g.Source == "nvml" {
			nvml = append(nvml, g)
		} else {
			other = append(other, g)
		}
	}
	if len(nvml) > 0 {
		return nvml
	}
	return other
}

// gpuModels is the distinct GPU model names, joined, and the GPU count:
// the sampler's inventory when it has one, else the sampled GPUs.
func gpuModels(t *telemetry.Summary, gpus []telemetry.GPUSummary) (string, int) {
	var names []string
	add := func(n string) {
		if n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	if len(t.Devices) > 0 {
		for _, d := range t.Devices {
			add(d.Name)
		}
		return strings.Join(names, ", "), len(t.Devices)
	}
	for _, g := range gpus {
		add(g.Name)
	}
	return strings.Join(names, ", "), len(gpus)
}

// resources is telemetry t's figures in the published units: shares
// (0–1) as percent, memory in GiB, power in Watts, requests as counts.
func resources(t *telemetry.Summary, gpus []telemetry.GPUSummary) ResourceMetrics {
	var m ResourceMetrics
	m.KVCacheUsage = gauge(t.KVUsage, 100, "percent")
	m.GPUUtilization = gauge(t.GPUUtilization, 100, "percent")
	m.RunningRequests = gauge(t.Running, 1, "count")
	m.WaitingRequests = gauge(t.Waiting, 1, "count")
	if c := t.Capacity; c != nil {
		// SGLang's gauge over the samples, else vLLM's hits over queries
		// for the whole run (a token-weighted mean, so mean only).
		m.CacheHitRate = gauge(c.CacheHitRate, 100, "percent")
		if m.CacheHitRate == nil && c.PrefixCacheHitRate != nil {
			m.CacheHitRate = &Statistics{Units: "percent", Mean: *c.PrefixCacheHitRate * 100}
		}
	}
	m.GPUMemoryUsage = total(gpus, func(g telemetry.GPUSummary) *telemetry.Stats { return g.MemoryUsedBytes }, 1.0/(1<<30), "GiB")
	m.PowerConsumption = total(gpus, func(g telemetry.GPUSummary) *telemetry.Stats { return g.PowerWatts }, 1, "Watts")
	return m
}

// gauge is s scaled by k as a statistics object in units (mean, p95 and
// max over the samples); nil when s holds no sample.
func gauge(s *telemetry.Stats, k float64, units string) *Statistics {
	if s == nil || s.N == 0 {
		return nil
	}
	p95, hi := s.P95*k, s.Max*k
	return &Statistics{Units: units, Mean: s.Mean * k, P95: &p95, Max: &hi}
}

// total is the component's figure summed over its GPUs, scaled by k. The
// sum of the GPUs' means is the mean of their sum; their p95s and maxima
// do not add up to the sum's, so with several GPUs the mean alone is
// written. nil when no GPU had the figure.
func total(gpus []telemetry.GPUSummary, f func(telemetry.GPUSummary) *telemetry.Stats, k float64, units string) *Statistics {
	var have []*telemetry.Stats
	for _, g := range gpus {
		if s := f(g); s != nil && s.N > 0 {
			have = append(have, s)
		}
	}
	switch len(have) {
	case 0:
		return nil
	case 1:
		return gauge(have[0], k, units)
	}
	var mean float64
	for _, s := range have {
		mean += s.Mean
	}
	return &Statistics{Units: units, Mean: mean * k}
}
