// Package otlp exports a run's requests live as OpenTelemetry metrics over
// OTLP (HTTP/protobuf or gRPC), under the GenAI client semantic
// conventions (gen_ai.client.operation.duration, gen_ai.client.token.usage,
// gen_ai.client.operation.time_to_first_chunk and
// gen_ai.client.operation.time_per_output_chunk), beside tailgate's SLO
// good/bad event counters, so a Collector pipeline built for other GenAI
// clients takes tailgate's figures unchanged and a backend can compute
// burn rates.
//
// The figures are summary.json's: the same records are left out (warm-up,
// dropped, not due), tokens come from successful requests only, and the
// latency samples are the metric table's (measure.LatencyMetrics). Export
// runs in the SDK's background reader; a record costs an in-memory
// aggregation, so an endpoint that is slow or down never holds up the load.
package otlp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/slo"
)

// Protocols (OTEL_EXPORTER_OTLP_PROTOCOL's values that Go's exporters
// speak).
const (
	ProtocolHTTP = "http/protobuf"
	ProtocolGRPC = "grpc"
)

// Histogram aggregations.
const (
	// HistogramExponential is base-2 exponential histograms: full
	// resolution without a bucket layout to agree on.
	HistogramExponential = "exponential"
	// HistogramExplicit is the conventions' advised bucket boundaries plus
	// every SLO threshold of the metric, so "share ≤ threshold" is a bucket
	// ratio in any backend.
	HistogramExplicit = "explicit"
)

// Metric and attribute names of the GenAI client conventions (status
// Development), and tailgate's own.
const (
	MetricOperationDuration = "gen_ai.client.operation.duration"
	MetricTokenUsage        = "gen_ai.client.token.usage"
	MetricTimeToFirstChunk  = "gen_ai.client.operation.time_to_first_chunk"
	MetricTimePerOutChunk   = "gen_ai.client.operation.time_per_output_chunk"
	MetricSLOEvents         = "tailgate.slo.events"

	AttrOperationName = "gen_ai.operation.name"
	AttrProviderName  = "gen_ai.provider.name"
	AttrRequestModel  = "gen_ai.request.model"
	AttrResponseModel = "gen_ai.response.model"
	AttrTokenType     = "gen_ai.token.type"
	AttrServerAddress = "server.address"
	AttrServerPort    = "server.port"
	AttrErrorType     = "error.type"
	AttrClass         = "tailgate.class"
	AttrStage         = "tailgate.stage"
	// AttrSession is true on requests that belong to a session (a
	// multi-turn conversation or agent graph); never the session's id,
	// which would make a series per session.
	AttrSession = "tailgate.session"
	// AttrTarget is the canary's target name, where several targets share
	// one exporter.
	AttrTarget = "tailgate.target"

	AttrSLO          = "tailgate.slo.name"
	AttrSLOObjective = "tailgate.slo.objective"
	AttrSLOOutcome   = "tailgate.slo.outcome"

	ResServiceName    = "service.name"
	ResServiceVersion = "service.version"
	ResRunID          = "tailgate.run.id"
	ResShard          = "tailgate.shard"
)

// The conventions' advised explicit buckets (SHOULD): seconds for the
// three durations, tokens for token usage.
var (
	DurationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	TokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// Exponential histogram limits: the specification's defaults.
const (
	expMaxSize  = 160
	expMaxScale = 20
)

// Defaults for what the environment does not set.
const (
	DefaultInterval = 10 * time.Second
	DefaultTimeout  = 5 * time.Second
)

// Options configure New.
type Options struct {
	// Endpoint is the OTLP endpoint URL. For HTTP a URL without a path
	// gets /v1/metrics, as OTEL_EXPORTER_OTLP_ENDPOINT does. Empty: the
	// SDK reads OTEL_EXPORTER_OTLP_(METRICS_)ENDPOINT.
	Endpoint string
	// Protocol is ProtocolHTTP or ProtocolGRPC; empty: Protocol() of the
	// environment.
	Protocol string
	// Histogram is HistogramExponential (default) or HistogramExplicit.
	Histogram string
	// Specs are the SLOs judged: their thresholds are bucket edges
	// (explicit histograms) and each objective with per-record events
	// gets tailgate.slo.events counters.
	Specs []*slo.Spec
	// Operate counts SLO events by the operate phase's rules
	// (slo.Objective.OperateEvents) and leaves out records the canary
	// cancelled itself; otherwise acceptance's (slo.Objective.Events).
	Operate bool

	// Request attributes the records do not carry.
	Operation string // gen_ai.operation.name ("chat")
	Provider  string // gen_ai.provider.name ("openai")
	// Model is gen_ai.request.model unless a record names its own; asked
	// at a record's first use of an attribute set, so a model the
	// preflight discovers after New is the one named.
	Model func() string
	// Target is the target's URL: server.address and server.port.
	Target string

	// Resource attributes.
	Version string // service.version
	RunID   string // tailgate.run.id; empty: a random one (RunID says which)
	Shard   string // tailgate.shard ("0/1")

	// Interval is the export period; 0: OTEL_METRIC_EXPORT_INTERVAL, else
	// DefaultInterval. Timeout bounds one export; 0:
	// OTEL_EXPORTER_OTLP_TIMEOUT, else DefaultTimeout.
	Interval, Timeout time.Duration

	// Warn is told, once, that an export failed (the endpoint refused or
	// timed out); later failures are only counted (Shutdown's error).
	Warn func(msg string)
}

// Protocol is the OTLP protocol the environment asks for:
// OTEL_EXPORTER_OTLP_METRICS_PROTOCOL, else OTEL_EXPORTER_OTLP_PROTOCOL,
// else ProtocolHTTP (the specification's default).
func Protocol() string {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return ProtocolHTTP
}

// EnvEndpoint is the endpoint the environment sets
// (OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, else OTEL_EXPORTER_OTLP_ENDPOINT),
// "" when none or when OTEL_METRICS_EXPORTER is "none".
func EnvEndpoint() string {
	if strings.TrimSpace(os.Getenv("OTEL_METRICS_EXPORTER")) == "none" {
		return ""
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" {
			return v
		}
	}
	return ""
}

// CheckProtocol says whether p is a protocol New speaks.
func CheckProtocol(p string) error {
	switch p {
	case ProtocolHTTP, ProtocolGRPC:
		return nil
	case "http/json":
		return fmt.Errorf("OTLP protocol %q: Go's exporter speaks %s and %s only", p, ProtocolHTTP, ProtocolGRPC)
	}
	return fmt.Errorf("OTLP protocol %q: want %s or %s", p, ProtocolHTTP, ProtocolGRPC)
}

// CheckHistogram says whether h is a histogram aggregation New knows.
func CheckHistogram(h string) error {
	switch h {
	case "", HistogramExponential, HistogramExplicit:
		return nil
	}
	return fmt.Errorf("OTLP histogram %q: want %s or %s", h, HistogramExponential, HistogramExplicit)
}

// Exporter owns the meter provider and the instruments. Its Sink feeds
// them from records; Shutdown makes the final export.
type Exporter struct {
	opts     Options
	provider *sdkmetric.MeterProvider
	guard    *guardExporter
	where    string // the endpoint, redacted, for messages

	duration, ttfc, tpoc metric.Float64Histogram
	tokensInt            metric.Int64Histogram
	sloEvents            metric.Int64Counter

	shutOnce sync.Once
	shutErr  error
}

// New builds the exporter and starts its periodic reader. It does not
// contact the endpoint: the first export does, in the background.
func New(ctx context.Context, opts Options) (*Exporter, error) {
	if opts.Protocol == "" {
		opts.Protocol = Protocol()
	}
	if err := CheckProtocol(opts.Protocol); err != nil {
		return nil, err
	}
	if err := CheckHistogram(opts.Histogram); err != nil {
		return nil, err
	}
	if opts.Histogram == "" {
		opts.Histogram = HistogramExponential
	}
	if opts.RunID == "" {
		opts.RunID = newRunID()
	}
	if opts.Shard == "" {
		opts.Shard = "0/1"
	}
	if opts.Timeout <= 0 {
		opts.Timeout = envDuration("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", envDuration("OTEL_EXPORTER_OTLP_TIMEOUT", DefaultTimeout))
	}
	if opts.Interval <= 0 {
		opts.Interval = envDuration("OTEL_METRIC_EXPORT_INTERVAL", DefaultInterval)
	}
	endpoint, err := endpointURL(opts.Endpoint, opts.Protocol)
	if err != nil {
		return nil, err
	}
	where := endpoint
	if where == "" {
		where = EnvEndpoint()
	}
	if where == "" {
		where = "the SDK's default endpoint"
	}
	where = redact.URL(where)
	inner, err := newExporter(ctx, endpoint, opts)
	if err != nil {
		return nil, fmt.Errorf("OTLP exporter for %s: %s", where, scrub(err))
	}
	g := &guardExporter{Exporter: inner, where: where, warn: opts.Warn}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String(ResServiceName, "tailgate"),
			attribute.String(ResServiceVersion, opts.Version),
			attribute.String(ResRunID, opts.RunID),
			attribute.String(ResShard, opts.Shard)),
		// The environment's OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME
		// come last, so a deployment can rename or add to what tailgate
		// says of itself.
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTLP resource: %w", err)
	}
	reader := sdkmetric.NewPeriodicReader(g, sdkmetric.WithInterval(opts.Interval), sdkmetric.WithTimeout(opts.Timeout))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader),
		sdkmetric.WithView(views(opts)...))
	e := &Exporter{opts: opts, provider: mp, guard: g, where: where}
	if err := e.instruments(); err != nil {
		mp.Shutdown(ctx)
		return nil, err
	}
	return e, nil
}

// RunID is the tailgate.run.id resource attribute in use.
func (e *Exporter) RunID() string { return e.opts.RunID }

// Where is the endpoint, credentials redacted.
func (e *Exporter) Where() string { return e.where }

// Protocol is the protocol in use.
func (e *Exporter) Protocol() string { return e.opts.Protocol }

// Shutdown makes the final export and stops the reader, within ctx (give
// it a deadline: an endpoint that does not answer holds it until then).
// The error says how many exports failed and the last failure; it is a
// warning for the caller, never the run's outcome. Later calls return the
// first call's error.
func (e *Exporter) Shutdown(ctx context.Context) error {
	e.shutOnce.Do(func() {
		e.guard.mu.Lock()
		e.guard.final = true
		e.guard.mu.Unlock()
		err := e.provider.Shutdown(ctx)
		if gerr := e.guard.summary(); gerr != nil {
			err = gerr
		} else if err != nil {
			err = fmt.Errorf("OTLP export to %s: %s", e.where, scrub(err))
		}
		e.shutErr = err
	})
	return e.shutErr
}

func (e *Exporter) instruments() error {
	m := e.provider.Meter("github.com/tailgate-llm/tailgate/exporters/otlp")
	var errs []error
	hist := func(name, unit, desc string, bounds []float64) metric.Float64Histogram {
		h, err := m.Float64Histogram(name, metric.WithUnit(unit), metric.WithDescription(desc),
			metric.WithExplicitBucketBoundaries(bounds...))
		errs = append(errs, err)
		return h
	}
	sp := e.opts.Specs
	e.duration = hist(MetricOperationDuration, "s", "GenAI operation duration: intended start to the end of the response or error.", edges(metricE2E, DurationBuckets, sp))
	e.ttfc = hist(MetricTimeToFirstChunk, "s", "Time to the first chunk carrying an output token, from the intended start (successful streamed requests; an unstreamed answer's end).", edges(metricTTFT, DurationBuckets, sp))
	e.tpoc = hist(MetricTimePerOutChunk, "s", "Time per output chunk after the first: each chunk gap divided by the tokens it carries, one observation per token (summary.json's ITL).", edges(metricITL, DurationBuckets, sp))
	var err error
	e.tokensInt, err = m.Int64Histogram(MetricTokenUsage, metric.WithUnit("{token}"),
		metric.WithDescription("Input and output tokens per successful request (the server's usage count when given)."),
		metric.WithExplicitBucketBoundaries(TokenBuckets...))
	errs = append(errs, err)
	e.sloEvents, err = m.Int64Counter(MetricSLOEvents, metric.WithUnit("{event}"),
		metric.WithDescription("SLI events per SLO objective, good or bad, by the objective's per-record rules; bad/(good+bad) over a window divided by the error budget is the burn rate."))
	errs = append(errs, err)
	return errors.Join(errs...)
}

// views sets the histogram aggregation: exponential unless explicit was
// asked for (the instruments carry the explicit boundaries as advice,
// which the default aggregation honours).
func views(opts Options) []sdkmetric.View {
	if opts.Histogram != HistogramExponential {
		return nil
	}
	return []sdkmetric.View{func(i sdkmetric.Instrument) (sdkmetric.Stream, bool) {
		if i.Kind != sdkmetric.InstrumentKindHistogram {
			return sdkmetric.Stream{}, false
		}
		return sdkmetric.Stream{Name: i.Name, Description: i.Description, Unit: i.Unit,
			Aggregation: sdkmetric.AggregationBase2ExponentialHistogram{MaxSize: expMaxSize, MaxScale: expMaxScale}}, true
	}}
}

// endpointURL checks the --otlp-endpoint URL and gives HTTP's a signal
// path when it has none, as the SDK does for OTEL_EXPORTER_OTLP_ENDPOINT
// (its WithEndpointURL takes the path as it is).
func endpointURL(raw, protocol string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("OTLP endpoint %q: want http(s)://host:port", redact.URL(raw))
	}
	if protocol == ProtocolHTTP && (u.Path == "" || u.Path == "/") {
		u.Path = "/v1/metrics"
	}
	return u.String(), nil
}

func newExporter(ctx context.Context, endpoint string, opts Options) (sdkmetric.Exporter, error) {
	// No retries inside an export: the temporality is cumulative, so the
	// next export carries everything a failed one had, and a retrying
	// export would hold the final flush past its bound.
	switch opts.Protocol {
	case ProtocolGRPC:
		o := []otlpmetricgrpc.Option{otlpmetricgrpc.WithTimeout(opts.Timeout),
			otlpmetricgrpc.WithRetry(otlpmetricgrpc.RetryConfig{Enabled: false})}
		if endpoint != "" {
			o = append(o, otlpmetricgrpc.WithEndpointURL(endpoint))
		}
		return otlpmetricgrpc.New(ctx, o...)
	default:
		o := []otlpmetrichttp.Option{otlpmetrichttp.WithTimeout(opts.Timeout),
			otlpmetrichttp.WithRetry(otlpmetrichttp.RetryConfig{Enabled: false})}
		if endpoint != "" {
			o = append(o, otlpmetrichttp.WithEndpointURL(endpoint))
		}
		return otlpmetrichttp.New(ctx, o...)
	}
}

// guardExporter turns export failures into one warning and a count: the
// SDK's reader would otherwise hand each to the global error handler,
// which logs every one.
type guardExporter struct {
	sdkmetric.Exporter
	where string
	warn  func(string)

	mu            sync.Mutex
	exports, fail int
	last          string
	// final is set once Shutdown began: a first failure there is said by
	// Shutdown's error alone, not twice.
	final bool
}

func (g *guardExporter) Export(ctx context.Context, rm *metricdata.ResourceMetrics) error {
	err := g.Exporter.Export(ctx, rm)
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exports++
	if err == nil {
		return nil
	}
	g.fail++
	g.last = scrub(err)
	if g.fail == 1 && g.warn != nil && !g.final {
		g.warn(fmt.Sprintf("OTLP export to %s failed (the load goes on; later failures are counted at the end): %s", g.where, g.last))
	}
	return nil
}

func (g *guardExporter) summary() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.fail == 0 {
		return nil
	}
	return fmt.Errorf("OTLP export to %s: %d of %d exports failed, the last: %s", g.where, g.fail, g.exports, g.last)
}

// scrub redacts URLs' credentials and the values of the OTLP header
// variables (API keys, bearer tokens) from an error.
func scrub(err error) string {
	var secrets []string
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_METRICS_HEADERS"} {
		for _, kv := range strings.Split(os.Getenv(k), ",") {
			if _, v, ok := strings.Cut(kv, "="); ok {
				if v = strings.TrimSpace(v); v != "" {
					secrets = append(secrets, v)
					if uv, err := url.QueryUnescape(v); err == nil && uv != v {
						secrets = append(secrets, uv)
					}
				}
			}
		}
	}
	return redact.Text(err.Error(), secrets...)
}

func envDuration(key string, def time.Duration) time.Duration {
	// The specification's variables are milliseconds.
	var ms int64
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		if _, err := fmt.Sscan(v, &ms); err == nil && ms > 0 {
			return time.Duration(ms) * time.Millisecond
		}
	}
	return def
}

func newRunID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
