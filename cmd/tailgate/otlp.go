package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/exporters/otlp"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/ollama"
	"github.com/tailgate-llm/tailgate/loadgen/openai"
	"github.com/tailgate-llm/tailgate/loadgen/tgi"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/slo"
)

// otlpShutdownBound bounds the final export after the run (also after
// Ctrl-C): an endpoint that does not answer costs at most this, never the
// run's result.
const otlpShutdownBound = 10 * time.Second

// otlpFlags are --otlp-endpoint, --otlp-protocol and --otlp-histogram,
// shared by run and validate. Without --otlp-endpoint the standard
// OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT turns the export on.
type otlpFlags struct {
	endpoint, protocol, histogram string
	exp                           *otlp.Exporter
}

func (o *otlpFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&o.endpoint, "otlp-endpoint", "", "export live OpenTelemetry GenAI client metrics to this OTLP endpoint URL (http/protobuf: /v1/metrics is added to a URL without a path)\n(default $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else $OTEL_EXPORTER_OTLP_ENDPOINT; none: no export); headers from $OTEL_EXPORTER_OTLP_HEADERS")
	fs.StringVar(&o.protocol, "otlp-protocol", "", "OTLP protocol: "+otlp.ProtocolHTTP+" or "+otlp.ProtocolGRPC+" (default $OTEL_EXPORTER_OTLP_PROTOCOL, else "+otlp.ProtocolHTTP+")")
	fs.StringVar(&o.histogram, "otlp-histogram", otlp.HistogramExponential, "OTLP histograms: "+otlp.HistogramExponential+" (base-2) or "+otlp.HistogramExplicit+" (the GenAI conventions' buckets plus the SLO thresholds)")
}

// enabled says whether --otlp-endpoint or the environment asks for an
// export.
func (o *otlpFlags) enabled() bool { return o.endpoint != "" || otlp.EnvEndpoint() != "" }

// check refuses flags that cannot work (--otlp-protocol alone, an unknown
// protocol or histogram kind): a command calls it before it reaches the
// target, so a typo is a usage error even when the target is down.
func (o *otlpFlags) check() error {
	if !o.enabled() {
		if o.protocol != "" {
			return usageErr("--otlp-protocol needs --otlp-endpoint URL (or $OTEL_EXPORTER_OTLP_ENDPOINT)")
		}
		return nil
	}
	if o.protocol != "" {
		if err := otlp.CheckProtocol(o.protocol); err != nil {
			return usageErr("--otlp-protocol: %v", err)
		}
	} else if err := otlp.CheckProtocol(otlp.Protocol()); err != nil {
		return usageErr("$OTEL_EXPORTER_OTLP_PROTOCOL: %v", err)
	}
	if err := otlp.CheckHistogram(o.histogram); err != nil {
		return usageErr("--otlp-histogram: %v", err)
	}
	return nil
}

// start checks the flags and builds the exporter (none when not enabled;
// --otlp-protocol alone is a usage error). base holds what the command
// knows of its requests; specs give the explicit histograms' SLO edges.
func (o *otlpFlags) start(ctx context.Context, specs []*slo.Spec, base otlp.Options, stderr io.Writer) error {
	if err := o.check(); err != nil || !o.enabled() {
		return err
	}
	if base.Shard == "" {
		base.Shard = "0/1"
	}
	base.Endpoint, base.Protocol, base.Histogram = o.endpoint, o.protocol, o.histogram
	base.Specs, base.Version = specs, version.Version
	base.Warn = func(msg string) { fmt.Fprintln(stderr, "warning:", msg) }
	exp, err := otlp.New(ctx, base)
	if err != nil {
		return usageErr("--otlp-endpoint: %v", err)
	}
	o.exp = exp
	fmt.Fprintf(stderr, "exporting OTLP metrics to %s (%s, run id %s)\n", exp.Where(), exp.Protocol(), exp.RunID())
	return nil
}

// sink returns the OTLP sink of a run, validate or sweep (nil when
// neither --otlp-endpoint nor the environment asks for one). A failed
// export is a warning, never the run's outcome.
func (o *otlpFlags) sink(ctx context.Context, spec *slo.Spec, api, target string, model func() string, shard string, stderr io.Writer) (pipeline.Sink, error) {
	var specs []*slo.Spec
	if spec != nil {
		specs = []*slo.Spec{spec}
	}
	op, provider := genAIOperation(api)
	err := o.start(ctx, specs, otlp.Options{Operation: op, Provider: provider, Model: model, Target: target, Shard: shard}, stderr)
	if err != nil || o.exp == nil {
		return nil, err
	}
	return o.exp.Sink(), nil
}

// canarySink is a canary target's OTLP sink: its series carry the
// target's name, its SLO events follow the operate phase's rules.
func (o *otlpFlags) canarySink(t canary.Target) pipeline.Sink {
	if o.exp == nil {
		return nil
	}
	op, provider := genAIOperation(t.API)
	model := t.Model
	return o.exp.NewSink(otlp.SinkOptions{Name: t.Name, Operation: op, Provider: provider, Target: t.URL,
		Model: func() string { return model }, Specs: []*slo.Spec{t.SLO}, Operate: true})
}

// flush makes the final export, bounded, after the run (an interrupted
// one too: the figures so far are worth having). A failure is said on
// stderr and changes nothing else.
func (o *otlpFlags) flush(ctx context.Context, stderr io.Writer) {
	if o.exp == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), otlpShutdownBound)
	defer cancel()
	if err := o.exp.Shutdown(sctx); err != nil {
		fmt.Fprintln(stderr, "warning:", err)
		return
	}
	fmt.Fprintf(stderr, "exported OTLP metrics to %s\n", o.exp.Where())
}

// genAIOperation is gen_ai.operation.name and gen_ai.provider.name for an
// --api: the conventions' "openai" for the OpenAI wire protocol, whichever
// server speaks it, else the serving stack the protocol belongs to.
func genAIOperation(api string) (op, provider string) {
	switch api {
	case openai.APIChat:
		return "chat", "openai"
	case openai.APICompletions:
		return "text_completion", "openai"
	case ollama.API:
		return "chat", "ollama"
	case tgi.API:
		return "text_completion", "tgi"
	case kserve.APIGRPC, kserve.APIGenerate:
		return "text_completion", "kserve"
	}
	return "text_completion", api
}
