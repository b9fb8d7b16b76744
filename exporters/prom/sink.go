package prom

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/slo"
)

// SinkOptions configure a Sink.
type SinkOptions struct {
	// Target is the value of the target label.
	Target string
	// Specs are the SLOs the records are judged against; every objective
	// with per-record events (slo.Objective.HasRecordEvents) gets
	// tailgate_slo_events_total series.
	Specs []*slo.Spec
	// Operate counts events by the operate phase's rules
	// (slo.Objective.OperateEvents: a failed probe burns the latency
	// budgets too; a probe the canary cancelled itself counts nowhere) and
	// leaves the budget and burn-rate gauges to the caller, which keeps
	// rolling windows. Otherwise (a run, --push) events follow acceptance's
	// rules exactly (slo.Objective.Events), so the pushed counters agree
	// with the verdict, and the remaining budget is the run's.
	Operate bool
	// Classes are the request classes the target will see: their request
	// and error counters exist at 0 from the start (a class first seen
	// later gets them at its first record), so increase() counts the first
	// errors rather than taking them for the series' start.
	Classes []string
	// OnEvents, if set, is told of every record's events for an objective
	// (the canary's rolling windows); at is when the request ended.
	OnEvents func(spec *slo.Spec, o *slo.Objective, e slo.Events, at time.Time)
}

// Sink is a pipeline.Sink that updates Metrics from records. Any number
// of sinks may share one Metrics; each sink is fed by one goroutine.
type Sink struct {
	m       *Metrics
	opts    SinkOptions
	objs    []sinkObjective
	classes map[string]bool // classes whose counters exist
}

type sinkObjective struct {
	spec       *slo.Spec
	o          *slo.Objective
	good, bad  prometheus.Counter
	budget     float64
	sumG, sumB uint64 // the run's events, for the budget gauge (not Operate)
}

// NewSink returns a sink writing to m. Every objective's event series
// exist from here on at 0, so rate() over them works from the first
// scrape.
func (m *Metrics) NewSink(opts SinkOptions) *Sink {
	s := &Sink{m: m, opts: opts, classes: map[string]bool{}}
	for _, c := range opts.Classes {
		s.initClass(c)
	}
	for _, spec := range opts.Specs {
		for i := range spec.Objectives {
			o := &spec.Objectives[i]
			if !o.HasRecordEvents() {
				continue
			}
			b, _ := o.ErrorBudget()
			s.objs = append(s.objs, sinkObjective{spec: spec, o: o, budget: b,
				good: m.sloEvents.WithLabelValues(spec.Name, o.Name, opts.Target, OutcomeGood),
				bad:  m.sloEvents.WithLabelValues(spec.Name, o.Name, opts.Target, OutcomeBad)})
			if !opts.Operate {
				m.SetBudgetRemaining(spec.Name, o.Name, opts.Target, 1)
			}
		}
	}
	return s
}

// initClass makes class's request and error series exist at 0: outcome ok
// and error, and every error kind a record can count with.
func (s *Sink) initClass(class string) {
	if s.classes[class] {
		return
	}
	s.classes[class] = true
	t := s.opts.Target
	s.m.requests.WithLabelValues(t, class, OutcomeOK)
	s.m.requests.WithLabelValues(t, class, OutcomeError)
	for _, k := range loadgen.ErrorKinds {
		if s.opts.Operate && k == loadgen.ErrCancelled {
			continue // never counted in operate
		}
		s.m.errors.WithLabelValues(t, class, string(k))
	}
}

// Name is "prometheus".
func (s *Sink) Name() string { return "prometheus" }

// Add counts one record. Warm-up records are left out, as from every
// figure of a run; in Operate mode so are records the canary cancelled.
func (s *Sink) Add(r *loadgen.Record) error {
	if r.Warmup || (s.opts.Operate && r.ErrorKind == loadgen.ErrCancelled) {
		return nil
	}
	t, class := s.opts.Target, r.Class
	s.initClass(class)
	for _, c := range s.m.rates {
		c.add(r, t, class)
	}
	end := r.Epoch().Add(r.End)
	if r.OK() {
		s.m.requests.WithLabelValues(t, class, OutcomeOK).Inc()
		s.m.lastSuccess.WithLabelValues(t).Set(float64(end.UnixNano()) / 1e9)
		for _, h := range s.m.lat {
			var obs prometheus.Observer
			for smp := h.row.Samples(r); smp.Next(); {
				if obs == nil {
					obs = s.m.histogram(h.metric).WithLabelValues(t, class)
				}
				v := smp.Value().Seconds()
				for n := smp.Weight(); n > 0; n-- {
					obs.Observe(v)
				}
			}
		}
	} else {
		s.m.requests.WithLabelValues(t, class, OutcomeError).Inc()
		s.m.errors.WithLabelValues(t, class, string(r.ErrorKind)).Inc()
	}
	for i := range s.objs {
		so := &s.objs[i]
		var e slo.Events
		if s.opts.Operate {
			e = so.o.OperateEvents(r)
		} else {
			e = so.o.Events(r)
		}
		if e.Total() == 0 {
			continue
		}
		if e.Good > 0 {
			so.good.Add(float64(e.Good))
		}
		if e.Bad > 0 {
			so.bad.Add(float64(e.Bad))
		}
		if s.opts.OnEvents != nil {
			s.opts.OnEvents(so.spec, so.o, e, end)
		}
		if !s.opts.Operate {
			so.sumG += e.Good
			so.sumB += e.Bad
			s.m.SetBudgetRemaining(so.spec.Name, so.o.Name, t, slo.BudgetRemaining(so.sumB, so.sumG+so.sumB, so.budget))
		}
	}
	return nil
}

// Close does nothing: the metrics outlive the run (a validate's stages
// share one sink, which the pipeline closes after each).
func (s *Sink) Close() error { return nil }
