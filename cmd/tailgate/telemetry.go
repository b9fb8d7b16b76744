package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// telemetryFlags choose what is sampled beside the load: the server's own
// /metrics, a dcgm-exporter, and local GPUs through NVML.
type telemetryFlags struct {
	metricsURL string
	dcgmURL    string
	nvml       string
	interval   time.Duration
}

func (t *telemetryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.metricsURL, "metrics-url", "", "server Prometheus metrics to sample (default: TARGET/metrics; \"off\" to skip)")
	fs.StringVar(&t.dcgmURL, "dcgm-url", "", "dcgm-exporter metrics to sample as well, e.g. http://gpu-node:9400/metrics")
	fs.StringVar(&t.nvml, "nvml", "auto", "sample local GPUs through NVML: auto (if a driver is present), on, off")
	fs.DurationVar(&t.interval, "telemetry-interval", time.Second, "telemetry sampling interval")
}

// config builds the sampler configuration. The target's credentials go to
// a metrics endpoint on the same host only. A missing NVML is fine in auto
// mode; warnings go to warn.
func (t *telemetryFlags) config(target string, auth http.Header, warn io.Writer) (*telemetry.Config, error) {
	cfg := &telemetry.Config{Interval: t.interval}
	if t.interval <= 0 {
		return nil, fmt.Errorf("--telemetry-interval %v: must be positive", t.interval)
	}
	switch mu := strings.TrimSpace(t.metricsURL); mu {
	case "off", "none":
	default:
		if mu == "" {
			mu = metricsURLFor(target)
		}
		sc := telemetry.ScrapeConfig{URL: mu}
		if sameHost(mu, target) {
			sc.Headers = auth
		}
		cfg.Scrapes = append(cfg.Scrapes, sc)
	}
	if t.dcgmURL != "" {
		cfg.Scrapes = append(cfg.Scrapes, telemetry.ScrapeConfig{URL: t.dcgmURL})
	}
	switch t.nvml {
	case "off":
	case "auto", "on":
		g, err := telemetry.NewNVML()
		switch {
		case err == nil:
			cfg.GPU = g
		case t.nvml == "on":
			return nil, fmt.Errorf("--nvml on: %v", err)
		case !errors.Is(err, telemetry.ErrNoNVML):
			fmt.Fprintf(warn, "warning: NVML: %v; local GPUs are not sampled\n", err)
		}
	default:
		return nil, fmt.Errorf("--nvml %q: want auto, on or off", t.nvml)
	}
	if len(cfg.Scrapes) == 0 && cfg.GPU == nil {
		return nil, nil
	}
	return cfg, nil
}

// metricsURLFor is TARGET/metrics, with any /v1 suffix dropped (vLLM,
// SGLang and TGI serve /metrics beside /v1).
func metricsURLFor(target string) string {
	u, err := url.Parse(strings.TrimSpace(target))
	if err != nil {
		return strings.TrimRight(target, "/") + "/metrics"
	}
	p := strings.TrimRight(u.Path, "/")
	p = strings.TrimSuffix(p, "/v1")
	u.Path, u.RawQuery, u.Fragment = p+"/metrics", "", ""
	return u.String()
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}

// queueTelemetry converts a server queue-delay histogram delta into the
// SLO evaluator's input (nil when the server exposed none).
func queueTelemetry(h *telemetry.Histogram) *slo.QueueTelemetry {
	if h == nil || len(h.Buckets) == 0 || h.MeanOnly() {
		return nil
	}
	q := &slo.QueueTelemetry{Source: h.Source}
	for _, b := range h.Buckets {
		le := slo.InfBound
		if !math.IsInf(b.LeSeconds, 1) {
			le = time.Duration(math.Round(b.LeSeconds * float64(time.Second)))
		}
		q.Buckets = append(q.Buckets, slo.Bucket{Le: le, Count: b.Count})
	}
	return q
}

// gpusForEvidence lists NVML's devices (model, UUID, serial, driver) for
// the evidence pack.
func gpusForEvidence(cfg *telemetry.Config) []evidence.GPU {
	if cfg == nil || cfg.GPU == nil {
		return nil
	}
	var out []evidence.GPU
	for _, d := range cfg.GPU.Devices() {
		out = append(out, evidence.GPU{Index: d.Index, Model: d.Name, UUID: d.UUID, Serial: d.Serial,
			Driver: d.DriverVersion, Source: "nvml"})
	}
	return out
}

// queueFile holds, per stage, the server queue-delay histogram validate
// judged queue_delay objectives on, so check can judge them again.
const queueFile = "queue_delay.json"

type queueBucketJSON struct {
	LeSeconds *float64 `json:"le_s"` // null: +Inf
	Count     uint64   `json:"count"`
}

type queueJSON struct {
	Source  string            `json:"source"`
	Buckets []queueBucketJSON `json:"buckets"`
}

func writeQueueTelemetry(path string, byStage map[string]*slo.QueueTelemetry) error {
	out := map[string]queueJSON{}
	for st, q := range byStage {
		j := queueJSON{Source: q.Source}
		for _, b := range q.Buckets {
			var le *float64
			if b.Le != slo.InfBound {
				v := b.Le.Seconds()
				le = &v
			}
			j.Buckets = append(j.Buckets, queueBucketJSON{LeSeconds: le, Count: b.Count})
		}
		out[st] = j
	}
	return exporters.WriteJSON(path, out)
}

// readQueueTelemetry reads queueFile; a missing file is no telemetry.
func readQueueTelemetry(path string) (map[string]*slo.QueueTelemetry, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var in map[string]queueJSON
	if err := json.Unmarshal(b, &in); err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	out := map[string]*slo.QueueTelemetry{}
	for st, j := range in {
		q := &slo.QueueTelemetry{Source: j.Source}
		for _, b := range j.Buckets {
			le := slo.InfBound
			if b.LeSeconds != nil {
				le = time.Duration(math.Round(*b.LeSeconds * float64(time.Second)))
			}
			q.Buckets = append(q.Buckets, slo.Bucket{Le: le, Count: b.Count})
		}
		out[st] = q
	}
	return out, nil
}
