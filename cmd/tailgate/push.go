package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/slo"
)

// pushFlags are --push and --push-target, shared by run and validate.
type pushFlags struct {
	url, target, histograms string
	metrics                 *prom.Metrics
}

func (p *pushFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&p.url, "push", "", "at the end, push the run's metrics (the canary's names) to this Pushgateway URL, job tailgate, grouped by target")
	fs.StringVar(&p.histograms, "push-histograms", "both", `latency histograms pushed: "classic" (buckets on the SLO thresholds), "native" (Prometheus native histograms, bucket factor 1.1) or "both"`)
	fs.StringVar(&p.target, "push-target", "", "the target label (Pushgateway grouping key) for --push (default: host:port of the target URL)")
}

// sink returns the Prometheus sink for --push (nil without it). The target
// label defaults to the target URL's host:port.
func (p *pushFlags) sink(spec *slo.Spec, targetURL string) (pipeline.Sink, error) {
	mode, err := prom.ParseHistogramMode(p.histograms)
	if err != nil {
		return nil, usageErr("--push-histograms: %v", err)
	}
	if p.url == "" {
		if p.target != "" {
			return nil, usageErr("--push-target needs --push URL")
		}
		if mode != prom.HistogramsBoth {
			return nil, usageErr("--push-histograms needs --push URL")
		}
		return nil, nil
	}
	if u, err := url.Parse(p.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErr("--push %q: want the Pushgateway's http(s)://host:port", p.url)
	}
	if p.target == "" {
		u, err := url.Parse(targetURL)
		if err != nil || u.Host == "" {
			return nil, usageErr("--push: cannot take a target label from %q; give --push-target NAME", targetURL)
		}
		p.target = u.Host
	}
	var specs []*slo.Spec
	if spec != nil {
		specs = []*slo.Spec{spec}
	}
	p.metrics = prom.New(prom.Options{Specs: specs, Version: version.Version, Revision: version.Revision(), Histograms: mode})
	return p.metrics.NewSink(prom.SinkOptions{Target: p.target, Specs: specs}), nil
}

// push sends the metrics, if --push was given. It runs after an
// interrupt too (the figures so far are still worth having). A failure is
// reported as results that could not be delivered (exit 3).
func (p *pushFlags) push(ctx context.Context, stderr io.Writer) error {
	if p.metrics == nil {
		return nil
	}
	if err := prom.Push(context.WithoutCancel(ctx), p.url, p.target, p.metrics.Registry(), nil); err != nil {
		return invalidErr("%w", err)
	}
	fmt.Fprintf(stderr, "pushed metrics to %s (job %s, target %s)\n", strings.TrimRight(p.url, "/"), prom.Job, p.target)
	return nil
}
