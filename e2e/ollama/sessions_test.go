package ollama

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/ollamatest"
	"github.com/tailgate-llm/tailgate/prompts"
)

// threeSessions is a weka (cc-traces) trace of three sessions: s1 with a
// tool gap, a subagent and a join; s2 with a tool gap; s3 one call.
const threeSessions = `{"id":"s1","models":["main"],"block_size":16,"requests":[{"t":0.0,"type":"s","model":"main","in":48,"out":6,"hash_ids":[1,2,3],"stop":"tool_use","api_time":0.5},{"t":0.8,"type":"subagent","agent_id":"sub1","status":"completed","requests":[{"t":0.1,"type":"n","model":"main","in":32,"out":5,"hash_ids":[50,51],"stop":"end_turn","api_time":0.4}]},{"t":1.2,"type":"s","model":"main","in":64,"out":6,"hash_ids":[1,2,3,4],"input_types":["tool_result"],"stop":"end_turn","api_time":0.5}]}
{"id":"s2","models":["main"],"block_size":16,"requests":[{"t":0.0,"type":"s","model":"main","in":32,"out":5,"hash_ids":[7,8],"stop":"tool_use","api_time":0.4},{"t":0.7,"type":"s","model":"main","in":48,"out":5,"hash_ids":[7,8,9],"stop":"end_turn","api_time":0.4}]}
{"id":"s3","models":["main"],"block_size":16,"requests":[{"t":0.0,"type":"s","model":"main","in":32,"out":4,"hash_ids":[20,21],"stop":"end_turn","api_time":0.3}]}
`

// tinyTokens is how Tiny's tokenizer counts text: its words are reachable
// by no merge, so every byte is a token and a space is "▁" (three bytes).
func tinyTokens(s string) int { return len(s) + 2*strings.Count(s, " ") }

// TestOllamaSessionTrace: a three-session agent trace with one subagent
// replays against Ollama whole: every call answered, each sent only after
// the calls it waits for ended plus their recorded gap, the join after
// both its parent and the subagent, and each call's prompt_eval_count the
// prompt tailgate built (the same bytes the mix draws again) plus a
// constant of the chat template per message.
func TestOllamaSessionTrace(t *testing.T) {
	s := start(t, ollamatest.Options{NumParallel: 2})
	dir := t.TempDir()
	write(t, filepath.Join(dir, "trace.jsonl"), threeSessions)
	mix := filepath.Join(dir, "mix.yaml")
	write(t, mix, "kind: Mix\nname: three\nseed: 1\nclasses:\n  - name: agent\n"+
		"    source: {type: weka, path: trace.jsonl, order: sequential, idle_gap_cap: 2s, models: {main: tiny}}\n")
	out := filepath.Join(dir, "run")
	code, stdout, stderr := tailgate(t, "run", "--api", "ollama-chat", "--target", s.URL, "--model", ollamatest.Tiny, "--mix", mix,
		"--concurrency", "1", "--requests", "3", "--duration", "2m", "--self-check", "warn", "--no-progress", "--out", out)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "sessions 3  ok 3  failed 0") {
		t.Errorf("the summary does not say three sessions completed:\n%s", stdout)
	}

	type rec struct {
		Session      string   `json:"session"`
		Call         string   `json:"call"`
		After        []string `json:"after"`
		Model        string   `json:"model"`
		IntendedUs   int64    `json:"intended_us"`
		SentUs       int64    `json:"sent_us"`
		EndUs        int64    `json:"end_us"`
		InputTokens  int      `json:"input_tokens"`
		OutputTokens int      `json:"output_tokens"`
		ErrorKind    string   `json:"error_kind"`
	}
	f, err := os.Open(filepath.Join(out, "requests.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	calls := map[string]map[string]rec{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var r rec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		if calls[r.Session] == nil {
			calls[r.Session] = map[string]rec{}
		}
		calls[r.Session][r.Call] = r
		n++
		if r.ErrorKind != "" || r.OutputTokens == 0 || r.Model != ollamatest.Tiny {
			t.Errorf("session %s call %s: %+v", r.Session, r.Call, r)
		}
	}
	if n != 6 || len(calls) != 3 {
		t.Fatalf("%d records of %d sessions, want 6 of 3", n, len(calls))
	}
	for id, cs := range calls {
		for cid, r := range cs {
			if r.SentUs < r.IntendedUs {
				t.Errorf("session %s call %s sent %d µs before its intended start %d", id, cid, r.SentUs, r.IntendedUs)
			}
			for _, a := range r.After {
				p, ok := cs[a]
				if !ok {
					t.Errorf("session %s call %s waits for %q, which has no record", id, cid, a)
					continue
				}
				if r.IntendedUs < p.EndUs {
					t.Errorf("session %s call %s due at %d µs, before %s ended at %d", id, cid, r.IntendedUs, a, p.EndUs)
				}
			}
		}
	}
	if j, ok := calls["agent-0"]["1"]; !ok || len(j.After) != 2 {
		t.Errorf("the join of session agent-0 waits for %v, want its parent and the subagent", j.After)
	}

	// The same sessions drawn again give the prompts that were sent.
	m, err := prompts.LoadMix(mix, prompts.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := m.Source(m.Seed())
	consts := map[string]int{}
	for range 3 {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || p.Graph == nil {
			t.Fatalf("drawing the trace again: %v", err)
		}
		for _, c := range p.Graph.Calls {
			r, ok := calls[p.Graph.ID][c.ID]
			if !ok {
				t.Errorf("session %s call %s drawn again has no record", p.Graph.ID, c.ID)
				continue
			}
			var roles []string
			built := 0
			for _, msg := range c.Prompt.Messages {
				roles = append(roles, msg.Role)
				built += tinyTokens(msg.Content)
			}
			key := strings.Join(roles, ",")
			d := r.InputTokens - built
			if d < 0 || d > 32*len(roles) {
				t.Errorf("session %s call %s: Ollama counted %d prompt tokens for %d built: the template adds %d", p.Graph.ID, c.ID, r.InputTokens, built, d)
			}
			if c0, ok := consts[key]; ok && c0 != d {
				t.Errorf("session %s call %s (%s): template constant %d, another call's %d", p.Graph.ID, c.ID, key, d, c0)
			}
			consts[key] = d
		}
	}
	t.Logf("template constants by roles: %v", consts)
}
