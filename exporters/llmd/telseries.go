package llmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/tailgate-llm/tailgate/telemetry"
)

// ResourceSeries is an observability component's time_series: one point
// per telemetry round (telemetry.jsonl), each figure in its aggregate's
// units. The published TimeSeriesResourceMetrics has no running, waiting
// or cache-hit series, so those stay aggregate only.
type ResourceSeries struct {
	KVCacheUsage     *Series `json:"kv_cache_usage,omitempty"`
	GPUMemoryUsage   *Series `json:"gpu_memory_usage,omitempty"`
	GPUUtilization   *Series `json:"gpu_utilization,omitempty"`
	PowerConsumption *Series `json:"power_consumption,omitempty"`
}

// addTelemetrySeries adds the time series of the telemetry samples at path
// to r's observability component; nothing when the run kept no samples, or
// when the report has no observability component to hold them.
func addTelemetrySeries(r *Report, path string, t *telemetry.Summary) error {
	obs := r.Results.Observability
	if t == nil || obs == nil || len(obs.Components) == 0 {
		return nil
	}
	samples, err := readTelemetry(path)
	if err != nil || len(samples) == 0 {
		return err
	}
	// The GPUs of one source, as the aggregate takes them: the sampler's
	// when it ran, else the scraped ones.
	nvml := false
	for _, g := range t.GPUs {
		if g.Source == "nvml" {
			nvml = true
		}
	}
	var rs ResourceSeries
	add := func(dst **Series, units string, ts string, v float64) {
		if *dst == nil {
			*dst = &Series{Units: units}
		}
		(*dst).Series = append((*dst).Series, Point{TS: ts, Value: &v})
	}
	for _, s := range samples {
		ts := s.At.UTC().Format(time.RFC3339Nano)
		if sv := s.Server; sv != nil && sv.KVUsage != nil {
			add(&rs.KVCacheUsage, "percent", ts, *sv.KVUsage*100)
		}
		var util, mem, power []float64
		var gpus int
		if nvml {
			gpus = len(s.GPUs)
			for _, g := range s.GPUs {
				if g.Utilization != nil {
					util = append(util, *g.Utilization)
				}
				if g.MemoryUsedBytes != nil {
					mem = append(mem, float64(*g.MemoryUsedBytes))
				}
				if g.PowerWatts != nil {
					power = append(power, *g.PowerWatts)
				}
			}
		} else if s.Server != nil {
			gpus = len(s.Server.GPUs)
			for _, g := range s.Server.GPUs {
				if g.Utilization != nil {
					util = append(util, *g.Utilization)
				}
				if g.MemoryUsedBytes != nil {
					mem = append(mem, *g.MemoryUsedBytes)
				}
				if g.PowerWatts != nil {
					power = append(power, *g.PowerWatts)
				}
			}
		}
		// Utilisation is the mean over the GPUs that read it, as the
		// summary's; memory and power are totals, so a round where a GPU
		// did not read one would understate it and gives no point.
		if len(util) > 0 {
			add(&rs.GPUUtilization, "percent", ts, sum(util)/float64(len(util))*100)
		}
		if len(mem) > 0 && len(mem) == gpus {
			add(&rs.GPUMemoryUsage, "GiB", ts, sum(mem)/(1<<30))
		}
		if len(power) > 0 && len(power) == gpus {
			add(&rs.PowerConsumption, "Watts", ts, sum(power))
		}
	}
	if rs != (ResourceSeries{}) {
		obs.Components[0].TimeSeries = &rs
	}
	return nil
}

func sum(vs []float64) float64 {
	var s float64
	for _, v := range vs {
		s += v
	}
	return s
}

// readTelemetry reads telemetry.jsonl's samples; none when there is no
// file. A torn last line (a run killed mid-write) is left out.
func readTelemetry(path string) ([]telemetry.Sample, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []telemetry.Sample
	lines := bytes.Split(b, []byte("\n"))
	for i, l := range lines {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var s telemetry.Sample
		if err := json.Unmarshal(l, &s); err != nil {
			if i == len(lines)-1 {
				break
			}
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		out = append(out, s)
	}
	return out, nil
}
