package otlp

import (
	"context"
	"net"
	"net/url"
	"slices"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/slo"
)

// The metric-table rows behind the instruments.
const (
	metricE2E  = measure.MetricE2E
	metricTTFT = measure.MetricTTFT
	metricITL  = measure.MetricITL
)

var (
	rowTTFT = measure.FindLatencyMetric(metricTTFT)
	rowITL  = measure.FindLatencyMetric(metricITL)
	rowE2E  = measure.FindLatencyMetric(metricE2E)
)

// edges is an explicit bucket layout: defaults plus every threshold of a
// latency objective on metric, as Duration.Seconds() gives it (the
// computation that turns an observation into seconds, so a value at the
// threshold lands in its bucket; OTLP buckets are ≤ their bound).
func edges(metricName string, defaults []float64, specs []*slo.Spec) []float64 {
	b := slices.Clone(defaults)
	for _, s := range specs {
		if s == nil {
			continue
		}
		for _, o := range s.Objectives {
			if string(o.Metric) == metricName && o.Kind() == slo.KindLatency && o.Threshold > 0 {
				b = append(b, o.Threshold.Seconds())
			}
		}
	}
	slices.Sort(b)
	return slices.Compact(b)
}

// attrKey picks a record's attribute set; the sets are built once each.
type attrKey struct {
	class, stage, model, errType string
	respModel                    string // gen_ai.response.model: absent when the server named none
	session                      bool
}

// attrSets are a record's options, each a slice built once: passing a
// slice on spares every Record call the allocation of its variadic one.
type attrSets struct {
	base, input, output []metric.RecordOption
}

type sinkObjective struct {
	o         *slo.Objective
	good, bad []metric.AddOption
}

// SinkOptions say what one sink's records are: the request attributes
// the records do not carry, and the SLOs they are judged against. A zero
// field takes the Exporter's Options.
type SinkOptions struct {
	// Name, if set, is tailgate.target on every series (the canary's
	// target name, where several targets share one exporter).
	Name                string
	Operation, Provider string
	Model               func() string
	Target              string // the target's URL
	Specs               []*slo.Spec
	Operate             bool
}

// Sink is the pipeline.Sink that feeds an Exporter's instruments. The
// pipeline calls it from one goroutine; any number of sinks, each fed by
// its own goroutine, may share an Exporter.
type Sink struct {
	e      *Exporter
	opts   SinkOptions
	ctx    context.Context
	common []attribute.KeyValue
	sets   map[attrKey]*attrSets
	objs   []sinkObjective
}

// Sink returns a sink with the Exporter's Options. A validate's stages
// share one sink (records carry their stage).
func (e *Exporter) Sink() *Sink {
	return e.NewSink(SinkOptions{})
}

// NewSink returns a sink for opts. Every objective's event counters
// exist at 0 from here on, so a rate over them works from the first
// export.
func (e *Exporter) NewSink(opts SinkOptions) *Sink {
	if opts.Operation == "" {
		opts.Operation = e.opts.Operation
	}
	if opts.Provider == "" {
		opts.Provider = e.opts.Provider
	}
	if opts.Model == nil {
		opts.Model = e.opts.Model
	}
	if opts.Target == "" {
		opts.Target = e.opts.Target
	}
	if opts.Specs == nil {
		opts.Specs = e.opts.Specs
	}
	opts.Operate = opts.Operate || e.opts.Operate
	s := &Sink{e: e, opts: opts, ctx: context.Background(), sets: map[attrKey]*attrSets{}}
	var named []attribute.KeyValue
	if opts.Name != "" {
		named = append(named, attribute.String(AttrTarget, opts.Name))
	}
	s.common = slices.Clone(named)
	if opts.Operation != "" {
		s.common = append(s.common, attribute.String(AttrOperationName, opts.Operation))
	}
	if opts.Provider != "" {
		s.common = append(s.common, attribute.String(AttrProviderName, opts.Provider))
	}
	if host, port := serverOf(opts.Target); host != "" {
		s.common = append(s.common, attribute.String(AttrServerAddress, host))
		if port > 0 {
			s.common = append(s.common, attribute.Int(AttrServerPort, port))
		}
	}
	for _, spec := range opts.Specs {
		if spec == nil {
			continue
		}
		for i := range spec.Objectives {
			o := &spec.Objectives[i]
			if !o.HasRecordEvents() {
				continue
			}
			set := func(outcome string) []metric.AddOption {
				return []metric.AddOption{metric.WithAttributeSet(attribute.NewSet(append(slices.Clone(named), attribute.String(AttrSLO, spec.Name),
					attribute.String(AttrSLOObjective, o.Name), attribute.String(AttrSLOOutcome, outcome))...))}
			}
			so := sinkObjective{o: o, good: set("good"), bad: set("bad")}
			e.sloEvents.Add(s.ctx, 0, so.good...)
			e.sloEvents.Add(s.ctx, 0, so.bad...)
			s.objs = append(s.objs, so)
		}
	}
	return s
}

// serverOf is server.address and server.port of a target URL (the port
// the scheme implies when the URL names none).
func serverOf(target string) (string, int) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return "", 0
	}
	host, p := u.Hostname(), u.Port()
	if p == "" {
		switch u.Scheme {
		case "http":
			p = "80"
		case "https", "grpcs":
			p = "443"
		}
	}
	port, _ := strconv.Atoi(p)
	if h, _, err := net.SplitHostPort(u.Host); err == nil {
		host = h
	}
	return host, port
}

// Name is "otlp".
func (s *Sink) Name() string { return "otlp" }

// Close does nothing: the exporter outlives the sink (validate closes the
// sinks after each stage); Exporter.Shutdown makes the final export.
func (s *Sink) Close() error { return nil }

func (s *Sink) attrs(r *loadgen.Record) *attrSets {
	k := attrKey{class: r.Class, stage: r.Stage, model: r.Model, respModel: r.ResponseModel, session: r.Session != ""}
	if !r.OK() {
		k.errType = string(r.ErrorKind)
		if k.errType == "" {
			k.errType = "_OTHER"
		}
	}
	if a := s.sets[k]; a != nil {
		return a
	}
	kv := slices.Clone(s.common)
	model := k.model
	if model == "" && s.opts.Model != nil {
		model = s.opts.Model()
	}
	if model != "" {
		kv = append(kv, attribute.String(AttrRequestModel, model))
	}
	if k.respModel != "" {
		kv = append(kv, attribute.String(AttrResponseModel, k.respModel))
	}
	if k.class != "" {
		kv = append(kv, attribute.String(AttrClass, k.class))
	}
	if k.stage != "" {
		kv = append(kv, attribute.String(AttrStage, k.stage))
	}
	kv = append(kv, attribute.Bool(AttrSession, k.session))
	if k.errType != "" {
		kv = append(kv, attribute.String(AttrErrorType, k.errType))
	}
	opt := func(kv ...attribute.KeyValue) []metric.RecordOption {
		return []metric.RecordOption{metric.WithAttributeSet(attribute.NewSet(kv...))}
	}
	a := &attrSets{base: opt(kv...),
		input:  opt(append(slices.Clone(kv), attribute.String(AttrTokenType, "input"))...),
		output: opt(append(slices.Clone(kv), attribute.String(AttrTokenType, "output"))...)}
	s.sets[k] = a
	return a
}

// Add records one request. Left out, as from summary.json: warm-up
// records, dropped requests and calls not yet due (never sent), and in
// Operate mode the probes the canary cancelled itself.
func (s *Sink) Add(r *loadgen.Record) error {
	if r.Warmup || r.ErrorKind == loadgen.ErrDropped || r.ErrorKind == loadgen.ErrNotDue ||
		(s.opts.Operate && r.ErrorKind == loadgen.ErrCancelled) {
		return nil
	}
	a := s.attrs(r)
	ctx := s.ctx
	if r.OK() {
		for smp := rowE2E.Samples(r); smp.Next(); {
			s.e.duration.Record(ctx, smp.Value().Seconds(), a.base...)
		}
		for smp := rowTTFT.Samples(r); smp.Next(); {
			for n := smp.Weight(); n > 0; n-- {
				s.e.ttfc.Record(ctx, smp.Value().Seconds(), a.base...)
			}
		}
		for smp := rowITL.Samples(r); smp.Next(); {
			v := smp.Value().Seconds()
			for n := smp.Weight(); n > 0; n-- {
				s.e.tpoc.Record(ctx, v, a.base...)
			}
		}
		// The conventions: MUST NOT report a count the server did not
		// give. An input count of 0 is "not reported"; output is always
		// counted (the server's usage or the chunks').
		if r.InputTokens > 0 {
			s.e.tokensInt.Record(ctx, int64(r.InputTokens), a.input...)
		}
		s.e.tokensInt.Record(ctx, int64(max(r.OutputTokens, 0)), a.output...)
	} else {
		// A failed request's duration is still an operation's (with
		// error.type), timed as E2E is: intended start to the end.
		d := loadgen.TruncMicros(r.End) - loadgen.TruncMicros(r.Intended)
		s.e.duration.Record(ctx, max(d, 0).Seconds(), a.base...)
	}
	for i := range s.objs {
		so := &s.objs[i]
		var ev slo.Events
		if s.opts.Operate {
			ev = so.o.OperateEvents(r)
		} else {
			ev = so.o.Events(r)
		}
		if ev.Good > 0 {
			s.e.sloEvents.Add(ctx, int64(ev.Good), so.good...)
		}
		if ev.Bad > 0 {
			s.e.sloEvents.Add(ctx, int64(ev.Bad), so.bad...)
		}
	}
	return nil
}
