package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

const checkSLO = `kind: SLO
name: chat
owner: team
objectives:
  - {name: ttft-p99, metric: ttft, threshold: 500ms, target: 99%}
  - {name: errors, metric: error_rate, threshold: 5%}
  - {name: tpot-p90, metric: tpot, threshold: 20ms, target: 90%}
`

const checkPlan = `kind: Plan
name: p
target: http://127.0.0.1:8000
model: m
slo: slo.yaml
mix: mix.yaml
stages:
  - {name: normal, rate: 10, duration: 10s}
  - {name: peak, rate: 10, duration: 10s}
waivers:
  - {objective: tpot-p90, stage: peak, owner: alice, reason: INF-1, expires: 2026-06-30}
`

// liveRecords: 400 requests per stage with nanosecond instants (enough to
// decide a 99% target at 95% confidence: 0.99⁴⁰⁰ = 0.018); in normal
// slowTTFT requests take 501 ms to the first token; peak has a slow decode.
func liveRecords(slowTTFT int, connectErrors bool) []loadgen.Record {
	var out []loadgen.Record
	seq := int64(0)
	for si, stage := range []string{"normal", "peak"} {
		for i := 0; i < 400; i++ {
			start := time.Duration(si)*60*time.Second + time.Duration(i)*100*time.Millisecond + time.Duration(i*37)
			ttft := 200*time.Millisecond + time.Duration(i*13)
			if stage == "normal" && i < slowTTFT {
				ttft = 501 * time.Millisecond
			}
			step := 10 * time.Millisecond
			if stage == "peak" {
				step = 30 * time.Millisecond
			}
			r := loadgen.Record{Seq: seq, Stage: stage, Intended: start, Sent: start + 17, OutputTokens: 5}
			for j := 0; j < 5; j++ {
				r.Chunks = append(r.Chunks, loadgen.Chunk{At: start + ttft + time.Duration(j)*step + 3, Tokens: 1})
			}
			r.End = r.Chunks[4].At + 5
			if connectErrors && stage == "peak" {
				r = loadgen.Record{Seq: seq, Stage: stage, Intended: start, Sent: start, End: start + time.Millisecond, ErrorKind: loadgen.ErrConnect}
			}
			out = append(out, r)
			seq++
		}
	}
	return out
}

func writeRun(t *testing.T, recs []loadgen.Record) (sloFile, planFile, dir string) {
	t.Helper()
	base := t.TempDir()
	sloFile, planFile = filepath.Join(base, "slo.yaml"), filepath.Join(base, "plan.yaml")
	os.WriteFile(sloFile, []byte(checkSLO), 0o644)
	os.WriteFile(planFile, []byte(checkPlan), 0o644)
	dir = filepath.Join(base, "run")
	os.MkdirAll(dir, 0o755)
	var buf bytes.Buffer
	for i := range recs {
		b, err := json.Marshal(&recs[i])
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(append(b, '\n'))
	}
	os.WriteFile(filepath.Join(dir, results.RecordsFile), buf.Bytes(), 0o644)
	// A finished run leaves its summary; without one check says the run
	// was cut short.
	os.WriteFile(filepath.Join(dir, results.SummaryFile), []byte(`{"schema":"tailgate.summary/v1"}`+"\n"), 0o644)
	return
}

func tgCmd(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = dispatch(args, &o, &e)
	return code, o.String(), e.String()
}

func TestCheckExitCodes(t *testing.T) {
	at := "--at=2026-06-01T00:00:00Z"
	// All pass (peak's slow TPOT is waived): 0.
	s, p, dir := writeRun(t, liveRecords(0, false))
	if code, out, errOut := tgCmd("check", "--slo", s, "--plan", p, at, dir); code != slo.ExitOK ||
		!strings.Contains(out, "WAIVED (FAIL)") || !strings.Contains(out, "Result: PASS (exit 0)") {
		t.Fatalf("pass: %d\n%s\n%s", code, out, errOut)
	}
	// Nine of 400 over 500 ms against 99% decide a failure at 95%
	// (P(X ≥ 9 | 400, 1%) = 0.02): 1.
	s, p, dir = writeRun(t, liveRecords(9, false))
	if code, out, _ := tgCmd("check", "--slo", s, "--plan", p, at, dir); code != slo.ExitFailed ||
		!strings.Contains(out, "ttft-p99   normal  -      97.75% (p99 501ms)") {
		t.Fatalf("fail: %d\n%s", code, out)
	}
	// Two of 400 decide nothing (P(X ≤ 2) = 0.24, P(X ≥ 2) = 0.91):
	// INCONCLUSIVE, 4, saying how many would decide it.
	s, p, dir = writeRun(t, liveRecords(2, false))
	if code, out, _ := tgCmd("check", "--slo", s, "--plan", p, at, dir); code != slo.ExitInconclusive ||
		!strings.Contains(out, "INCONCLUSIVE: 400 requests, 2 missed;") || !strings.Contains(out, "Result: INCONCLUSIVE (exit 4)") {
		t.Fatalf("inconclusive: %d\n%s", code, out)
	}
	// The waiver has expired by July: 1, and the table says so.
	s, p, dir = writeRun(t, liveRecords(0, false))
	if code, out, _ := tgCmd("check", "--slo", s, "--plan", p, "--at", "2026-07-01", dir); code != slo.ExitFailed ||
		!strings.Contains(out, "waiver by alice expired 2026-06-30 (INF-1): no longer waives") {
		t.Fatalf("expired: %d\n%s", code, out)
	}
	// Server unreachable in peak: 3.
	s, p, dir = writeRun(t, liveRecords(0, true))
	if code, out, _ := tgCmd("check", "--slo", s, "--plan", p, at, dir); code != slo.ExitInvalid ||
		!strings.Contains(out, "stage peak: unreachable") {
		t.Fatalf("invalid: %d\n%s", code, out)
	}
	// Usage and configuration: 2, with file, line and field.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(checkSLO, "threshold: 500ms", "threshold: 5O0ms", 1)), 0o644)
	if code, _, errOut := tgCmd("check", "--slo", bad, dir); code != slo.ExitUsage ||
		!strings.Contains(errOut, `bad.yaml:5: objectives[0].threshold: "5O0ms" is not a duration`) {
		t.Fatalf("bad slo: %d %s", code, errOut)
	}
	if code, _, _ := tgCmd("check", dir); code != slo.ExitUsage {
		t.Fatalf("no --slo: %d", code)
	}
	if code, _, _ := tgCmd("check", "--slo", s, filepath.Join(dir, "nope")); code != slo.ExitUsage {
		t.Fatalf("no results: %d", code)
	}
	if code, out, _ := tgCmd("check", "--help"); code != slo.ExitOK || !strings.Contains(out, "Usage: tailgate check") {
		t.Fatalf("--help: %d", code)
	}
}

// TestCheckReproducesLiveVerdict: judging the live records in memory (as
// validate does) and check on the saved requests.jsonl give the same
// verdicts, boundaries included.
func TestCheckReproducesLiveVerdict(t *testing.T) {
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	for _, slow := range []int{0, 2, 9} { // pass, inconclusive, fail
		live := liveRecords(slow, false)
		s, p, dir := writeRun(t, live)
		spec, err := slo.LoadSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		plan, _ := slo.ParsePlan(p, []byte(checkPlan))
		want := slo.Assess(plan, spec, slo.Input{Records: live, Now: now})
		out := filepath.Join(t.TempDir(), "out")
		code, _, errOut := tgCmd("check", "--slo", s, "--plan", p, "--at", now.Format(time.RFC3339), "--out", out, dir)
		if code != want.ExitCode {
			t.Fatalf("exit %d, live %d: %s", code, want.ExitCode, errOut)
		}
		got, err := results.Dir(out).ReadReport()
		if err != nil {
			t.Fatal(err)
		}
		// Waiver internals (file lines) aside, JSON round trip of want.
		wb, _ := json.Marshal(want.Verdicts)
		var wantV []slo.Verdict
		json.Unmarshal(wb, &wantV)
		if !reflect.DeepEqual(got.Verdicts, wantV) || got.Status != want.Status {
			t.Fatalf("slow=%d: check differs from the live verdict\n got %+v\nwant %+v", slow, got.Verdicts, wantV)
		}
		if _, err := os.Stat(filepath.Join(out, results.JUnitFile)); err != nil {
			t.Fatal("no junit.xml")
		}
		// Without --at, check judges waivers when the run was judged
		// (DIR/verdict.json), not today.
		vb, _ := os.ReadFile(filepath.Join(out, results.VerdictFile))
		os.WriteFile(filepath.Join(dir, results.VerdictFile), vb, 0o644)
		if code, stdout, _ := tgCmd("check", "--slo", s, "--plan", p, dir); code != want.ExitCode ||
			!strings.Contains(stdout, "waivers judged at 2026-06-01T00:00:00Z") {
			t.Fatalf("judge time from verdict.json: %d\n%s", code, stdout)
		}
	}
}
