package prompts

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

// Fuzz tests for every parser: none may panic, every failure is an *Error
// naming the file and a line within it, and whatever parses is usable.
// Run each with, e.g., go test ./prompts -run '^$' -fuzz FuzzMixYAML -fuzztime 20s

func checkErr(t *testing.T, err error, file string, data []byte) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%T %v is not an *Error", err, err)
	}
	// YAML also breaks lines at a lone CR: count both as an upper bound.
	lines := bytes.Count(data, []byte{'\n'}) + bytes.Count(data, []byte{'\r'}) + 1
	if e.File != file || e.Line < 0 || e.Line > lines+1 || e.Error() == "" {
		t.Fatalf("bad location in %q (file has at most %d lines)", e.Error(), lines)
	}
}

func addFile(f *testing.F, path string) {
	if b, err := os.ReadFile(path); err == nil {
		f.Add(b)
	}
}

func FuzzMixYAML(f *testing.F) {
	for _, name := range []string{"chat", "rag", "longgen", "sessions", "production", "trace-azure", "trace-mooncake", "agent", "trace-weka", "trace-dynamo", "trace-otel"} {
		addFile(f, "../testdata/mixes/"+name+".yaml")
	}
	f.Add([]byte("kind: Mix\nclasses:\n  - {name: a, weight: 2, source: {type: synthetic, input_tokens: {dist: lognormal, mean: 50, stddev: 20}}, max_tokens: {dist: uniform, min: 1, max: 9}}\n"))
	f.Add([]byte("kind: Mix\nx: &a {dist: normal, mean: 5, stddev: 1}\nclasses: [{name: s, source: {type: synthetic, input_tokens: *a}, sessions: {turns: *a, think_time: 1s}}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseMix("mix.yaml", data, LoadOptions{})
		if err != nil {
			checkErr(t, err, "mix.yaml", data)
			return
		}
		// Draw from mixes that need no files and are small enough to be quick.
		for _, c := range m.classes {
			if c.srcType != SourceSynthetic || c.input.max > 5000 || (c.prefix != nil && c.prefix.tokens*max(1, c.prefix.prefixes) > 20000) {
				return
			}
		}
		if err := m.load(""); err != nil {
			checkErr(t, err, "mix.yaml", data)
			return
		}
		src := m.Source(m.Seed())
		for i := 0; i < 10; i++ {
			p, err := src.Next()
			if err != nil {
				t.Fatal(err)
			}
			for turn := 0; p != nil && turn < 3; turn++ {
				if p.InputTokens < 1 || (p.Text == "" && len(p.Messages) == 0) || p.MaxTokens < 0 {
					t.Fatalf("bad prompt %+v", p)
				}
				if p.FollowUp == nil {
					break
				}
				p = p.FollowUp("ok")
			}
		}
		_ = m.Describe()
		_ = m.Hash()
	})
}

func FuzzChatJSONL(f *testing.F) {
	addFile(f, "../testdata/mixes/chat.jsonl")
	f.Add([]byte(`{"prompt": "x", "max_completion_tokens": 3, "stop": ["\n"]}`))
	f.Add([]byte("{\"messages\": [{\"role\": \"user\", \"content\": null}]}\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		convs, err := parseChatJSONL("p.jsonl", bytes.NewReader(data), 0)
		if err != nil {
			checkErr(t, err, "p.jsonl", data)
			return
		}
		for _, c := range convs {
			if (len(c.messages) == 0) == (c.text == "") || c.maxTokens < 0 || c.maxTokens > tokenLimit {
				t.Fatalf("bad record %+v", c)
			}
			for _, m := range c.messages {
				if !chatRoles[m.Role] {
					t.Fatalf("role %q", m.Role)
				}
			}
		}
	})
}

func FuzzShareGPT(f *testing.F) {
	addFile(f, "../testdata/mixes/sharegpt.json")
	f.Add([]byte(`{"conversations": [{"from": "human", "value": "a"}, {"from": "gpt", "value": "b"}]}` + "\n" + `{"id": 5}`))
	f.Add([]byte("\xef\xbb\xbf[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		convs, _, err := parseShareGPT("s.json", bytes.NewReader(data), 0)
		err = locateShareGPT("s.json", err, func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			checkErr(t, err, "s.json", data)
			return
		}
		for _, c := range convs {
			for _, m := range c.messages {
				if m.Role != "user" && m.Role != "assistant" && m.Role != "system" {
					t.Fatalf("role %q", m.Role)
				}
			}
		}
	})
}

// fuzzTrace checks parsed rows and replays them.
func fuzzTrace(t *testing.T, typ string, rows []traceRow, t0 int64) {
	tok, _ := NewTokenizer(DefaultEncoding)
	c := &class{name: "t", key: 1, srcType: typ, st: lookupSource(typ), blockTokens: 512}
	m := &Mix{tok: tok, timeScale: 0.5, classes: []*class{c}, trace: true}
	for _, r := range rows {
		if r.in < 0 || r.out < 0 || r.in > tokenLimit || r.out > tokenLimit {
			t.Fatalf("bad row %+v", r)
		}
	}
	if err := m.buildTrace(c, rows, t0); err != nil {
		return
	}
	total := 0
	for _, r := range c.rows {
		total += r.in
	}
	if total > 200000 {
		return
	}
	m.corp = corpusFor(tok)
	src := m.Source(1)
	var last time.Duration
	for {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if p.At < last || p.At < 0 || p.InputTokens < 1 || p.MaxTokens < 1 || p.Text == "" {
			t.Fatalf("bad prompt at %v after %v: %+v", p.At, last, p)
		}
		last = p.At
	}
}

func FuzzAzureCSV(f *testing.F) {
	addFile(f, "../testdata/mixes/azure-conv-excerpt.csv")
	f.Add([]byte("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00.009930+00:00,5,6\n2024-05-10T00:00:01Z,1,1\n12.5,3.0,4\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseAzureTrace("t.csv", bytes.NewReader(data), 0)
		if err != nil {
			checkErr(t, err, "t.csv", data)
			return
		}
		fuzzTrace(t, SourceAzure, rows, math.MaxInt64)
	})
}

func FuzzBurstGPTCSV(f *testing.F) {
	addFile(f, "../testdata/mixes/burstgpt-excerpt.csv")
	f.Add([]byte("Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n1.5,7,2.0,GPT-4,10,0,10,API log\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, model := range []string{"", "GPT-4"} {
			rows, _, t0, err := parseBurstGPT("b.csv", bytes.NewReader(data), 0, model)
			if err != nil {
				checkErr(t, err, "b.csv", data)
				continue
			}
			for _, r := range rows {
				if r.tsNs < t0 {
					t.Fatalf("row before t0")
				}
			}
			fuzzTrace(t, SourceBurstGPT, rows, t0)
		}
	})
}

func FuzzMooncake(f *testing.F) {
	addFile(f, "../testdata/mixes/mooncake-excerpt.jsonl")
	f.Add([]byte(`{"timestamp": 27482.5, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, -1]}` + "\n" + `{"timestamp": 1, "input_length": 1, "output_length": 1, "hash_ids": null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseMooncake("m.jsonl", bytes.NewReader(data), 0)
		if err != nil {
			checkErr(t, err, "m.jsonl", data)
			return
		}
		if strings.Count(string(data), "\n")+1 < len(rows) {
			t.Fatal("more rows than lines")
		}
		fuzzTrace(t, SourceMooncake, rows, math.MaxInt64)
	})
}

// fuzzSessions loads data as a session trace of type typ and replays
// every session it yields.
func fuzzSessions(t *testing.T, typ string, data []byte) {
	dir := t.TempDir()
	path := dir + "/t.jsonl"
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	tok, _ := NewTokenizer(DefaultEncoding)
	c := &class{name: "t", key: 1, srcType: typ, st: lookupSource(typ), path: path, agent: &agentSpec{idleCap: DefaultIdleGapCap, cacheBust: true, randomStart: len(data)%2 == 0}}
	m := &Mix{tok: tok, timeScale: 0.5, classes: []*class{c}, trace: c.st.trace, cum: []float64{1}}
	if err := c.st.load(m, c); err != nil {
		checkErr(t, err, path, data)
		return
	}
	total := 0
	for _, s := range c.sessions {
		for _, cl := range s.calls {
			total += cl.in
		}
	}
	if total > 200000 {
		return
	}
	m.corp = corpusFor(tok)
	src := m.Source(1)
	var last time.Duration
	for i := 0; i < len(c.sessions); i++ {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if p.Graph == nil || p.At < last {
			t.Fatalf("bad session %+v after %v", p, last)
		}
		if err := p.Graph.Validate(); err != nil {
			t.Fatal(err)
		}
		for _, cl := range p.Graph.Calls {
			if len(cl.Prompt.Messages) == 0 || cl.Prompt.Call != cl.ID {
				t.Fatalf("bad call %+v", cl)
			}
			for _, e := range cl.After {
				if e.Delay < 0 || e.Delay > DefaultIdleGapCap {
					t.Fatalf("delay %v", e.Delay)
				}
			}
		}
		last = p.At
	}
}

func FuzzWeka(f *testing.F) {
	addFile(f, "../testdata/mixes/weka-sample.jsonl")
	f.Add([]byte(`{"id":"a","block_size":8,"requests":[{"t":5,"type":"subagent","agent_id":"x","requests":[{"t":1,"type":"n","in":3,"out":1,"hash_ids":[18446744073709551615,-3]}]},{"t":0,"type":"s","in":9,"out":2,"stop":"tool_use"}]}`))
	f.Add([]byte("{\"id\":\"a\",\n\"requests\":[{\"t\":0,\"type\":\"n\",\"in\":1e3,\"out\":1}]}\n[1]"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzSessions(t, SourceWeka, data) })
}

func FuzzDynamo(f *testing.F) {
	addFile(f, "../testdata/mixes/dynamo-sample.jsonl")
	f.Add([]byte(`{"event_type":"request_end","event_time_unix_ms":9,"agent_context":{"session_id":"s","trajectory_id":"b","parent_trajectory_id":"b"},"request":{"request_received_ms":1,"input_tokens":3,"output_tokens":1}}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzSessions(t, SourceDynamo, data) })
}

func FuzzOTel(f *testing.F) {
	addFile(f, "../testdata/mixes/otel-sample.jsonl")
	f.Add([]byte(`{"trace_id":"x","spans":[{"start_time":1000,"end_time":2000,"attributes":{"gen_ai.input.messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"gen_ai.usage.output_tokens":2}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzSessions(t, SourceOTel, data) })
}
