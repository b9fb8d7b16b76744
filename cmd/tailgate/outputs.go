package main

import (
	"context"
	"io"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/exporters/otlp"
	"github.com/tailgate-llm/tailgate/pipeline"
	"github.com/tailgate-llm/tailgate/slo"
)

// liveOutputs are the outputs a load command feeds as records arrive,
// beside its results directory: the Pushgateway push (--push, run and
// validate) and the OTLP export (--otlp-*, every load command). A new
// live output is one field here: its flags, its sink and its end, and
// run, validate, sweep and the canary take it from here (sinks,
// canarySink), so each command feeds it without wiring of its own.
type liveOutputs struct {
	push *pushFlags // nil: the command has no --push
	otlp otlpFlags
}

// register adds the outputs' flags; withPush adds --push.
func (l *liveOutputs) register(fs *pflag.FlagSet, withPush bool) {
	if withPush {
		l.push = &pushFlags{}
		l.push.register(fs)
	}
	l.otlp.register(fs)
}

// check refuses output flags that cannot work, before the command reaches
// its target.
func (l *liveOutputs) check() error { return l.otlp.check() }

// sinks builds the sinks of the outputs the flags ask for (none asked:
// none), for a run judged by spec (nil: none) against target.
func (l *liveOutputs) sinks(ctx context.Context, spec *slo.Spec, tf *targetFlags, shard string, stderr io.Writer) ([]pipeline.Sink, error) {
	var out []pipeline.Sink
	if l.push != nil {
		s, err := l.push.sink(spec, tf.target)
		if err != nil {
			return nil, err
		}
		if s != nil {
			out = append(out, s)
		}
	}
	s, err := l.otlp.sink(ctx, spec, tf.api, tf.target, func() string { return tf.model }, shard, stderr)
	if err != nil {
		return nil, err
	}
	if s != nil {
		out = append(out, s)
	}
	if mk := sinkMakerFrom(ctx); mk != nil {
		out = append(out, mk(tf.target))
	}
	return out, nil
}

// startCanary starts the exports a canary feeds (the OTLP exporter, with
// the SLO edges of specs); flush ends them.
func (l *liveOutputs) startCanary(ctx context.Context, specs []*slo.Spec, stderr io.Writer) error {
	if !l.otlp.enabled() {
		return nil
	}
	return l.otlp.start(ctx, specs, otlp.Options{Operate: true}, stderr)
}

// canarySinks makes a canary target's sinks, at every start of its probe
// loop (canary.Options.Sinks); nil when no output is asked for.
func (l *liveOutputs) canarySinks(ctx context.Context) func(t canary.Target) []pipeline.Sink {
	mk := sinkMakerFrom(ctx)
	if l.otlp.exp == nil && mk == nil {
		return nil
	}
	return func(t canary.Target) []pipeline.Sink {
		var out []pipeline.Sink
		if s := l.otlp.canarySink(t); s != nil {
			out = append(out, s)
		}
		if mk != nil {
			out = append(out, mk(t.URL))
		}
		return out
	}
}

// sinkMaker makes one more sink for a load command's records, given the
// target they go to.
type sinkMaker func(target string) pipeline.Sink

type sinkKey struct{}

// withSink returns a context whose command invocation feeds a sink from
// mk beside its own: how a test adds a made-up output once and sees every
// load command feed it. It travels with the invocation, as withDial's
// dialer does; the binary never sets one.
func withSink(ctx context.Context, mk sinkMaker) context.Context {
	return context.WithValue(ctx, sinkKey{}, mk)
}

func sinkMakerFrom(ctx context.Context) sinkMaker {
	mk, _ := ctx.Value(sinkKey{}).(sinkMaker)
	return mk
}

// flush makes the OTLP export's final export, bounded: call it as soon as
// the load has ended, interrupted or not, before anything can return.
func (l *liveOutputs) flush(ctx context.Context, stderr io.Writer) { l.otlp.flush(ctx, stderr) }

// pushResults pushes the run's final metrics to the Pushgateway (nothing
// without --push); the error is results not delivered.
func (l *liveOutputs) pushResults(ctx context.Context, stderr io.Writer) error {
	if l.push == nil {
		return nil
	}
	return l.push.push(ctx, stderr)
}
