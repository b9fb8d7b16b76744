package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/internal/redact"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/protocol"
	"github.com/tailgate-llm/tailgate/readiness"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdReady(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("ready", pflag.ContinueOnError)
	var tf targetFlags
	tf.dial = dialFrom(ctx)
	tf.register(fs)
	interval := fs.Duration("interval", time.Second, "time between attempt starts")
	attemptTimeout := fs.Duration("attempt-timeout", 30*time.Second, "bound on each attempt")
	timeout := fs.Duration("timeout", 10*time.Minute, "give up after this long")
	outDir := fs.String("out", "", "directory to write "+results.ReadyFile+" into")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate ready --target URL --model NAME [flags]\n\n"+
			"Run it as a replica restarts: it sends a short completion every --interval until one succeeds and\n"+
			"reports the time to ready (from its start to the end of that first answer) and every failed\n"+
			"attempt by kind (connect, server_error, timeout, ...). Exit 0 ready, 1 not ready within --timeout,\n"+
			"2 usage, 3 interrupted or results not written.\n\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if tf.model == "" {
		return usageErr("--model is required: a server that is down cannot say which model it serves")
	}
	client, err := tf.client(func(msg string) { fmt.Fprintln(stderr, "warning:", msg) })
	if err != nil {
		return err
	}
	// The preflight, once: a server that answers but does not serve the
	// model will not become ready with it (2, in its words); one that does
	// not answer yet is what ready waits for.
	if _, perr := protocol.Check(ctx, client, tf.model); perr != nil {
		words := redact.Text(perr.Error(), tf.apiKey)
		if errors.Is(perr, loadgen.ErrNotServed) {
			return usageErr("%s", words)
		}
		fmt.Fprintf(stderr, "preflight: %s; waiting\n", words)
	}
	res, werr := readiness.Wait(ctx, readiness.Config{Client: client, Interval: *interval, AttemptTimeout: *attemptTimeout,
		Timeout: *timeout, Log: func(s string) { fmt.Fprintln(stderr, s) }})
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	enc.Encode(res)
	if *outDir != "" {
		d := results.Dir(*outDir)
		if err := d.Create(); err != nil {
			return err
		}
		if err := results.WriteJSON(d.Path(results.ReadyFile), res); err != nil {
			return err
		}
	}
	switch {
	case werr != nil:
		return invalidErr("interrupted after %d attempts", res.Attempts)
	case !res.Ready:
		fmt.Fprintf(stderr, "tailgate ready: %s\n", res.Note)
		return exit(slo.ExitFailed)
	}
	fmt.Fprintf(stderr, "ready after %.1fs (%d failed attempts)\n", *res.TimeToReadyS, res.Errors)
	return nil
}
