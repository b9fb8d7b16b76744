package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/kserve"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/slo"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// targetFlags are the endpoint flags shared by run and validate.
type targetFlags struct {
	target, api, model string
	maxTokens          int
	stream             bool
	apiKeyFile         string
	headers            []string
	insecure           bool
	caFile             string
	certFile, keyFile  string
	connections        int
	keepalive          time.Duration
	httpClient         string
	apiKey             string   // read by client(); never printed
	acceptEmpty        bool     // registerAnswer's
	dial               dialFunc // the invocation's dialer (withDial); nil: TCP
	connectTo          string   // --connect-to HOST:PORT
}

// registerAnswer registers what an answer must carry (run, validate,
// sweep).
func (t *targetFlags) registerAnswer(fs *pflag.FlagSet) {
	fs.BoolVar(&t.acceptEmpty, "accept-empty", false, "count answers with no output token as successes (default: empty_answer, a failure, unless the server says it stopped at its EOS token); a mix class's accept_empty: true does so for that class")
}

func (t *targetFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.target, "target", "http://127.0.0.1:8000", "base URL of the OpenAI-compatible server; for kserve-grpc grpc://HOST:PORT or grpcs://HOST:PORT (TLS)")
	fs.StringVar(&t.api, "api", "openai-chat", "protocol: "+strings.Join(protocol.Names(), ", "))
	fs.StringVar(&t.model, "model", "", "model name (default: the first one the server lists at /v1/models)")
	fs.IntVar(&t.maxTokens, "max-tokens", 128, "max output tokens when the prompt does not set them")
	fs.BoolVar(&t.stream, "stream", true, "stream responses (SSE); --stream=false for single responses")
	fs.StringVar(&t.apiKeyFile, "api-key-file", "", "file holding the API key (default: $TAILGATE_API_KEY, else $OPENAI_API_KEY)")
	fs.StringArrayVar(&t.headers, "header", nil, "extra request header \"Name: value\" (repeatable)")
	fs.StringVar(&t.connectTo, "connect-to", "", "open the connections to --target's host and port (requests and /metrics) at this HOST:PORT instead, as curl --connect-to; --target stays the run's identity (Host header, merge): shards of one schedule, each against its own replica or address")
	fs.BoolVar(&t.insecure, "insecure", false, "skip TLS certificate verification")
	fs.StringVar(&t.caFile, "ca-file", "", "PEM CA bundle to verify the server with")
	fs.StringVar(&t.certFile, "cert-file", "", "PEM client certificate for mutual TLS (with --key-file)")
	fs.StringVar(&t.keyFile, "key-file", "", "PEM key of --cert-file")
	fs.IntVar(&t.connections, "connections", 1, "kserve-grpc: HTTP/2 connections to spread the streams over (servers cap the streams of one connection, often at 100)")
	fs.StringVar(&t.httpClient, "http-client", transport.HTTPClientAuto, "openai-chat, openai-completions: HTTP/1.1 client: lean (one goroutine per stream), nethttp (Go's net/http, the reference) or auto (lean, but net/http through a proxy or with a client certificate)")
	fs.DurationVar(&t.keepalive, "grpc-keepalive", 0, "kserve-grpc: ping idle connections this often (0: off; servers refuse frequent pings)")
}

// checkTarget rejects a target URL that cannot work, saying how to fix it.
func checkTarget(s string) error {
	if !strings.Contains(s, "://") {
		return fmt.Errorf("--target %q: not a URL; did you mean http://%s?", redact.URL(s), redact.URL(s))
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("--target %s: cannot parse: %v", redact.URL(s), redactErr(err))
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("--target %s: scheme %q: want http or https", redact.URL(s), u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Errorf("--target %s: no host", redact.URL(s))
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("--target %s: port %q: want 1-65535", redact.URL(s), p)
		}
	}
	return nil
}

// checkConnectTo rejects a --connect-to that is not HOST:PORT, or one
// given for gRPC, whose client dials on its own.
func (t *targetFlags) checkConnectTo() error {
	if t.connectTo == "" {
		return nil
	}
	if t.api == kserve.APIGRPC {
		return fmt.Errorf("--connect-to: not for --api %s", kserve.APIGRPC)
	}
	h, p, err := net.SplitHostPort(t.connectTo)
	if err != nil || h == "" {
		return fmt.Errorf("--connect-to %q: want HOST:PORT", t.connectTo)
	}
	if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("--connect-to %q: port %q: want 1-65535", t.connectTo, p)
	}
	return nil
}

// dialer is the invocation's dialer, with connections to the target's
// address sent to --connect-to; others (a proxy, a --metrics-url on
// another host) are dialled as given.
func (t *targetFlags) dialer() dialFunc {
	if t.connectTo == "" {
		return t.dial
	}
	from := ""
	if u, err := url.Parse(t.target); err == nil {
		port := u.Port()
		if port == "" {
			port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
		}
		from = net.JoinHostPort(u.Hostname(), port)
	}
	base, to := t.dial, t.connectTo
	if base == nil {
		base = (&net.Dialer{Timeout: transport.DefaultDialTimeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == from {
			addr = to
		}
		return base(ctx, network, addr)
	}
}

// redactErr is err's text with any URL in it redacted (url.Parse quotes
// the whole input).
func redactErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err.Error()
	}
	return redact.Text(err.Error())
}

// auth is the credential header for same-host side requests (/metrics).
func (t *targetFlags) auth() http.Header {
	h := http.Header{}
	if t.apiKey != "" {
		h.Set("Authorization", "Bearer "+t.apiKey)
	}
	return h
}

// client builds the protocol client for the target; warn gets once-only
// notices (a server that closes every connection). Commands that send
// load at once use open, which checks the target too.
func (t *targetFlags) client(warn func(string)) (protocol.Client, error) {
	pt, err := t.protocolTarget(warn)
	if err != nil {
		return nil, err
	}
	return protocol.New(pt)
}

func (t *targetFlags) protocolTarget(warn func(string)) (protocol.Target, error) {
	// A gRPC target is checked by its client: it has other schemes.
	if t.api != kserve.APIGRPC {
		if err := checkTarget(t.target); err != nil {
			return protocol.Target{}, err
		}
	}
	if t.connections < 1 {
		return protocol.Target{}, fmt.Errorf("--connections %d: want at least 1", t.connections)
	}
	if err := t.checkConnectTo(); err != nil {
		return protocol.Target{}, err
	}
	pt := protocol.Target{
		Endpoint: transport.Endpoint{URL: t.target, Warn: warn, Transport: transport.Config{Headers: t.headers,
			Insecure: t.insecure, CAFile: t.caFile, CertFile: t.certFile, KeyFile: t.keyFile, HTTPClient: t.httpClient,
			Dial: t.dialer()}},
		API: t.api, Model: t.model, Stream: t.stream, MaxTokens: t.maxTokens,
		Connections: t.connections, Keepalive: t.keepalive, APIKeyFile: t.apiKeyFile}
	// Read here, not only in protocol.New: the server's /metrics is
	// scraped with the same key (auth).
	if err := pt.ReadAPIKey(); err != nil {
		return protocol.Target{}, err
	}
	t.apiKey = pt.Transport.APIKey
	return pt, nil
}

// open builds the client and checks the target (protocol.Open: the server
// answers and serves the model, discovered when --model is not given). A
// target that cannot be built is a usage error (2); one that fails the
// check is invalid (3), said in the server's words.
func (t *targetFlags) open(ctx context.Context, warn func(string)) (protocol.Client, error) {
	pt, err := t.protocolTarget(warn)
	if err != nil {
		return nil, err
	}
	c, model, err := protocol.Open(ctx, pt)
	var ce *protocol.ConfigError
	if errors.As(err, &ce) {
		return nil, ce.Err
	}
	if err != nil {
		return nil, invalidErr("%w", redact.Wrap(redact.Text(err.Error(), t.apiKey), err))
	}
	t.model = model
	return c, nil
}

// preflight is open's check for a client built earlier (validate runs it
// as the plan's first step).
func (t *targetFlags) preflight(ctx context.Context, c protocol.Client) error {
	model, err := protocol.Check(ctx, c, t.model)
	if err != nil {
		return invalidErr("%w", redact.Wrap(redact.Text(err.Error(), t.apiKey), err))
	}
	t.model = model
	return nil
}

// loadFlags describe the schedule.
type loadFlags struct {
	rate        float64
	concurrency int
	arrival     string
	burstiness  float64
	stages      string
	ramp        time.Duration
	duration    time.Duration
	requests    int
	warmup      string
	timeout     time.Duration
	grace       time.Duration
	maxInFlight int
	seed        uint64
	validity    validityFlags
}

func (l *loadFlags) register(fs *pflag.FlagSet) {
	fs.Float64Var(&l.rate, "rate", 0, "open loop: requests per second")
	fs.IntVar(&l.concurrency, "concurrency", 0, "closed loop: requests in flight (each sent when the previous ends)")
	fs.StringVar(&l.arrival, "arrival", string(loadgen.DefaultArrival), "open-loop arrivals: constant, poisson or gamma")
	fs.Float64Var(&l.burstiness, "burstiness", 1, "gamma shape: 1 = Poisson, <1 burstier, >1 smoother")
	fs.StringVar(&l.stages, "stages", "", "load stages LEVEL@DURATION,...: rates 10@1m,50@2m (open loop) or concurrencies c8@1m,c32@2m (closed loop)")
	fs.DurationVar(&l.ramp, "ramp", 0, "linear ramp at the start of each stage from the previous level")
	fs.DurationVar(&l.duration, "duration", 30*time.Second, "run length (without --stages), e.g. 30s or 5m")
	fs.IntVar(&l.requests, "requests", 0, "stop after this many requests, an agent session counting once (0: no limit)")
	fs.StringVar(&l.warmup, "warmup", "", "warm-up left out of the figures: a count (20) or a duration (10s)")
	fs.DurationVar(&l.timeout, "timeout", loadgen.DefaultTimeout, "per-request timeout")
	registerGrace(fs, &l.grace)
	fs.IntVar(&l.maxInFlight, "max-inflight", loadgen.DefaultMaxInFlight, "open loop: cap on requests in flight; late requests count their wait")
	fs.Uint64Var(&l.seed, "seed", 1, "seed for arrivals and prompt sampling")
	l.validity.register(fs, true)
}

func registerGrace(fs *pflag.FlagSet, v *time.Duration) {
	fs.DurationVar(v, "grace", loadgen.DefaultGrace, "after the schedule ends, how long requests in flight may finish; those still running are cut_at_end (0: cut at once)")
}

// graceOption maps the flag (0: none) to loadgen.Options.Grace (0: default).
func graceOption(d time.Duration) time.Duration {
	if d <= 0 {
		return -1
	}
	return d
}

// validityFlags set the validity bounds (slo.Validity) on run, validate
// and sweep alike; a flag given overrides the plan's validity: block.
type validityFlags struct {
	fs                                      *pflag.FlagSet
	errorRate, dropped, cutAtEnd, distorted float64
	contextLength                           float64
	selfCheck                               string
}

func (v *validityFlags) register(fs *pflag.FlagSet, selfCheck bool) {
	v.fs = fs
	d := slo.DefaultValidity()
	fs.Float64Var(&v.errorRate, "max-error-rate", d.MaxErrorRate.Float(), "share of sent requests that may fail (0-1) before the run is invalid (exit 3); 1 = no limit; requests the run cancelled itself are not failures")
	fs.Float64Var(&v.dropped, "max-dropped", d.MaxDropped.Float(), "share of scheduled requests that may be dropped (never sent: in-flight cap) before the run is invalid")
	fs.Float64Var(&v.cutAtEnd, "max-cut-at-end", d.MaxCutAtEnd.Float(), "share of sent requests that may still be in flight when the grace period ends (cut_at_end) before the run is invalid")
	fs.Float64Var(&v.contextLength, "max-context-length", d.MaxContextLength.Float(), "share of sent requests that may be refused for length (context_length: the prompt over the model's context) before the run is invalid")
	fs.Float64Var(&v.distorted, "max-distortion", d.MaxDistortion.Float(), "share by which the load generator may move a figure or verdict before the run is invalid (the self-check)")
	if selfCheck {
		fs.StringVar(&v.selfCheck, "self-check", "fail", "when the generator's own lateness or CPU distorted the figures: fail (run invalid, exit 3) or warn")
	}
}

// bounds are base (the plan's, or the defaults) with the flags given
// over it.
func (v *validityFlags) bounds(base slo.Validity) (slo.Validity, error) {
	out := base
	for _, f := range []struct {
		name string
		val  float64
		dst  *slo.Decimal
	}{{"max-error-rate", v.errorRate, &out.MaxErrorRate}, {"max-dropped", v.dropped, &out.MaxDropped},
		{"max-cut-at-end", v.cutAtEnd, &out.MaxCutAtEnd}, {"max-context-length", v.contextLength, &out.MaxContextLength},
		{"max-distortion", v.distorted, &out.MaxDistortion}} {
		if !v.fs.Changed(f.name) {
			continue
		}
		if !(f.val >= 0 && f.val <= 1) {
			return out, usageErr("--%s %v: want a share from 0 to 1", f.name, f.val)
		}
		d, err := slo.ParseDecimal(strconv.FormatFloat(f.val, 'f', -1, 64))
		if err != nil {
			return out, usageErr("--%s %v: %v", f.name, f.val, err)
		}
		*f.dst = d
	}
	switch v.selfCheck {
	case "", "fail":
	case "warn":
		out.DistortionWarns = true
	default:
		return out, usageErr("--self-check %q: want fail or warn", v.selfCheck)
	}
	return out, nil
}

func (l *loadFlags) options(fs *pflag.FlagSet, trace bool) (loadgen.Options, error) {
	o := loadgen.Options{Burstiness: l.burstiness, Seed: l.seed, Trace: trace,
		MaxInFlight: l.maxInFlight, Requests: l.requests, Timeout: l.timeout, Grace: graceOption(l.grace)}
	// Closed loop: --concurrency, or stages written as concurrencies
	// ("c8@30s,c32@1m").
	o.Closed = l.concurrency > 0 || strings.HasPrefix(strings.TrimSpace(l.stages), "c")
	o.Arrival = loadgen.ResolveArrival(loadgen.Arrival(l.arrival), o.Closed)
	if l.rate > 0 && o.Closed {
		return o, fmt.Errorf("--rate and --concurrency: choose open loop (--rate) or closed loop (--concurrency)")
	}
	if l.rate < 0 || l.concurrency < 0 {
		return o, fmt.Errorf("--rate and --concurrency must not be negative")
	}
	switch {
	case l.stages != "":
		if fs.Changed("duration") {
			return o, fmt.Errorf("--stages and --duration: the stages set the duration")
		}
		st, err := loadgen.ParseStages(l.stages, l.ramp, o.Closed)
		if err != nil {
			return o, fmt.Errorf("--stages: %w", err)
		}
		o.Stages = st
	case trace:
		o.Stages = []loadgen.Stage{{Name: "trace", Duration: l.duration}}
	case o.Closed:
		o.Stages = []loadgen.Stage{{Name: "main", Concurrency: l.concurrency, Duration: l.duration}}
	case l.rate > 0:
		o.Stages = []loadgen.Stage{{Name: "main", Rate: l.rate, Duration: l.duration}}
	default:
		return o, fmt.Errorf("no load given: set --rate (open loop), --concurrency (closed loop) or --stages")
	}
	if l.duration <= 0 && l.stages == "" {
		return o, fmt.Errorf("--duration %v: must be positive", l.duration)
	}
	if !trace {
		idle := true
		for _, s := range o.Stages {
			if s.Rate > 0 || s.Concurrency > 0 {
				idle = false
			}
		}
		if idle {
			return o, fmt.Errorf("--stages %s: every stage has zero load: nothing would be sent", l.stages)
		}
	}
	if w := strings.TrimSpace(l.warmup); w != "" {
		if n, err := strconv.Atoi(w); err == nil && n >= 0 {
			o.WarmupRequests = n
		} else if d, err := time.ParseDuration(w); err == nil && d >= 0 {
			o.WarmupDuration = d
		} else {
			return o, fmt.Errorf("--warmup %q: want a request count (20) or a duration (10s)", w)
		}
	}
	if total := loadgen.TotalDuration(o.Stages); o.WarmupDuration >= total {
		return o, fmt.Errorf("--warmup %s covers the whole run (%s): nothing would be measured", o.WarmupDuration, total)
	}
	if o.Requests > 0 && o.WarmupRequests >= o.Requests {
		return o, fmt.Errorf("--warmup %d with --requests %d: nothing would be measured", o.WarmupRequests, o.Requests)
	}
	// The runner's own checks too, before anything reaches the target.
	if err := o.Validate(); err != nil {
		return o, err
	}
	return o, nil
}

// telemetryFlags choose what is sampled beside the load: the server's own
// /metrics, a dcgm-exporter, and local GPUs through NVML.
type telemetryFlags struct {
	metricsURL  string
	dcgmURL     string
	nvml        string
	interval    time.Duration
	serverModel string
	gpuHourCost float64
	dial        dialFunc // the invocation's dialer (withDial); nil: TCP
}

func (t *telemetryFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&t.metricsURL, "metrics-url", "", "server Prometheus metrics to sample (default: TARGET/metrics; \"off\" to skip)")
	fs.StringVar(&t.dcgmURL, "dcgm-url", "", "dcgm-exporter metrics to sample as well, e.g. http://gpu-node:9400/metrics")
	fs.StringVar(&t.nvml, "nvml", "auto", "sample local GPUs through NVML: auto (if a driver is present), on, off")
	fs.DurationVar(&t.interval, "telemetry-interval", time.Second, "telemetry sampling interval")
	fs.StringVar(&t.serverModel, "server-model", "", "the server-side model whose metrics count the run's requests, e.g. a Triton ensemble "+
		"(its composing models count each request again; default: --model)")
	fs.Float64Var(&t.gpuHourCost, "gpu-hour-cost", 0, "price of one GPU-hour in USD: the cost per million output tokens beside the energy per token\n"+
		"(needs the GPUs' energy or power: NVML, --dcgm-url or the server's GPU gauges)")
}

// check validates what the flags alone decide, so that a bad value is a
// usage error before any connection is made.
func (t *telemetryFlags) check() error {
	if t.gpuHourCost < 0 || math.IsNaN(t.gpuHourCost) || math.IsInf(t.gpuHourCost, 0) {
		return usageErr("--gpu-hour-cost %v: want a price in USD, 0 or more", t.gpuHourCost)
	}
	if t.interval <= 0 {
		return usageErr("--telemetry-interval %v: must be positive", t.interval)
	}
	if t.nvml != "auto" && t.nvml != "on" && t.nvml != "off" {
		return usageErr("--nvml %q: want auto, on or off", t.nvml)
	}
	return nil
}

// config builds the sampler configuration. The target's credentials go to
// a metrics endpoint on the same host only. model is the run's --model,
// the server model unless --server-model names another. A missing NVML is
// fine in auto mode; warnings go to warn.
func (t *telemetryFlags) config(target, model string, auth http.Header, warn io.Writer) (*telemetry.Config, error) {
	if err := t.check(); err != nil {
		return nil, err
	}
	cfg := &telemetry.Config{Interval: t.interval, ServerModel: cmp.Or(strings.TrimSpace(t.serverModel), model), Dial: t.dial}
	switch mu := strings.TrimSpace(t.metricsURL); mu {
	case "off", "none":
	default:
		if mu == "" {
			if grpcTarget(target) {
				// Triton serves metrics on their own HTTP port (8002):
				// only --metrics-url can say where.
				break
			}
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
			return nil, fmt.Errorf("--nvml on: %w", err)
		case !errors.Is(err, telemetry.ErrNoNVML):
			fmt.Fprintf(warn, "warning: NVML: %v; local GPUs are not sampled\n", err)
		}
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

// grpcTarget reports whether target is a gRPC address (grpc://, grpcs://
// or a bare host:port), which has no /metrics of its own.
func grpcTarget(target string) bool {
	t := strings.TrimSpace(target)
	return strings.HasPrefix(t, "grpc://") || strings.HasPrefix(t, "grpcs://") || !strings.Contains(t, "://")
}

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host == ub.Host
}
