package llmd

import (
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// withTelemetry is summary() with a vLLM server sampled and two GPUs read
// by the GPU sampler (and one of them also scraped from dcgm-exporter).
func withTelemetry() *results.Summary {
	s := summary()
	hit := 0.25
	st := func(mean, p95, max float64) *telemetry.Stats {
		return &telemetry.Stats{N: 10, Mean: mean, P95: p95, Max: max}
	}
	s.Telemetry = &telemetry.Summary{
		Family:             "vllm",
		Samples:            10,
		Running:            st(3, 5, 6),
		Waiting:            st(1, 2, 4),
		KVUsage:            st(0.4, 0.7, 0.8),
		Capacity:           &telemetry.Capacity{PrefixCacheHitRate: &hit},
		GPUUtilization:     st(0.5, 0.9, 1),
		GPUUtilizationFrom: "nvml",
		GPUs: []telemetry.GPUSummary{
			{Source: "nvml", GPU: "0", Name: "NVIDIA H100 80GB HBM3", MemoryUsedBytes: st(4<<30, 5<<30, 6<<30), PowerWatts: st(300, 400, 450)},
			{Source: "nvml", GPU: "1", Name: "NVIDIA H100 80GB HBM3", MemoryUsedBytes: st(2<<30, 3<<30, 3<<30), PowerWatts: st(200, 250, 260)},
			{Source: "http://dcgm:9400/metrics", GPU: "0", MemoryUsedBytes: st(9<<30, 9<<30, 9<<30), PowerWatts: st(999, 999, 999)},
		},
		Devices: []telemetry.GPUInfo{{Index: 0, Name: "NVIDIA H100 80GB HBM3"}, {Index: 1, Name: "NVIDIA H100 80GB HBM3"}},
	}
	return s
}

// With telemetry: one generic component (server family, model, the
// sampler's two GPUs) and its resource figures in the published units,
// labelled as the component; memory and power summed over the sampler's
// GPUs only (the scraped copy of GPU 0 is not counted again), mean only.
func TestStackAndObservability(t *testing.T) {
	t.Parallel()
	r := FromSummary(withTelemetry(), []byte("{}"))
	r.Run.EID = r.Run.UID
	if len(r.Scenario.Stack) != 1 {
		t.Fatalf("stack %+v", r.Scenario.Stack)
	}
	c := r.Scenario.Stack[0]
	g := c.Standardized
	if g.Kind != "generic" || g.Tool != "vllm" || g.ToolVersion != "unknown" || g.Model == nil || g.Model.Name != "m" ||
		g.Accelerator == nil || g.Accelerator.Model != "NVIDIA H100 80GB HBM3" || g.Accelerator.Count != 2 ||
		c.Metadata.Label != "vllm" || len(c.Metadata.CfgID) != 32 {
		t.Errorf("component %+v, standardized %+v, accelerator %+v", c, g, g.Accelerator)
	}
	o := r.Results.Observability
	if o == nil || len(o.Components) != 1 || o.Components[0].ComponentLabel != c.Metadata.Label {
		t.Fatalf("observability %+v", o)
	}
	a := o.Components[0].Aggregate
	for name, tc := range map[string]struct {
		got      *Statistics
		units    string
		mean     float64
		p95, max float64
		meanOnly bool
	}{
		"kv_cache_usage":    {a.KVCacheUsage, "percent", 40, 70, 80, false},
		"gpu_utilization":   {a.GPUUtilization, "percent", 50, 90, 100, false},
		"cache_hit_rate":    {a.CacheHitRate, "percent", 25, 0, 0, true},
		"running_requests":  {a.RunningRequests, "count", 3, 5, 6, false},
		"waiting_requests":  {a.WaitingRequests, "count", 1, 2, 4, false},
		"gpu_memory_usage":  {a.GPUMemoryUsage, "GiB", 6, 0, 0, true},
		"power_consumption": {a.PowerConsumption, "Watts", 500, 0, 0, true},
	} {
		s := tc.got
		if s == nil {
			t.Errorf("%s absent", name)
			continue
		}
		if s.Units != tc.units || math.Abs(s.Mean-tc.mean) > 1e-9 {
			t.Errorf("%s: %s %v, want %s %v", name, s.Units, s.Mean, tc.units, tc.mean)
		}
		if tc.meanOnly != (s.P95 == nil && s.Max == nil) {
			t.Errorf("%s: p95 %v max %v, mean only %v", name, s.P95, s.Max, tc.meanOnly)
		} else if !tc.meanOnly && (math.Abs(*s.P95-tc.p95) > 1e-9 || math.Abs(*s.Max-tc.max) > 1e-9) {
			t.Errorf("%s: p95 %v max %v, want %v %v", name, *s.P95, *s.Max, tc.p95, tc.max)
		}
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("does not validate: %v", err)
	}
}

// One GPU: its memory and power keep their p95 and max; no server family
// told (dcgm-exporter alone) names the component inference-server; a
// figure not measured (KV usage, queue, cache hits) is absent.
func TestStackOneGPUNoFamily(t *testing.T) {
	t.Parallel()
	s := summary()
	s.Telemetry = &telemetry.Summary{Family: "dcgm-exporter", Samples: 4, GPUUtilizationFrom: "endpoint",
		GPUUtilization: &telemetry.Stats{N: 4, Mean: 0.2, P95: 0.3, Max: 0.3},
		GPUs: []telemetry.GPUSummary{{Source: "http://dcgm:9400/metrics", GPU: "0", Name: "NVIDIA L4",
			MemoryUsedBytes: &telemetry.Stats{N: 4, Mean: 1 << 29, P95: 1 << 30, Max: 1 << 31},
			PowerWatts:      &telemetry.Stats{N: 4, Mean: 50, P95: 60, Max: 70}}}}
	r := FromSummary(s, []byte("{}"))
	r.Run.EID = r.Run.UID
	c := r.Scenario.Stack[0]
	if c.Standardized.Tool != unknownServer || c.Metadata.Label != unknownServer ||
		*c.Standardized.Accelerator != (Accelerator{Model: "NVIDIA L4", Count: 1}) {
		t.Errorf("component %+v", c)
	}
	a := r.Results.Observability.Components[0].Aggregate
	if m := a.GPUMemoryUsage; m.Mean != 0.5 || *m.P95 != 1 || *m.Max != 2 {
		t.Errorf("gpu memory %+v", m)
	}
	if p := a.PowerConsumption; p.Mean != 50 || *p.P95 != 60 || *p.Max != 70 {
		t.Errorf("power %+v", p)
	}
	if a.KVCacheUsage != nil || a.RunningRequests != nil || a.WaitingRequests != nil || a.CacheHitRate != nil {
		t.Errorf("unmeasured written: %+v", a)
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("does not validate: %v", err)
	}
}

// Telemetry that measured no resource figure (a server without metrics)
// still names the stack, but writes no observability block.
func TestStackWithoutFigures(t *testing.T) {
	t.Parallel()
	s := summary()
	s.Telemetry = &telemetry.Summary{Family: "unknown", NoMetrics: "no server metrics (Ollama)"}
	r := FromSummary(s, []byte("{}"))
	if len(r.Scenario.Stack) != 1 || r.Scenario.Stack[0].Standardized.Accelerator != nil || r.Results.Observability != nil {
		t.Errorf("stack %+v, observability %+v", r.Scenario.Stack, r.Results.Observability)
	}
}

// Without telemetry neither block is written, not even empty.
func TestNoTelemetryNoStack(t *testing.T) {
	t.Parallel()
	b, err := json.Marshal(FromSummary(summary(), []byte("{}")))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"stack"`, `"observability"`, `"components"`, `"accelerator"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("%s written without telemetry: %s", k, b)
		}
	}
}

// The schema refuses the new blocks with a planted wrong unit or an
// unknown key.
func TestSchemaRefusesPlantedStack(t *testing.T) {
	r := FromSummary(withTelemetry(), []byte("{}"))
	plant := planter(t, r)
	obj := func(m map[string]any, path ...any) map[string]any {
		var v any = m
		for _, k := range path {
			switch k := k.(type) {
			case string:
				v = v.(map[string]any)[k]
			case int:
				v = v.([]any)[k]
			}
		}
		return v.(map[string]any)
	}
	agg := []any{"results", "observability", "components", 0, "aggregate"}
	comp := []any{"scenario", "stack", 0}
	if err := plant(func(map[string]any) {}); err != nil {
		t.Fatalf("unchanged report refused: %v", err)
	}
	for name, f := range map[string]func(map[string]any){
		"kv_cache_usage in fraction":      func(m map[string]any) { obj(m, append(agg, "kv_cache_usage")...)["units"] = "fraction" },
		"gpu_utilization in ratio":        func(m map[string]any) { obj(m, append(agg, "gpu_utilization")...)["units"] = "ratio" },
		"cache_hit_rate in count":         func(m map[string]any) { obj(m, append(agg, "cache_hit_rate")...)["units"] = "count" },
		"gpu_memory_usage in bytes":       func(m map[string]any) { obj(m, append(agg, "gpu_memory_usage")...)["units"] = "bytes" },
		"power_consumption in W":          func(m map[string]any) { obj(m, append(agg, "power_consumption")...)["units"] = "W" },
		"running_requests in percent":     func(m map[string]any) { obj(m, append(agg, "running_requests")...)["units"] = "percent" },
		"waiting_requests in queries/s":   func(m map[string]any) { obj(m, append(agg, "waiting_requests")...)["units"] = "queries/s" },
		"kv_cache_usage over 100 percent": func(m map[string]any) { obj(m, append(agg, "kv_cache_usage")...)["max"] = 120.0 },
		"unknown key in aggregate": func(m map[string]any) {
			obj(m, agg...)["gpu_temperature"] = map[string]any{"units": "count", "mean": 1.0}
		},
		"unknown key in a component observed": func(m map[string]any) {
			obj(m, "results", "observability", "components", 0)["pod"] = "x"
		},
		"unknown key in observability": func(m map[string]any) { obj(m, "results", "observability")["gpus"] = 2 },
		"empty aggregate": func(m map[string]any) {
			obj(m, "results", "observability", "components", 0)["aggregate"] = map[string]any{}
		},
		"unknown key in standardized": func(m map[string]any) { obj(m, append(comp, "standardized")...)["replicas"] = 1 },
		"kind inference_engine":       func(m map[string]any) { obj(m, append(comp, "standardized")...)["kind"] = "inference_engine" },
		"unknown key in accelerator":  func(m map[string]any) { obj(m, append(comp, "standardized", "accelerator")...)["memory"] = "80GB" },
		"zero GPUs":                   func(m map[string]any) { obj(m, append(comp, "standardized", "accelerator")...)["count"] = 0 },
		"no cfg_id":                   func(m map[string]any) { delete(obj(m, append(comp, "metadata")...), "cfg_id") },
		"unknown key in metadata":     func(m map[string]any) { obj(m, append(comp, "metadata")...)["name"] = "x" },
		"no native":                   func(m map[string]any) { delete(obj(m, comp...), "native") },
	} {
		if err := plant(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
