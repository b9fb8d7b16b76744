package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/canary"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/slo"
)

func cmdCanary(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("canary", pflag.ContinueOnError)
	config := fs.String("config", "", "canary file (kind: Canary) (required)")
	check := fs.Bool("check", false, "load and check the canary file and every file it names, then exit")
	state := fs.String("state", "", "state file keeping the rolling windows across restarts (written atomically\nat every evaluation and at shutdown; its directory must be writable)")
	var lo liveOutputs
	lo.register(fs, false)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: tailgate canary --config canary.yaml\n\n"+
			"Probes every target of the canary file on its schedule, judges each SLO objective over rolling\n"+
			"windows, and serves /metrics (Prometheus), /status (JSON), /healthz and /readyz. SIGHUP reloads the\n"+
			"file (an invalid one keeps the running configuration); SIGTERM or Ctrl-C shuts down gracefully.\n"+
			"Exit 0 after a graceful shutdown, 2 a broken canary file, 3 the daemon could not serve.\n\n%s", fs.FlagUsages())
	}
	if err := parseFlags(fs, args, stdout); err != nil {
		return err
	}
	if *config == "" {
		return usageErr("--config is required\nRun 'tailgate help canary' for the flags.")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *check {
		cfg, err := canary.LoadConfig(*config)
		if err != nil {
			return err
		}
		for _, w := range cfg.Warnings {
			fmt.Fprintln(stderr, "warning:", w)
		}
		fmt.Fprintf(stdout, "%s: ok, %d targets\n", *config, len(cfg.Targets))
		return nil
	}
	if err := lo.check(); err != nil {
		return err
	}
	// The explicit histograms' SLO edges are the file's at start; a
	// reload changes the SLO events, not the bucket layout.
	var specs []*slo.Spec
	if cfg, err := canary.LoadConfig(*config); err == nil {
		for _, t := range cfg.Targets {
			specs = append(specs, t.SLO)
		}
	}
	if err := lo.startCanary(ctx, specs, stderr); err != nil {
		return err
	}
	// The final export, bounded, after the daemon stopped (SIGTERM,
	// Ctrl-C) or failed to start.
	defer lo.flush(ctx, stderr)
	opts := canary.Options{Version: version.Version, Revision: version.Revision(), StateFile: *state, Log: stderr, Sinks: lo.canarySinks(ctx)}
	d, err := canary.New(*config, opts)
	if err != nil {
		return err
	}
	// SIGHUP reloads; SIGTERM and SIGINT end ctx (dispatch).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	if err := d.Start(ctx); err != nil {
		return invalidErr("%w", err)
	}
	go func() {
		for {
			select {
			case <-hup:
				d.Reload() // logs why it failed; the running configuration stays
			case <-ctx.Done():
				return
			}
		}
	}()
	if err := d.Wait(); err != nil {
		return invalidErr("%w", err)
	}
	return nil
}
