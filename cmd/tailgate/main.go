// Command tailgate is a load generator and SLO checker for LLM inference
// endpoints. See README.md.
//
// This package only parses flags, calls the libraries (pipeline,
// acceptance, results, …) and maps their errors to exit codes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"sort"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tailgate-llm/tailgate/acceptance"
	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// Exit codes are slo.Exit* (0 ok, 1 failed, 2 usage, 3 invalid, 4
// inconclusive; docs/exit-codes.md), tailgate's one set; a judgement's code comes
// from results.Exit, its one precedence rule.

// command is one subcommand: it parses its own flags from args and returns
// nil or an error that says how it ended (see exitCode). It must return
// promptly when ctx is cancelled (Ctrl-C), after writing whatever results
// it has.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the subcommand table. Each command lives in its own file
// and calls one library:
//
//	run       pipeline (one load run, judged when --slo is given)
//	validate  acceptance (a plan's stages → verdicts → evidence pack)
//	check     acceptance.Check (re-judge saved records)
//	merge     merge (shards → one result)
//	sweep     capacity (levels → SLO-max, knee, headroom)
//	compare   comparison (runs, or two sweeps whole)
//	report    report (HTML / Markdown; --since: the periodic review)
//	ready     readiness (time to ready after a restart)
//	canary    canary (the never-ending pipeline per target)
//	slo       slo/rules (burn-rate rules, Sloth specs)
//	sign      evidence (in-toto attestation, DSSE)
//	sim       sim (the simulated server)
var commands = map[string]command{
	"version":  {"print the version", cmdVersion},
	"check":    {"re-judge saved results against an SLO without re-running", cmdCheck},
	"sign":     {"sign a results directory as an in-toto attestation (Ed25519, DSSE), or make a key pair", cmdSign},
	"verify":   {"check a signed results directory, file by file", cmdVerify},
	"sim":      {"run the built-in simulated OpenAI-compatible LLM server", withCode(cmdSim)},
	"run":      {"send load to an endpoint and report latency and throughput", cmdRun},
	"validate": {"run an acceptance plan: every stage, every objective, with evidence", cmdValidate},
	"merge":    {"merge the results of the shards of one schedule (run --shard) into one", cmdMerge},
	"canary":   {"probe live endpoints on a schedule, judge the SLO continuously, serve Prometheus metrics", cmdCanary},
	"slo":      {"operate-phase tools for an SLO file: tailgate slo rules writes burn-rate rules", cmdSLO},
	"compare":  {"compare two results (or two sweeps): regression, improvement or not shown to differ", cmdCompare},
	"ready":    {"measure a restarting server's time to its first successful answer, and the errors meanwhile", cmdReady},
	"report":   {"write one HTML (or Markdown) report of results directories, or the periodic review (--since)", cmdReport},
	"sweep":    {"find the highest load that meets the SLO (SLO-max), the knee and the headroom", cmdSweep},
}

func cmdVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintf(stdout, "tailgate %s (revision %s, %s)\n", version.Version, version.RevisionOrUnknown(), runtime.Version())
	return nil
}

// exitError ends a command with a given exit code; Err, if not nil, is
// printed first.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit ends a command with code, printing nothing more.
func exit(code int) error {
	if code == slo.ExitOK {
		return nil
	}
	return &exitError{code: code}
}

// judgedExit is a judgement's exit (results.Exit): the code, with why on
// stderr when it is not 0.
func judgedExit(code int, why string) error {
	if code == slo.ExitOK {
		return nil
	}
	if why == "" {
		return exit(code)
	}
	return &exitError{code: code, err: errors.New(why)}
}

func usageErr(format string, a ...any) error {
	return &exitError{code: slo.ExitUsage, err: fmt.Errorf(format, a...)}
}

func invalidErr(format string, a ...any) error {
	return &exitError{code: slo.ExitInvalid, err: fmt.Errorf(format, a...)}
}

// errHelp: the command printed its help as asked.
var errHelp = errors.New("help shown")

// exitCode maps a command's error to its exit status: results that could
// not be written and runs that could not be done are 3, a command's own
// code stands, anything else is a usage or configuration error.
func exitCode(err error) int {
	var ee *exitError
	var we *results.WriteError
	var ie *acceptance.InvalidError
	switch {
	case err == nil, errors.Is(err, errHelp):
		return slo.ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &we), errors.As(err, &ie):
		return slo.ExitInvalid
	}
	return slo.ExitUsage
}

// withCode adapts a command that returns its exit code.
func withCode(f func(ctx context.Context, args []string, stdout, stderr io.Writer) int) func(context.Context, []string, io.Writer, io.Writer) error {
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		return exit(f(ctx, args, stdout, stderr))
	}
}

// parseFlags parses args; a bad flag is a usage error that says what was
// wrong and where to look, --help prints the usage (to stdout: `tailgate
// help run | grep rate` works) and ends the command.
func parseFlags(fs *pflag.FlagSet, args []string, stdout io.Writer) error {
	fs.SetOutput(io.Discard)
	fs.SetInterspersed(true)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			fs.SetOutput(stdout)
			fs.Usage()
			return errHelp
		}
		return usageErr("%v\nRun 'tailgate help %s' for the flags.", err, fs.Name())
	}
	return nil
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "tailgate: load generator and SLO checker for LLM inference endpoints\n\nUsage: tailgate COMMAND [flags]\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-10s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "  %-10s %s\n", "help", "show this help, or a command's flags: tailgate help COMMAND")
	fmt.Fprintf(w, "\nExit codes: 0 ok, 1 objectives failed, 2 usage or configuration error, 3 run invalid or results not written,\n4 a sample too small to decide an objective (INCONCLUSIVE).\n")
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	return dispatchContext(context.Background(), args, stdout, stderr)
}

// dispatchContext runs the command args name with a context derived from
// parent, which carries what one invocation is given in place of the
// process's own (withDial).
func dispatchContext(parent context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return slo.ExitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		if len(rest) > 0 {
			c, ok := commands[rest[0]]
			if !ok {
				fmt.Fprintf(stderr, "tailgate help: unknown command %q\n\n", rest[0])
				usage(stderr)
				return slo.ExitUsage
			}
			return exitCode(c.run(parent, []string{"--help"}, stdout, stderr))
		}
		usage(stdout)
		return slo.ExitOK
	case "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "tailgate: unknown command %q\n\n", name)
		usage(stderr)
		return slo.ExitUsage
	}
	// First signal cancels the context so the command can write its
	// results; a second one kills the process the default way.
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	endProfiles := startProfiles(stderr)
	err := c.run(ctx, rest, stdout, stderr)
	endProfiles()
	return finish(name, err, stderr)
}

// finish prints a command's error, if it has something to say, and returns
// the exit code.
func finish(name string, err error, stderr io.Writer) int {
	var ee *exitError
	if err != nil && !errors.Is(err, errHelp) && (!errors.As(err, &ee) || ee.err != nil) {
		fmt.Fprintf(stderr, "tailgate %s: %s\n", name, errText(err))
	}
	return exitCode(err)
}
