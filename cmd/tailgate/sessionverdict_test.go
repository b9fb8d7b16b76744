package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// agentMix is a short agent workload: two or three turns with tool gaps
// of a few tens of milliseconds, and a subagent now and then.
const agentMix = `kind: Mix
name: agent-short
seed: 5
classes:
  - name: agent
    source:
      type: agent
      input_tokens: {dist: uniform, min: 40, max: 80}
      turn_tokens: {dist: uniform, min: 8, max: 16}
      output_tokens: {dist: uniform, min: 3, max: 5}
      turns: {dist: uniform, min: 2, max: 3}
      tool_gap: {dist: uniform, min: 20ms, max: 40ms}
      subagent_probability: 0.5
      subagent_width: {dist: uniform, min: 1, max: 2}
      subagent_turns: {dist: uniform, min: 1, max: 1}
    params: {ignore_eos: true}
`

// One session verdict: the same agent sessions get the same
// session_duration and session_success verdicts, and the same exit code,
// from run --slo, validate, check of each directory and merge of two
// shards — once passing and once failing the session objective.
func TestSessionVerdictAcrossCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := fastSim(t)
	for _, c := range []struct {
		name      string
		threshold string
		code      int
		result    string
	}{{"pass", "30s", slo.ExitOK, "PASS"}, {"fail", "1ms", slo.ExitFailed, "FAIL"}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			mix, sloFile, plan := filepath.Join(dir, "mix.yaml"), filepath.Join(dir, "slo.yaml"), filepath.Join(dir, "plan.yaml")
			write := func(p, s string) {
				if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write(mix, agentMix)
			write(sloFile, "kind: SLO\nname: agents\nowner: team\nobjectives:\n"+
				"  - {name: sessions-fast, metric: session_duration, threshold: "+c.threshold+", target: 50%}\n"+
				"  - {name: sessions-ok, metric: session_success, threshold: 50%}\n"+
				"  - {name: errors, metric: error_rate, threshold: 50%}\n")
			write(plan, "kind: Plan\nname: p\ntarget: "+srv.URL+"\nmodel: sim-llama-8b\nslo: slo.yaml\nmix: mix.yaml\nseed: 3\n"+
				"stages:\n  - {name: main, rate: 8, duration: 2s, arrival: constant}\n")
			load := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--mix", mix, "--seed", "3", "--rate", "8", "--arrival", "constant",
				"--duration", "2s", "--metrics-url", "off", "--nvml", "off", "--self-check", "warn", "--no-progress"}

			type outcome struct {
				cmd  string
				code int
				dir  string
			}
			var got []outcome
			runDir := filepath.Join(dir, "run")
			code, stdout, stderr := tgCmd(append([]string{"run", "--slo", sloFile, "--out", runDir}, load...)...)
			got = append(got, outcome{"run", code, runDir})
			if code != c.code {
				t.Fatalf("run: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			if !strings.Contains(stdout, "sessions") {
				t.Errorf("run prints no session figures:\n%s", stdout)
			}

			valDir := filepath.Join(dir, "validate")
			code, stdout, stderr = tgCmd("validate", "--plan", plan, "--out", valDir, "--metrics-url", "off", "--nvml", "off", "--self-check", "warn", "--no-progress")
			got = append(got, outcome{"validate", code, valDir})
			if code != c.code {
				t.Errorf("validate: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}

			// Two shards of one schedule, started together, merged.
			start := time.Now().Add(500 * time.Millisecond).UTC().Format(time.RFC3339Nano)
			var shards []string
			done := make(chan error, 2)
			for i := range 2 {
				sd := filepath.Join(dir, "shard"+string(rune('0'+i)))
				shards = append(shards, sd)
				go func() {
					code, stdout, stderr := tgCmd(append([]string{"run", "--out", sd, "--shard", string(rune('0'+i)) + "/2", "--start-at", start}, load...)...)
					if code != slo.ExitOK {
						done <- &shardError{code, stdout + stderr}
						return
					}
					done <- nil
				}()
			}
			for range 2 {
				if err := <-done; err != nil {
					t.Fatalf("shard run: %v", err)
				}
			}
			merged := filepath.Join(dir, "merged")
			code, stdout, stderr = tgCmd(append([]string{"merge", "--slo", sloFile, "--out", merged}, shards...)...)
			got = append(got, outcome{"merge", code, merged})
			if code != c.code {
				t.Errorf("merge: exit %d, want %d\n%s\n%s", code, c.code, stdout, stderr)
			}
			var sessions [2]int64
			for i, sd := range shards {
				sessions[i] = readSummary(t, sd).Summary.Sessions.Count
			}
			if m := readSummary(t, merged).Summary.Sessions; m == nil || m.Count != sessions[0]+sessions[1] || sessions[0] == 0 || sessions[1] == 0 {
				t.Errorf("merged sessions %+v, shards %v", m, sessions)
			}

			for _, o := range got {
				for _, name := range []string{"sessions-fast", "sessions-ok"} {
					if r := objectiveResult(t, o.dir, name); (name == "sessions-fast" && r != c.result) || (name == "sessions-ok" && r != "PASS") {
						t.Errorf("%s: %s is %s", o.cmd, name, r)
					}
				}
				code, stdout, stderr := tgCmd("check", "--slo", sloFile, o.dir)
				if code != o.code {
					t.Errorf("%s exited %d, check of its directory %d\n%s\n%s", o.cmd, o.code, code, stdout, stderr)
				}
			}
		})
	}
}

type shardError struct {
	code int
	out  string
}

func (e *shardError) Error() string { return "exit " + string(rune('0'+e.code)) + "\n" + e.out }

// objectiveResult is the result verdict.json gives an objective (in any
// stage), or "" when it has none.
func objectiveResult(t *testing.T, dir, name string) string {
	t.Helper()
	rep, err := results.Dir(dir).ReadReport()
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range rep.Verdicts {
		if v.Objective == name {
			return string(v.Result)
		}
	}
	return ""
}
