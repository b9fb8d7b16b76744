package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// TestMain lets tests run the real binary: the test executable re-runs
// itself as tailgate when TAILGATE_TEST_MAIN is set.
func TestMain(m *testing.M) {
	if os.Getenv("TAILGATE_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func readSummary(t *testing.T, dir string) *results.Summary {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s results.Summary
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("summary.json: %v", err)
	}
	if s.Schema != schema.SummarySchema {
		t.Errorf("schema %q", s.Schema)
	}
	return &s
}

// readJSONL checks that every line of requests.jsonl is a record.
func readJSONL(t *testing.T, dir string) []loadgen.Record {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []loadgen.Record
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for n := 1; sc.Scan(); n++ {
		var r loadgen.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("requests.jsonl:%d: %v", n, err)
		}
		out = append(out, r)
	}
	return out
}

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	// These tests judge other things than the self-check, whose verdict
	// depends on how loaded the machine is: it only warns here
	// (TestSelfCheckFails judges it).
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--self-check") }) {
		args = append(args, "--self-check=warn")
	}
	code := dispatch(append([]string{"run"}, args...), &out, &errb)
	return code, out.String(), errb.String()
}

// Every injected fault completes the run, shows in errors_by_kind under
// its kind, and leaves summary.json and requests.jsonl behind.
func TestRunClassifiesEveryFault(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL, cfg.StallFor = 5*time.Millisecond, 2*time.Millisecond, 300*time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP429, Every: 7}, {Kind: sim.FaultHTTP503, Every: 11},
		{Kind: sim.FaultTruncate, Every: 13}, {Kind: sim.FaultMalformed, Every: 17},
		{Kind: sim.FaultErrorInStream, Every: 19}, {Kind: sim.FaultHang, Every: 23}, {Kind: sim.FaultStallMid, Every: 29}}
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "100", "--arrival", "constant",
		"--duration", "2s", "--timeout", "1s", "--max-tokens", "8", "--out", dir, "--max-error-rate", "1")
	if code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	s := readSummary(t, dir)
	recs := readJSONL(t, dir)
	if int64(len(recs)) != s.Requests.Sent || s.Requests.Sent != 200 {
		t.Errorf("%d records, summary says %d sent; want 200", len(recs), s.Requests.Sent)
	}
	for kind, every := range map[loadgen.ErrorKind]int64{loadgen.ErrRateLimited: 7, loadgen.ErrServer: 11,
		loadgen.ErrStreamTruncated: 13, loadgen.ErrProtocol: 17, loadgen.ErrStreamError: 19, loadgen.ErrTimeout: 23} {
		if s.Requests.ErrorsByKind[string(kind)] == 0 {
			t.Errorf("%s: not in errors_by_kind %v (fault every %d)", kind, s.Requests.ErrorsByKind, every)
		}
	}
	// Requests 1..200 arrive in order; those hit by no erroring rule succeed.
	var wantOK int64
	for n := 1; n <= 200; n++ {
		if n%7 != 0 && n%11 != 0 && n%13 != 0 && n%17 != 0 && n%19 != 0 && n%23 != 0 {
			wantOK++
		}
	}
	if s.Requests.OK != wantOK {
		t.Errorf("%d ok, want %d", s.Requests.OK, wantOK)
	}
	// Telemetry is sampled from the simulator's /metrics beside the run.
	if s.Telemetry == nil || s.Telemetry.Family != "vllm" {
		t.Errorf("telemetry %+v, want family vllm (from the simulator's /metrics)", s.Telemetry)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "telemetry.jsonl")); err != nil || bytes.Count(b, []byte("\n")) < 2 {
		t.Errorf("telemetry.jsonl: %d bytes, %v", len(b), err)
	}
	// stall_mid is slow, not an error: it must appear as a long ICL gap.
	if s.LatencyMs[measure.MetricICL].Max < 290 {
		t.Errorf("max ICL %.1f ms: the 300 ms mid-stream stall is missing", s.LatencyMs[measure.MetricICL].Max)
	}
}

func TestRunUnreachableServerIsInvalid(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	dir := t.TempDir()
	// The preflight stops the run before its schedule: exit 3, why on
	// stderr, nothing sent, no results.
	code, _, stderr := runCmd(t, "--target", "http://"+addr, "--model", "m", "--rate", "20", "--duration", "500ms", "--out", dir)
	if code != slo.ExitInvalid || !strings.Contains(stderr, "does not answer") || !strings.Contains(stderr, "connection refused") {
		t.Fatalf("exit %d, want %d (run invalid) saying the target does not answer\n%s", code, slo.ExitInvalid, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "summary.json")); err == nil {
		t.Error("a run stopped by its preflight wrote a summary")
	}
}

// TestRunPreflightModel: run checks the model as validate and sweep do: a
// model the server does not serve is exit 3 before anything is sent, in
// the server's words.
func TestRunPreflightModel(t *testing.T) {
	srv := simtest.Start(t, sim.Config{Model: "tiny", StrictModel: true, FixedTTFT: time.Millisecond})
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "nope", "--rate", "20", "--duration", "300ms")
	if code != slo.ExitInvalid || !strings.Contains(stderr, `does not serve model "nope": it lists "tiny"`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if n := len(srv.Truth()); n != 0 {
		t.Errorf("%d requests sent after a failed preflight", n)
	}
}

func TestRunUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--rate", "5", "--concurrency", "2"},
		{"--no-such-flag"},
		{"--duration", "10s"},
		{"--rate", "5", "--stages", "1@1s", "--duration", "3s"},
		{"--rate", "5", "--warmup", "soon"},
		{"--rate", "5", "--api", "grpc-ish"},
		{"--stages", "c8@1s,10@1s"},
		{"--rate", "5", "--stages", "c8@1s"},
	} {
		if code, _, _ := runCmd(t, append([]string{"--model", "sim-llama-8b"}, args...)...); code != slo.ExitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, slo.ExitUsage)
		}
	}
}

// Ctrl-C mid-run: the process cancels in-flight requests, writes a valid
// summary.json with "interrupted": true and a requests.jsonl whose every
// line parses, and exits 3.
func TestRunInterruptKeepsResults(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 50*time.Millisecond, 100*time.Millisecond
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "run", "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "40",
		"--duration", "60s", "--max-tokens", "20", "--out", dir)
	cmd.Env = append(os.Environ(), "TAILGATE_TEST_MAIN=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt once the server holds 30 requests (each streams for 2 s,
	// so all are in flight): the run has records to keep and to cancel.
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if err := srv.Await(wctx, func() bool { return len(srv.Truth()) >= 30 }); err != nil {
		cmd.Process.Kill()
		t.Fatalf("the server saw %d requests in a minute\n%s", len(srv.Truth()), stderr.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("tailgate did not stop within 20 s of SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != slo.ExitInvalid {
		t.Errorf("exit %d, want %d\n%s", code, slo.ExitInvalid, stderr.String())
	}
	s := readSummary(t, dir)
	if !s.Run.Interrupted {
		t.Error(`summary.json: "interrupted" is false`)
	}
	recs := readJSONL(t, dir)
	if int64(len(recs)) != s.Requests.Sent || len(recs) < 30 {
		t.Errorf("%d records in requests.jsonl, summary says %d sent", len(recs), s.Requests.Sent)
	}
	if s.Requests.ErrorsByKind["cancelled"] == 0 {
		t.Errorf("no cancelled requests recorded: %v", s.Requests.ErrorsByKind)
	}
}

// Secrets given to run (the API key, URL credentials, a token header) never
// reach the terminal, summary.json, requests.jsonl or telemetry.jsonl, even
// when the server answers with errors.
func TestRunKeepsSecretsOutOfResults(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP429, Every: 2}, {Kind: sim.FaultErrorInStream, Every: 3}}
	srv := simtest.Start(t, cfg)
	t.Setenv("OPENAI_API_KEY", "sk-live-key-0123456789")
	target := strings.Replace(srv.URL, "http://", "http://admin:hunter2hunter2@", 1) + "/v1"
	dir := t.TempDir()
	code, stdout, stderr := runCmd(t, "--target", target, "--model", "sim-llama-8b", "--rate", "50", "--duration", "400ms",
		"--header", "X-Api-Token: tok-9876543210", "--out", dir, "--max-error-rate", "1")
	if code != slo.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	texts := map[string]string{"stdout": stdout, "stderr": stderr}
	for _, f := range []string{"summary.json", "requests.jsonl", "telemetry.jsonl"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	for where, text := range texts {
		for _, secret := range []string{"sk-live-key-0123456789", "hunter2hunter2", "tok-9876543210"} {
			if strings.Contains(text, secret) {
				t.Errorf("%s contains the secret %q", where, secret)
			}
		}
	}
	if !strings.Contains(texts["requests.jsonl"], `"error_kind":"rate_limited"`) {
		t.Error("no error records: the test did not exercise error paths")
	}
}

// run --force over a validate's evidence directory leaves nothing of the
// validate beside the new run (its verdict, JUnit, manifest and stages
// were kept, and check then judged a mix of both), and keeps what tailgate
// did not write.
func TestRunForceReplacesAValidateDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, capacitySim())
	dir := t.TempDir()
	for _, f := range []string{results.VerdictFile, results.JUnitFile, results.ManifestFile, results.RecordsFile, "notes.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("{}\n"), 0o644)
	}
	os.MkdirAll(filepath.Join(dir, results.StagesDir, "normal"), 0o755)
	args := []string{"run", "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "10", "--duration", "1s", "--max-tokens", "4",
		"--metrics-url", "off", "--self-check", "warn", "--out", dir}
	if code, _, e := tgCmd(args...); code != slo.ExitUsage || !strings.Contains(e, "already holds results") {
		t.Fatalf("without --force: %d %s", code, e)
	}
	code, _, e := tgCmd(append(args, "--force")...)
	if code != slo.ExitOK {
		t.Fatalf("run --force: %d %s", code, e)
	}
	for _, gone := range []string{results.VerdictFile, results.JUnitFile, results.ManifestFile, results.StagesDir} {
		if _, err := os.Stat(filepath.Join(dir, gone)); err == nil {
			t.Errorf("%s of the replaced validate is still there", gone)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "notes.txt")); err != nil || !strings.Contains(e, "kept 1 entries it did not write: notes.txt") {
		t.Errorf("the user's notes.txt: %v; stderr %s", err, e)
	}
	if n := len(readJSONL(t, dir)); n < 5 {
		t.Errorf("%d records of the new run", n)
	}
}
