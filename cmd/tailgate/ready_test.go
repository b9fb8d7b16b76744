package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

func TestReadyCommand(t *testing.T) {
	srv := simtest.Start(t, sim.DefaultConfig())
	out := t.TempDir()
	code, stdout, stderr := tgCmd("ready", "--target", srv.URL, "--model", "sim-llama-8b", "--out", out)
	if code != slo.ExitOK || !strings.Contains(stdout, `"ready": true`) || !strings.Contains(stderr, "ready after") {
		t.Fatalf("ready: %d\n%s\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(out, "ready.json")); err != nil {
		t.Error(err)
	}
	code, _, stderr = tgCmd("ready", "--target", "http://127.0.0.1:1", "--model", "sim-llama-8b", "--interval", "50ms", "--timeout", "200ms")
	if code != slo.ExitFailed || !strings.Contains(stderr, "not ready after") {
		t.Errorf("down: %d %s", code, stderr)
	}
	if code, _, e := tgCmd("ready", "--target", srv.URL); code != slo.ExitUsage || !strings.Contains(e, "--model is required") {
		t.Errorf("no model: %d %s", code, e)
	}
}
