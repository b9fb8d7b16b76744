package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// What a real Ollama showed, against the simulator's Ollama profile: no
// /metrics is said once ("no server metrics (Ollama)"), no scrape error,
// no telemetry line; answers that end at once at the EOS are ok and said;
// every record carries Ollama's own timings.
func TestRunAgainstOllamaProfile(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Profile = sim.ProfileOllama
	cfg.FixedTTFT, cfg.FixedITL = 5*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	// --max-tokens 1: the one token is the EOS, never streamed.
	code, stdout, stderr := runCmd(t, "--api", "ollama-chat", "--target", srv.URL, "--model", "sim-llama-8b", "--max-tokens", "1",
		"--concurrency", "2", "--requests", "6", "--duration", "10s", "--telemetry-interval", "100ms", "--nvml", "off", "--out", dir)
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	if s.Telemetry == nil || s.Telemetry.NoMetrics != "no server metrics (Ollama)" || s.Telemetry.ScrapeErrors != 0 {
		t.Errorf("telemetry %+v", s.Telemetry)
	}
	if !strings.Contains(stdout, "no server metrics (Ollama)") || strings.Contains(stdout, "scrape error") {
		t.Errorf("stdout does not say there are no server metrics, once:\n%s", stdout)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "telemetry.jsonl")); err == nil && len(b) > 0 {
		t.Errorf("telemetry.jsonl has %d bytes from a server with no metrics", len(b))
	}
	want := "6 answers were empty"
	if !strings.Contains(strings.Join(s.Warnings, "\n"), want) {
		t.Errorf("warnings %q, want one saying %q", s.Warnings, want)
	}
	reqs, err := os.ReadFile(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(reqs), `"server":{"total_us":`); n != 6 {
		t.Errorf("%d of 6 records carry the server's timings:\n%s", n, reqs)
	}
}

// The warning that the server closes every connection (llama.cpp) reaches
// summary.json's warnings, not only stderr.
func TestRunWarningOfClosingServerInSummary(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Profile = sim.ProfileLlamaCpp
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	// The close comes after the client has sent its next request on the
	// connection (see sim.Config.CloseDelay): every reuse fails.
	cfg.CloseDelay = 20 * time.Millisecond
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--max-tokens", "4",
		"--concurrency", "2", "--requests", "30", "--duration", "20s", "--metrics-url", "off", "--nvml", "off", "--out", dir)
	if code != slo.ExitOK || !strings.Contains(stderr, "no longer reusing connections") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if s := readSummary(t, dir); !strings.Contains(strings.Join(s.Warnings, "\n"), "no longer reusing connections") {
		t.Errorf("summary warnings %q lack the connection warning", s.Warnings)
	}
}

// ready checks the model once before it waits: a server that answers but
// does not serve it will not become ready with it, so ready stops at once
// (2) in the server's words instead of waiting out --timeout.
func TestReadyStopsOnAModelNotServed(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Model: "tiny", StrictModel: true, FixedTTFT: time.Millisecond})
	start := time.Now()
	code, _, stderr := tgCmd("ready", "--target", srv.URL+"/v1", "--model", "nope", "--timeout", "1m")
	if code != slo.ExitUsage || !strings.Contains(stderr, `does not serve model "nope": it lists "tiny"`) || time.Since(start) > 20*time.Second {
		t.Fatalf("exit %d after %v: %s", code, time.Since(start), stderr)
	}
}
