// Command tailgate is a load generator and SLO checker for LLM inference
// endpoints. See README.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"syscall"
)

// Exit codes, documented in README.md.
const (
	exitOK      = 0 // ran, and every objective passed or was waived
	exitFailed  = 1 // an objective failed
	exitUsage   = 2 // bad flags or configuration
	exitInvalid = 3 // the run itself is invalid (unreachable server, too many errors, client bottleneck)
)

// command is one subcommand: it parses its own flags from args and returns
// an exit code. It must return promptly when ctx is cancelled (Ctrl-C),
// after writing whatever results it has.
type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) int
}

// commands is the subcommand table. Each command lives in its own file.
var commands = map[string]command{
	"version":  {"print the version", cmdVersion},
	"check":    {"re-judge saved results against an SLO without re-running", cmdCheck},
	"sign":     {"sign a results directory's manifest (Ed25519, DSSE), or make a key pair", cmdSign},
	"verify":   {"check a signed results directory, file by file", cmdVerify},
	"sim":      {"run the built-in simulated OpenAI-compatible LLM server", cmdSim},
	"run":      {"send load to an endpoint and report latency and throughput", cmdRun},
	"validate": {"run an acceptance plan: every stage, every objective, with evidence", cmdValidate},
}

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func cmdVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintf(stdout, "tailgate %s\n", version)
	return exitOK
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
	fmt.Fprintf(w, "\nExit codes: 0 ok, 1 objectives failed, 2 usage or configuration error, 3 run invalid.\n")
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	name, rest := args[0], args[1:]
	switch name {
	case "help", "-h", "--help":
		if len(rest) > 0 {
			if c, ok := commands[rest[0]]; ok {
				return c.run(context.Background(), []string{"--help"}, stdout, stderr)
			}
		}
		usage(stdout)
		return exitOK
	case "--version":
		name = "version"
	}
	c, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "tailgate: unknown command %q\n\n", name)
		usage(stderr)
		return exitUsage
	}
	// First signal cancels the context so the command can write its
	// results; a second one kills the process the default way.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return c.run(ctx, rest, stdout, stderr)
}
