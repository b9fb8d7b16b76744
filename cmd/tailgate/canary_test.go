package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

const canarySLO = `kind: SLO
name: chat
owner: team
objectives:
  - {name: ttft, metric: ttft, threshold: 2s, target: 99%}
  - {name: errors, metric: error_rate, threshold: 1%}
`

func writeCanary(t *testing.T, target string) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "slo.yaml"), []byte(canarySLO), 0o644)
	body := fmt.Sprintf("kind: Canary\nlisten: 127.0.0.1:0\nevaluation_interval: 100ms\nslo: slo.yaml\n"+
		"targets:\n  - {name: sim, url: %q, model: m, max_tokens: 4, schedule: {rate: 10}}\n", target)
	p := filepath.Join(dir, "canary.yaml")
	os.WriteFile(p, []byte(body), 0o644)
	return p
}

// tailgate canary: a real SIGHUP reloads, cancelling the context (what
// SIGTERM does through dispatch) shuts down with exit 0.
func TestCanaryCommandReloadsOnSIGHUP(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	path := writeCanary(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() { done <- exitCode(cmdCanary(ctx, []string{"--config", path}, &stdout, stderr)) }()
	wait := func(what string) {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := stderr.WaitFor(wctx, what); err != nil {
			t.Fatalf("no %q in the log (%v):\n%s", what, err, stderr.String())
		}
	}
	wait("canary: serving") // the SIGHUP handler is installed before this line
	wait("canary: evaluation | sim: ")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	wait("canary: reloaded")
	cancel()
	select {
	case code := <-done:
		if code != slo.ExitOK {
			t.Errorf("exit %d after a graceful shutdown\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("tailgate canary did not stop")
	}
	if !strings.Contains(stderr.String(), "canary: stopped") {
		t.Errorf("no stop line:\n%s", stderr.String())
	}
}

func TestCanaryCommandErrors(t *testing.T) {
	var out, errb bytes.Buffer
	if code := dispatch([]string{"canary"}, &out, &errb); code != slo.ExitUsage {
		t.Errorf("no --config: exit %d", code)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "c.yaml")
	os.WriteFile(bad, []byte("kind: Canary\ntargets:\n  - {name: a, url: x}\n"), 0o644)
	errb.Reset()
	if code := dispatch([]string{"canary", "--config", bad}, &out, &errb); code != slo.ExitUsage ||
		!strings.Contains(errb.String(), "c.yaml:3: targets[0].url") {
		t.Errorf("broken file: exit %d\n%s", code, errb.String())
	}
	out.Reset()
	if code := dispatch([]string{"canary", "--check", "--config", "../../testdata/canary/sim.yaml"}, &out, &errb); code != slo.ExitOK ||
		!strings.Contains(out.String(), "ok, 1 targets") {
		t.Errorf("--check: exit %d\n%s", code, out.String())
	}
	// A listen address already taken: the daemon cannot serve (3).
	ln := httptest.NewServer(http.NotFoundHandler())
	defer ln.Close()
	p := writeCanary(t, "http://127.0.0.1:1")
	b, _ := os.ReadFile(p)
	os.WriteFile(p, bytes.Replace(b, []byte("127.0.0.1:0"), []byte(strings.TrimPrefix(ln.URL, "http://")), 1), 0o644)
	errb.Reset()
	if code := dispatch([]string{"canary", "--config", p}, io.Discard, &errb); code != slo.ExitInvalid {
		t.Errorf("listen address taken: exit %d\n%s", code, errb.String())
	}
}
