package prompts

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// graphShape writes a graph's structure: each call with its lane, its
// turn, its lengths and what it waits for.
func graphShape(g *Graph) string {
	var b strings.Builder
	for i, c := range g.Calls {
		fmt.Fprintf(&b, "%s", c.ID)
		if c.Agent != "" {
			fmt.Fprintf(&b, "@%s", c.Agent)
		}
		if c.Background {
			b.WriteString("[bg]")
		}
		if c.Warmup {
			b.WriteString("[warmup]")
		}
		fmt.Fprintf(&b, " t%d %d/%d", c.Prompt.Turn, c.Prompt.InputTokens, c.Prompt.MaxTokens)
		if c.Offset > 0 {
			fmt.Fprintf(&b, " +%v", c.Offset)
		}
		for _, e := range c.After {
			fmt.Fprintf(&b, " <-%s:%s+%v", g.Calls[e.From].ID, e.On, e.Delay)
			if e.Tool {
				b.WriteString("(tool)")
			}
		}
		if !reflect.DeepEqual(c.Prompt.After, g.AfterIDs(i)) || c.Prompt.Call != c.ID || c.Prompt.Session != g.ID {
			fmt.Fprintf(&b, " BAD prompt fields %q %q %q", c.Prompt.After, c.Prompt.Call, c.Prompt.Session)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// drawAll loads a mix and draws n sessions (all of a trace when n is 0).
func drawAll(t *testing.T, path string, opts LoadOptions, n int) (*Mix, []*Prompt) {
	t.Helper()
	m, err := LoadMix(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	src := m.Source(m.Seed())
	var out []*Prompt
	for n == 0 || len(out) < n {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if p.Graph == nil {
			t.Fatalf("prompt %s has no graph", p.ID)
		}
		if err := p.Graph.Validate(); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return m, out
}

func TestWekaSample(t *testing.T) {
	t.Parallel()
	_, ps := drawAll(t, "../testdata/mixes/trace-weka.yaml", LoadOptions{}, 3)
	var got []string
	for _, p := range ps {
		g := p.Graph
		got = append(got, fmt.Sprintf("%s %s at %v promised %d/%d\n%s", g.ID, g.Trace, p.At, g.PromisedPrefixTokens, g.PromptTokens, graphShape(g)))
	}
	want := []string{
		`weka-0 weka-sample.jsonl#trace_a at 0s promised 576/1230
0 t0 200/40
1 t1 300/30 <-0:end+1s(tool)
agent_007.0@agent_007 t0 150/20 <-1:end+1s
agent_007.1@agent_007 t1 180/25 <-agent_007.0:end+500ms(tool)
2 t2 400/50 <-1:end+500ms(tool) <-agent_007.1:end+0s
`,
		// The background child gates nothing; think_time 120 s is capped
		// at the mix's idle_gap_cap.
		`weka-1 weka-sample.jsonl#trace_b at 0s promised 128/388
0 t0 128/16
bg_1.0@bg_1[bg] t0 100/10 <-0:end+400ms
1 t1 160/20 <-0:end+10s(tool)
`,
		`weka-2 weka-sample.jsonl#trace_c at 0s promised 0/128
0 t0 128/8
`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The models: table picks the model sent.
	for _, c := range ps[0].Graph.Calls {
		want := "big"
		if c.Agent != "" {
			want = "small"
		}
		if c.Prompt.Params["model"] != want || c.Prompt.Params["ignore_eos"] != true {
			t.Errorf("call %s params %v, want model %s and ignore_eos", c.ID, c.Prompt.Params, want)
		}
	}
}

// blockPrefix is the text of a call's first k hash blocks as the source
// builds it.
func blockPrefix(m *Mix, c *class, seed int64, session string, hashes []uint64, bt int) string {
	var b strings.Builder
	bs := seed ^ int64(c.key) ^ int64(fnv64(session))
	for _, h := range hashes {
		m.corp.write(&b, m.corp.blockSpan(bs, int64(h), bt), bt)
	}
	return b.String()
}

func TestWekaPrefixSharing(t *testing.T) {
	t.Parallel()
	m, ps := drawAll(t, "../testdata/mixes/trace-weka.yaml", LoadOptions{}, 3)
	calls := ps[0].Graph.Calls
	text := func(i int) string { return calls[i].Prompt.Messages[0].Content }
	marker := text(0)[:len("[rid:000000000000]\n\n")]
	if !strings.HasPrefix(marker, "[rid:") || !strings.HasSuffix(marker, "]\n\n") {
		t.Fatalf("no cache-bust marker: %q", marker)
	}
	three := marker + blockPrefix(m, m.classes[0], m.Seed(), "trace_a", []uint64{1, 2, 3}, 64)
	four := marker + blockPrefix(m, m.classes[0], m.Seed(), "trace_a", []uint64{1, 2, 3, 4}, 64)
	if !strings.HasPrefix(text(1), four) || !strings.HasPrefix(text(4), four) || !strings.HasPrefix(text(0), three) {
		t.Fatal("calls sharing leading hash ids do not share their blocks' text")
	}
	// Call 0 has 200 tokens: three blocks and 8 fresh tokens, which call 1
	// (block 4 there) does not share.
	if strings.HasPrefix(text(1), text(0)) {
		t.Error("call 1 repeats call 0's fresh tail")
	}
	// Local scope: trace_b's block 1 is not trace_a's.
	b0 := ps[1].Graph.Calls[0].Prompt.Messages[0].Content
	if strings.HasPrefix(b0[len(marker):], three[len(marker):len(marker)+20]) {
		t.Error("local hash ids are shared across traces")
	}
	if ps[0].Graph.Calls[0].Prompt.Messages[0].Content[:len(marker)] == b0[:len(marker)] {
		t.Error("two sessions have the same cache-bust marker")
	}
}

func TestDynamoSample(t *testing.T) {
	t.Parallel()
	_, ps := drawAll(t, "../testdata/mixes/trace-dynamo.yaml", LoadOptions{}, 0)
	var got []string
	for _, p := range ps {
		g := p.Graph
		got = append(got, fmt.Sprintf("%s %s at %v promised %d/%d\n%s", g.ID, g.Trace, p.At, g.PromisedPrefixTokens, g.PromptTokens, graphShape(g)))
	}
	want := []string{
		// r2 starts while r3 runs (on its start); r4 joins it; the tool
		// events between r1 and r3 make that gap a tool's.
		`dynamo-0 dynamo-sample.jsonl#sess-1 at 0s promised 320/640
r1 t0 128/16
r3 t1 192/24 <-r1:end+800ms(tool)
r2@t-sub t0 64/8 <-r3:start+200ms
r4 t2 256/32 <-r3:end+500ms <-r2:end+1s
`,
		// s2 ends after s3 began: nobody joins it.
		`dynamo-1 dynamo-sample.jsonl#sess-2 at 10s promised 64/270
s1 t0 100/10
s2@u-bg[bg] t0 50/5 <-s1:end+500ms
s3 t1 120/12 <-s1:end+700ms
`,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestDynamoHashesAboveFloat(t *testing.T) {
	t.Parallel()
	// 2^53+1 and 2^64-1 read as floats would collide with neighbours.
	m, err := LoadMix("../testdata/mixes/trace-dynamo.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var hs []uint64
	for _, cl := range m.classes[0].sessions[0].calls {
		hs = append(hs, cl.hashes...)
	}
	want := []uint64{14879255164371896291, 274632075616497421, 14879255164371896291, 274632075616497421, 18446744073709551615, 9007199254740993, 14879255164371896291, 274632075616497421, 18446744073709551615, 42}
	if !reflect.DeepEqual(hs, want) {
		t.Errorf("hashes %v, want %v", hs, want)
	}
}

func TestOTelSample(t *testing.T) {
	t.Parallel()
	_, ps := drawAll(t, "../testdata/mixes/trace-otel.yaml", LoadOptions{}, 0)
	var got []string
	for _, p := range ps {
		got = append(got, fmt.Sprintf("%s at %v\n%s", p.Graph.ID, p.At, graphShape(p.Graph)))
	}
	want := []string{
		// a2 quotes a1's answer (causal); the execute_tool span between
		// them makes the gap a tool's.
		"otel-0 at 0s\na1 t0 10/5\na2 t1 20/3 <-a1:end+1s(tool)\n",
		// b2 does not quote b1: it waits for the span that ended last.
		"otel-1 at 10s\nb1 t0 4/2\nb2 t1 6/3 <-b1:end+500ms\n",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	a2 := ps[0].Graph.Calls[1].Prompt.Messages
	if len(a2) != 3 || a2[1] != (Message{Role: "assistant", Content: "hi, which file?"}) || a2[2].Content != "main.go" {
		t.Errorf("a2 does not send its recorded messages: %+v", a2)
	}
}

func TestAgentSource(t *testing.T) {
	t.Parallel()
	m, ps := drawAll(t, "../testdata/mixes/agent.yaml", LoadOptions{}, 40)
	subs, bgs, joins := 0, 0, 0
	for _, p := range ps {
		g := p.Graph
		lanes := map[string][]int{}
		for i, c := range g.Calls {
			lanes[c.Agent] = append(lanes[c.Agent], i)
			if len(c.After) > 1 {
				joins++
			}
			if c.Agent != "" && c.Prompt.Turn == 0 {
				subs++
				if c.Background {
					bgs++
				}
			}
			for _, e := range c.After {
				if e.Tool && (e.Delay < 50*time.Millisecond || e.Delay > 5*time.Second) {
					t.Errorf("%s/%s: tool gap %v outside the mix's bounds", g.ID, c.ID, e.Delay)
				}
			}
		}
		// Each lane's calls extend one history: call k's messages start
		// with call k-1's, byte for byte.
		for _, idx := range lanes {
			for k := 1; k < len(idx); k++ {
				prev, cur := g.Calls[idx[k-1]].Prompt.Messages, g.Calls[idx[k]].Prompt.Messages
				if len(cur) != len(prev)+2 || !reflect.DeepEqual(cur[:len(prev)], prev) {
					t.Fatalf("%s: call %s does not extend %s", g.ID, g.Calls[idx[k]].ID, g.Calls[idx[k-1]].ID)
				}
			}
		}
	}
	if subs == 0 || bgs == 0 || joins == 0 || bgs == subs {
		t.Errorf("over 40 sessions: %d subagents, %d background, %d joins; want some of each", subs, bgs, joins)
	}
	if !m.HasGraphs() || m.IsTrace() {
		t.Error("the agent source is an endless session source")
	}
}

// A weka trace is a dataset of sessions: endless, in the class's order.
func TestWekaCycles(t *testing.T) {
	t.Parallel()
	m, ps := drawAll(t, "../testdata/mixes/trace-weka.yaml", LoadOptions{}, 7)
	if m.IsTrace() {
		t.Fatal("weka sessions carry no start time; the mix is not a timed trace")
	}
	var got []string
	for _, p := range ps {
		got = append(got, strings.TrimPrefix(p.Graph.Trace, "weka-sample.jsonl#"))
	}
	if want := "trace_a trace_b trace_c trace_a trace_b trace_c trace_a"; strings.Join(got, " ") != want {
		t.Errorf("sequential order gives %v, want %s", got, want)
	}
	// A session drawn again is a new session: its own id and marker.
	a, b := ps[0].Graph, ps[3].Graph
	if a.ID == b.ID || a.Calls[0].Prompt.Messages[0].Content == b.Calls[0].Prompt.Messages[0].Content {
		t.Error("a recycled trace repeats its session id or marker")
	}
}

// TestSessionDeterminism: two sources with one seed give the same
// sessions byte for byte; another seed changes the text, not the shape.
func TestSessionDeterminism(t *testing.T) {
	t.Parallel()
	for _, f := range []string{"trace-weka", "trace-dynamo", "trace-otel", "agent"} {
		path := "../testdata/mixes/" + f + ".yaml"
		_, a := drawAll(t, path, LoadOptions{}, 6)
		_, b := drawAll(t, path, LoadOptions{}, 6)
		ja, _ := json.Marshal(graphsOf(a))
		jb, _ := json.Marshal(graphsOf(b))
		if string(ja) != string(jb) {
			t.Errorf("%s: two sources with one seed differ", f)
		}
		_, c := drawAll(t, path, LoadOptions{Seed: 99}, 6)
		jc, _ := json.Marshal(graphsOf(c))
		if string(jc) == string(ja) && f != "trace-otel" {
			t.Errorf("%s: another seed gives the same text", f)
		}
	}
}

func graphsOf(ps []*Prompt) []*Graph {
	out := make([]*Graph, len(ps))
	for i, p := range ps {
		out[i] = p.Graph
	}
	return out
}

func TestRandomStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var reqs []string
	for k := 0; k < 6; k++ {
		reqs = append(reqs, fmt.Sprintf(`{"t":%d,"type":"n","in":100,"out":10,"hash_ids":[1,%d],"api_time":1}`, 2*k, k+2))
	}
	trace := `{"id":"x","block_size":64,"requests":[` + strings.Join(reqs, ",") + "]}\n"
	writeFile(t, filepath.Join(dir, "t.json"), trace)
	writeFile(t, filepath.Join(dir, "mix.yaml"), "kind: Mix\nclasses:\n  - name: w\n    source: {type: weka, path: t.json, random_start: true}\n")
	starts := map[string]bool{}
	for seed := int64(1); seed <= 12; seed++ {
		_, ps := drawAll(t, filepath.Join(dir, "mix.yaml"), LoadOptions{Seed: seed}, 1)
		g := ps[0].Graph
		if !g.Calls[0].Warmup || g.Calls[0].ID != "0" || len(g.Calls) < 2 || g.Calls[1].ID != strconv.Itoa(7-len(g.Calls)) {
			t.Fatalf("seed %d: want a warm-up then a suffix of the lane:\n%s", seed, graphShape(g))
		}
		if e := g.Calls[1].After; len(e) != 1 || e[0].From != 0 {
			t.Fatalf("seed %d: the first replayed call does not follow the warm-up:\n%s", seed, graphShape(g))
		}
		starts[g.Calls[1].ID] = true
	}
	if len(starts) < 2 {
		t.Errorf("12 seeds start at %v only", starts)
	}
}

func writeFile(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestSessionTraceErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, typ, data, extra, want string
	}{
		{"weka bad type", "weka", `{"id":"a","requests":[{"t":0,"type":"x","in":1,"out":1}]}`, "", `t.jsonl:1: requests[0].type: trace "a": "x": want n, s or subagent`},
		{"weka second line", "weka", "{\"id\":\"a\",\"requests\":[{\"t\":0,\"type\":\"n\",\"in\":1,\"out\":1}]}\n{\"id\":\"b\",\"requests\":[{\"type\":\"n\",\"in\":1,\"out\":1}]}", "", `t.jsonl:2: requests[0].t: trace "b": missing`},
		{"weka scope", "weka", `{"id":"a","hash_id_scope":"galaxy","requests":[]}`, "", `t.jsonl:1: hash_id_scope: "galaxy": want local or global`},
		{"weka hash", "weka", `{"id":"a","requests":[{"t":0,"type":"n","in":1,"out":1,"hash_ids":[1.5]}]}`, "", `t.jsonl:1: requests[0].hash_ids: trace "a": id 0: "1.5" is not a whole number of 64 bits`},
		{"weka model", "weka", `{"id":"a","requests":[{"t":0,"type":"n","model":"m1","in":1,"out":1}]}`, ", models: {m2: x}", `t.jsonl:1: model: model "m1" of session "a" is not in the mix's models: table (add it, or a "*" entry)`},
		{"dynamo no context", "dynamo", `{"timestamp":0,"event":{"event_type":"request_end","event_time_unix_ms":5,"request":{}}}`, "", `t.jsonl:1: agent_context.session_id: missing: a session replay needs every record's agent_context`},
		{"dynamo output", "dynamo", "\n" + `{"event_type":"request_end","event_time_unix_ms":5,"agent_context":{"session_id":"s"},"request":{"request_received_ms":1,"input_tokens":3}}`, "", `t.jsonl:2: request.output_tokens missing`},
		{"otel messages", "otel", `{"trace_id":"x","spans":[{"start_time":"2024-01-01T00:00:00Z","end_time":"2024-01-01T00:00:01Z","attributes":{"gen_ai.usage.output_tokens":3}}]}`, "", `t.jsonl:1: spans[0].attributes.gen_ai.input.messages: missing or empty: the replay sends the recorded input`},
		{"otel not json", "otel", "{\"trace_id\":\"x\",\"spans\":[]}\n{nope", "", `t.jsonl:2: not JSON: invalid character 'n' looking for beginning of object key string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "t.jsonl"), tc.data)
			writeFile(t, filepath.Join(dir, "mix.yaml"), "kind: Mix\nclasses:\n  - name: c\n    source: {type: "+tc.typ+", path: t.jsonl"+tc.extra+"}\n")
			_, err := LoadMix(filepath.Join(dir, "mix.yaml"), LoadOptions{})
			if err == nil {
				t.Fatal("no error")
			}
			if got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""); got != tc.want {
				t.Errorf("error\n  %s\nwant\n  %s", got, tc.want)
			}
		})
	}
}

// A trace with hash ids promises a prefix, 0 included; one without
// (recorded messages) promises nothing, so figures leave it out.
func TestGraphHashIDs(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{"../testdata/mixes/trace-weka.yaml": true, "../testdata/mixes/trace-dynamo.yaml": true,
		"../testdata/mixes/trace-otel.yaml": false} {
		_, ps := drawAll(t, path, LoadOptions{}, 3)
		for _, p := range ps {
			if p.Graph.HashIDs != want {
				t.Errorf("%s session %s: HashIDs %v, want %v", path, p.Graph.ID, p.Graph.HashIDs, want)
			}
		}
	}
}
