package collectortest

import (
	"context"
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// export sends one gauge named name to addr over protocol with the SDK's
// OTLP exporter, and closes the exporter.
func export(t *testing.T, protocol, addr, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var exp sdkmetric.Exporter
	var err error
	if protocol == ProtocolGRPC {
		exp, err = otlpmetricgrpc.New(ctx, otlpmetricgrpc.WithEndpoint(addr), otlpmetricgrpc.WithInsecure())
	} else {
		exp, err = otlpmetrichttp.New(ctx, otlpmetrichttp.WithEndpoint(addr), otlpmetrichttp.WithInsecure())
	}
	if err != nil {
		t.Fatal(err)
	}
	rm := &metricdata.ResourceMetrics{ScopeMetrics: []metricdata.ScopeMetrics{{Metrics: []metricdata.Metrics{{
		Name: name,
		Data: metricdata.Gauge[int64]{DataPoints: []metricdata.DataPoint[int64]{{Time: time.Now(), Value: 7}}},
	}}}}}
	if err := exp.Export(ctx, rm); err != nil {
		t.Fatalf("%s export: %v", protocol, err)
	}
	if err := exp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// A batch sent to the receiver crosses the pipeline to consume before the
// client's export returns, over both protocols; a stopped Collector frees
// its port for a new one, and leaves no goroutine behind.
func TestPipelineRestart(t *testing.T) {
	// os/signal starts one goroutine for the process at its first use,
	// which Run is: a first Collector is started and stopped before the
	// count is taken.
	if err := Start(t, ProtocolGRPC, "", nil).Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, protocol := range []string{"http/protobuf", ProtocolGRPC} {
		t.Run(protocol, func(t *testing.T) {
			before := runtime.NumGoroutine()
			got := make(chan string, 4)
			consume := func(_ context.Context, md pmetric.Metrics) error {
				got <- md.ResourceMetrics().At(0).ScopeMetrics().At(0).Metrics().At(0).Name()
				return nil
			}
			c := Start(t, protocol, "", consume)
			export(t, protocol, c.Addr, "first")
			// The export has returned: the batch is already through.
			select {
			case n := <-got:
				if n != "first" {
					t.Errorf("got %q", n)
				}
			default:
				t.Fatal("the export returned before the batch reached the exporter")
			}
			if err := c.Shutdown(); err != nil {
				t.Fatal(err)
			}
			if err := c.Shutdown(); err != nil { // a second call is the first's result
				t.Fatal(err)
			}
			c2 := Start(t, protocol, c.Addr, consume)
			export(t, protocol, c2.Addr, "second")
			if n := <-got; n != "second" {
				t.Errorf("after the restart got %q", n)
			}
			if err := c2.Shutdown(); err != nil {
				t.Fatal(err)
			}
			// A goroutine's exit has no event to wait on: the count is
			// polled, within a bound.
			deadline := time.Now().Add(10 * time.Second)
			for runtime.NumGoroutine() > before {
				if time.Now().After(deadline) {
					buf := make([]byte, 1<<20)
					t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}
