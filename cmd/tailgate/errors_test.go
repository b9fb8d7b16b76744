package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// Library errors name settings neutrally (*field.Error); the CLI prints
// them with the flag that sets each one.
func TestErrorsNameTheFlag(t *testing.T) {
	out := t.TempDir()
	code, _, stderr := tgCmd("run", "--api", "bogus", "--out", out, "--rate", "1", "--duration", "1s")
	if code != slo.ExitUsage || !strings.Contains(stderr, `--api "bogus": want one of`) {
		t.Errorf("bad --api: exit %d, stderr:\n%s", code, stderr)
	}
	// KServe over gRPC lists no models: with no --model the run cannot
	// start, and says which flag to give.
	srv := simtest.StartGRPC(t, sim.Config{FixedTTFT: time.Millisecond})
	code, _, stderr = tgCmd("run", "--api", "kserve-grpc", "--target", "grpc://"+srv.GRPCAddr, "--out", t.TempDir(),
		"--rate", "1", "--duration", "1s")
	if code == slo.ExitOK || !strings.Contains(stderr, "--model not given and the KServe v2 protocol lists no models") {
		t.Errorf("no --model: exit %d, stderr:\n%s", code, stderr)
	}
	// Unless nothing answers there: then the refused dial, as for HTTP,
	// not a missing flag.
	code, _, stderr = tgCmd("run", "--api", "kserve-grpc", "--target", "grpc://127.0.0.1:1", "--out", t.TempDir(),
		"--rate", "1", "--duration", "1s")
	if code != slo.ExitInvalid || !strings.Contains(stderr, "target grpc://127.0.0.1:1 does not answer ServerLive") ||
		!strings.Contains(stderr, "connection refused") || strings.Contains(stderr, "lists no models") {
		t.Errorf("no --model, dead target: exit %d, stderr:\n%s", code, stderr)
	}
	// The same refusal the canary words as its headers key, here as the
	// flag, and without the URL's password.
	code, _, stderr = tgCmd("run", "--api", "kserve-grpc", "--target", "http://u:pw-SECRET@127.0.0.1:1", "--model", "m",
		"--out", t.TempDir(), "--rate", "1", "--duration", "1s")
	if code != slo.ExitUsage || !strings.Contains(stderr, "user info is not sent over gRPC (use --header or the API key)") ||
		strings.Contains(stderr, "pw-SECRET") {
		t.Errorf("user info over gRPC: exit %d, stderr:\n%s", code, stderr)
	}
	code, _, stderr = tgCmd("run", "--rate", "1e9", "--duration", "1s", "--out", t.TempDir())
	if code != slo.ExitUsage || !strings.Contains(stderr, "split the load across processes with --shard I/N") {
		t.Errorf("--rate 1e9: exit %d, stderr:\n%s", code, stderr)
	}
}
