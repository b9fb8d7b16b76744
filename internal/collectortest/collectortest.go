// Package collectortest runs an OpenTelemetry Collector in a test, on
// loopback, assembled from the Collector's own modules the way a
// distribution's main is: otelcol.NewCollector with the OTLP receiver, an
// in-process exporter that hands every batch to the test, and the
// service's telemetry, configured from YAML through a confmap provider.
// What a test reads has crossed the whole service pipeline (receiver,
// fan-out, exporter), as it would in a deployed Collector.
package collectortest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

// ProtocolGRPC selects the receiver's gRPC protocol; any other value
// selects OTLP/HTTP.
const ProtocolGRPC = "grpc"

// exporterType names the in-process exporter in the configuration.
var exporterType = component.MustNewType("tailgatetest")

// bound is how long starting or stopping may take before the test fails.
const bound = 30 * time.Second

// Collector is one running Collector.
type Collector struct {
	Addr     string // host:port the OTLP receiver listens on
	Endpoint string // what --otlp-endpoint takes: http://Addr
	col      *otelcol.Collector
	done     chan error // Run's result
	stop     sync.Once
	err      error // Run's result, once stopped
}

// FreeAddr is a loopback host:port nothing listened on a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// config is the Collector's configuration: one metrics pipeline from the
// OTLP receiver to the in-process exporter, and none of the Collector's
// own telemetry servers, so nothing else binds a port.
func config(protocol, addr string) string {
	proto := "http"
	if protocol == ProtocolGRPC {
		proto = "grpc"
	}
	return fmt.Sprintf(`
receivers:
  otlp:
    protocols:
      %s:
        endpoint: %q
exporters:
  %s: {}
service:
  telemetry:
    logs:
      level: warn
    metrics:
      level: none
  pipelines:
    metrics:
      receivers: [otlp]
      exporters: [%s]
`, proto, addr, exporterType, exporterType)
}

// Start runs a Collector whose OTLP receiver speaks protocol on addr (a
// free loopback port when empty) and whose exporter passes every batch
// to consume; it returns once the receiver listens. The Collector is
// shut down at the test's end, if the test has not stopped it before.
func Start(t testing.TB, protocol, addr string, consume consumer.ConsumeMetricsFunc) *Collector {
	t.Helper()
	if addr == "" {
		addr = FreeAddr(t)
	}
	factories := func() (otelcol.Factories, error) {
		receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
		if err != nil {
			return otelcol.Factories{}, err
		}
		exporters, err := otelcol.MakeFactoryMap(newExporterFactory(consume))
		if err != nil {
			return otelcol.Factories{}, err
		}
		return otelcol.Factories{
			Receivers: receivers,
			Exporters: exporters,
			Telemetry: otelconftelemetry.NewFactory(),
		}, nil
	}
	col, err := otelcol.NewCollector(otelcol.CollectorSettings{
		BuildInfo: component.NewDefaultBuildInfo(),
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				URIs:              []string{"yaml:" + config(protocol, addr)},
				ProviderFactories: []confmap.ProviderFactory{yamlprovider.NewFactory()},
			},
		},
		// Ctrl-C on the test binary stays the test runner's.
		DisableGracefulShutdown: true,
		// gRPC's logger is process-wide: the test's client keeps its own.
		SkipSettingGRPCLogger: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	c := &Collector{Addr: addr, Endpoint: "http://" + addr, col: col, done: make(chan error, 1)}
	go func() { c.done <- col.Run(context.Background()) }()
	// Run has no started event: its state is polled, and Run returning
	// first (a port taken, a configuration refused) is the failure.
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(bound)
	for col.GetState() != otelcol.StateRunning {
		select {
		case err := <-c.done:
			t.Fatalf("the collector stopped while starting: %v", err)
		case <-deadline:
			col.Shutdown()
			t.Fatalf("the collector was not running within %v", bound)
		case <-tick.C:
		}
	}
	t.Cleanup(func() {
		if err := c.Shutdown(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Shutdown stops the whole Collector, receiver and pipeline, and waits
// for Run to return; once it has, the port is free for a new one. A
// second call returns at once.
func (c *Collector) Shutdown() error {
	c.stop.Do(func() {
		c.col.Shutdown()
		select {
		case c.err = <-c.done:
		case <-time.After(bound):
			c.err = errors.New("the collector did not stop within " + bound.String())
		}
	})
	return c.err
}

// exporterConfig is the in-process exporter's configuration: it has none.
type exporterConfig struct{}

// newExporterFactory is an exporter built with the Collector's own
// exporter API; no queue and no retry, so the receiver answers its
// client only once consume has the batch.
func newExporterFactory(consume consumer.ConsumeMetricsFunc) exporter.Factory {
	return exporter.NewFactory(exporterType,
		func() component.Config { return &exporterConfig{} },
		exporter.WithMetrics(func(ctx context.Context, set exporter.Settings, cfg component.Config) (exporter.Metrics, error) {
			return exporterhelper.NewMetrics(ctx, set, cfg, func(ctx context.Context, md pmetric.Metrics) error {
				return consume(ctx, md)
			})
		}, component.StabilityLevelDevelopment))
}
