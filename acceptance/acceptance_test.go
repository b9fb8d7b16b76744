package acceptance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

const (
	testSLO = `kind: SLO
name: s
owner: team@example.com
objectives:
  - {name: errors, metric: error_rate, threshold: 1%}
`
	testMix = `kind: Mix
name: m
classes:
  - name: c
    source: {type: synthetic, input_tokens: 16}
    max_tokens: 4
`
	testPlan = `kind: Plan
apiVersion: tailgate/v1
name: p
target: http://127.0.0.1:1
model: m
slo: slo.yaml
mix: mix.yaml
seed: 7
validity: {max_error_rate: 100%}
stages:
  - {name: open, rate: 40, duration: 400ms}
  - {name: closed, concurrency: 2, duration: 300ms}
  - {name: failover, manual: true, description: kill a replica}
`
)

// testConfig writes a plan, its SLO and mix into a directory and returns
// a Config for it, its output under another directory.
func testConfig(t *testing.T, client loadgen.Client) Config {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{"plan.yaml": testPlan, "slo.yaml": testSLO, "mix.yaml": testMix} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	planPath := filepath.Join(dir, "plan.yaml")
	plan, err := slo.LoadPlan(planPath)
	if err != nil {
		t.Fatal(err)
	}
	mix, err := prompts.LoadMix(plan.Resolve(plan.MixPath), prompts.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return Config{Plan: plan, PlanPath: planPath, Mix: mix, Out: results.Dir(filepath.Join(t.TempDir(), "out")),
		Client: client, Target: "http://127.0.0.1:1", API: "openai-chat", Model: "m", Streaming: true,
		Timeout: 2 * time.Second, Grace: 500 * time.Millisecond, Version: "test"}
}

// answering answers every request after a server's delay of 5 ms with
// four streamed tokens, or fails it when fail says so.
func answering(fail func(seq int64) bool) loadgen.Client {
	return loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
		rec.Sent = rec.Now()
		select {
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			rec.ErrorKind, rec.End = loadgen.ErrCancelled, rec.Now()
			return
		}
		if fail != nil && fail(rec.Seq) {
			rec.ErrorKind, rec.End = loadgen.ErrServer, rec.Now()
			return
		}
		at := rec.Now()
		for i := range 4 {
			rec.Chunks = append(rec.Chunks, loadgen.Chunk{At: at + time.Duration(i)*time.Microsecond, Tokens: 1})
		}
		rec.OutputTokens = 4
		rec.End = rec.Now() + 4*time.Microsecond
	})
}

func sha(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// A plan run end to end writes the whole pack: the inputs by digest, a
// summary per load stage, the verdicts, report and manifest; the manual
// stage waits for its record.
func TestRunWritesThePack(t *testing.T) {
	cfg := testConfig(t, answering(nil))
	var log strings.Builder
	cfg.Log = &log
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out := cfg.Out
	for _, f := range []string{results.VerdictFile, results.EnvironmentFile, results.ReportFile, results.ManifestFile} {
		if _, err := os.Stat(out.Path(f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
	b, err := os.ReadFile(out.Path(results.EnvironmentFile))
	if err != nil {
		t.Fatal(err)
	}
	for role, src := range map[string]string{"plan": cfg.PlanPath, "slo": cfg.Plan.Resolve(cfg.Plan.SLOPath), "mix": cfg.Plan.Resolve(cfg.Plan.MixPath)} {
		if d := sha(t, src); !strings.Contains(string(b), d) {
			t.Errorf("environment.json lacks the %s file's sha256 %s", role, d)
		}
	}
	if _, err := os.Stat(filepath.Join(string(out), results.InputsDir, results.CanonicalMixFile)); err != nil {
		t.Errorf("the resolved mix is not in the pack: %v", err)
	}
	for _, st := range []string{"open", "closed"} {
		s, err := out.Stage(st).ReadSummary()
		if err != nil {
			t.Fatalf("stage %s: %v", st, err)
		}
		if s.Requests.Sent == 0 {
			t.Errorf("stage %s: no requests in its summary", st)
		}
		if !strings.Contains(log.String(), "stage "+st+":") {
			t.Errorf("no log line for stage %s:\n%s", st, log.String())
		}
	}
	if _, err := out.Stage("failover").ReadSummary(); err == nil {
		t.Error("the manual stage has a summary: it was run")
	}
	var pending bool
	for _, v := range rep.Verdicts {
		if v.Stage == "failover" {
			pending = v.Status == slo.Pending
		}
	}
	if !pending {
		t.Errorf("manual stage not PENDING: %+v", rep.Verdicts)
	}
	if rep.ExitCode == slo.ExitInvalid {
		t.Errorf("a clean run is INVALID: %+v", rep.Problems)
	}
	m, _, err := evidence.Read(string(out))
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.Check(string(out), m); err != nil {
		t.Errorf("the manifest does not hold the pack: %v", err)
	}
}

// Half the requests failing fails the error objective: the verdict
// follows what the stages measured, and the exit code says FAIL, not
// INVALID (the plan allows any error rate as valid).
func TestRunFailsOnErrors(t *testing.T) {
	cfg := testConfig(t, answering(func(seq int64) bool { return seq%2 == 0 }))
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != slo.ReportFail || rep.ExitCode != slo.ExitFailed {
		t.Fatalf("all requests failed: status %s exit %d, problems %+v", rep.Status, rep.ExitCode, rep.Problems)
	}
}

// No request answered is no verdict: INVALID, whatever the plan allows.
func TestRunAllFailedIsInvalid(t *testing.T) {
	cfg := testConfig(t, answering(func(int64) bool { return true }))
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != slo.ReportInvalid || rep.ExitCode != slo.ExitInvalid {
		t.Fatalf("no request succeeded: status %s exit %d", rep.Status, rep.ExitCode)
	}
}

// A preflight that fails is an *InvalidError that keeps its cause, and
// leaves the output directory untouched.
func TestRunPreflightFails(t *testing.T) {
	// The preflight's own deadline ends it, on the bubble's clock.
	synctest.Test(t, func(t *testing.T) {
		cfg := testConfig(t, answering(nil))
		cfg.Preflight = func(ctx context.Context) error {
			<-ctx.Done()
			return ctx.Err()
		}
		_, err := Run(context.Background(), cfg)
		var ie *InvalidError
		if !errors.As(err, &ie) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("preflight timeout: got %v (%T)", err, err)
		}
		if _, err := os.Stat(string(cfg.Out)); !os.IsNotExist(err) {
			t.Errorf("the output directory was made before the preflight passed: %v", err)
		}
	})
}

// A directory holding results is refused without Force and replaced with
// it.
func TestRunForce(t *testing.T) {
	cfg := testConfig(t, answering(nil))
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "already holds results") {
		t.Fatalf("second run into the same directory: %v", err)
	}
	cfg.Force = true
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatalf("forced: %v", err)
	}
}

// A run stopped during its first stage is INVALID, says it was
// interrupted, runs no later stage, and still writes what it gathered.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var n atomic.Int64
	cfg := testConfig(t, answering(func(int64) bool {
		if n.Add(1) == 3 {
			cancel()
		}
		return false
	}))
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != slo.ReportInvalid || rep.ExitCode != slo.ExitInvalid {
		t.Fatalf("interrupted run: status %s exit %d", rep.Status, rep.ExitCode)
	}
	found := false
	for _, p := range rep.Problems {
		found = found || p.Check == "interrupted"
	}
	if !found {
		t.Errorf("no interrupted problem: %+v", rep.Problems)
	}
	if _, err := cfg.Out.Stage("open").ReadSummary(); err != nil {
		t.Errorf("the stopped stage's summary is lost: %v", err)
	}
	if _, err := cfg.Out.Stage("closed").ReadSummary(); err == nil {
		t.Error("a stage after the interruption ran")
	}
	if _, err := os.Stat(cfg.Out.Path(results.VerdictFile)); err != nil {
		t.Errorf("no verdict after an interruption: %v", err)
	}
}

// Stage options: a seed per stage, Poisson unless the plan names an
// arrival process, closed loop for a concurrency.
func TestStageOptions(t *testing.T) {
	cfg := testConfig(t, answering(nil))
	open, closed := stageOptions(cfg, 0, time.Time{}), stageOptions(cfg, 1, time.Time{})
	if open.Arrival != loadgen.ArrivalPoisson || open.Closed || open.Seed != 7 {
		t.Errorf("open stage: arrival %q closed %v seed %d", open.Arrival, open.Closed, open.Seed)
	}
	if !closed.Closed || closed.Arrival != "" || closed.Seed != 8 || closed.Stages[0].Concurrency != 2 {
		t.Errorf("closed stage: %+v", closed)
	}
}

// Stages with a shared start are spaced by duration, grace and the gap;
// manual stages take no time.
func TestStageStarts(t *testing.T) {
	cfg := testConfig(t, answering(nil))
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	got := StageStarts(cfg.Plan, t0, time.Second)
	if !got["open"].Equal(t0) || !got["closed"].Equal(t0.Add(400*time.Millisecond+time.Second+StageGap)) {
		t.Errorf("starts: %v", got)
	}
	if _, ok := got["failover"]; ok {
		t.Error("a manual stage has a start")
	}
}
