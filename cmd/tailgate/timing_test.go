//go:build timing && !race

// Timing tests of whole commands, from `make test-timing`: they hold what
// only the real clock shows, without the race detector (which slows client
// and simulator and which they would measure) and one package at a time
// (another package's simulators on the same cores change what they see).

package main

import (
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

// A generator that cannot keep its schedule (one request in flight at a
// time, 200 due per second) distorted what it measured: exit 3, unless
// --self-check=warn.
func TestSelfCheckFails(t *testing.T) {
	srv := fastSim(t)
	args := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "200", "--arrival", "constant", "--duration", "1s",
		"--max-inflight", "1", "--max-tokens", "2", "--metrics-url", "off", "--grace", "0"}
	code, _, stderr := runCmd(t, append(args, "--self-check", "fail")...)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "the load generator distorted the figures") {
		t.Errorf("exit %d %s", code, stderr)
	}
	if code, _, stderr := runCmd(t, append(args, "--self-check", "warn", "--max-error-rate", "1", "--max-dropped", "1", "--max-cut-at-end", "1")...); code != slo.ExitOK {
		t.Errorf("--self-check warn: exit %d %s", code, stderr)
	}
}
