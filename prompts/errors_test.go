package prompts

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// Every malformed input fails at load, before any prompt is drawn, with an
// *Error that names the file, the line and the field.
func TestBadInput(t *testing.T) {
	t.Parallel()
	const synth = "    source: {type: synthetic, input_tokens: 10}\n"
	cases := []struct {
		name  string
		yaml  string
		files map[string]string
		want  string // the message, with the directory removed
	}{
		// The unclosed { is on line 3 (the YAML library says line 2).
		{"bad yaml", "kind: Mix\nclasses: [\n  {name: a\n", nil,
			"mix.yaml:3: bad YAML: did not find expected ',' or '}'"},
		{"tab indent", "kind: Mix\nclasses:\n\t- name: a\n", nil,
			"mix.yaml:3: bad YAML: found character that cannot start any token"},
		{"empty file", "", nil, "mix.yaml: empty file"},
		{"not a mapping", "- a\n- b\n", nil, "mix.yaml:1: want a mapping (key: value), got a list"},
		{"kind missing", "classes: []\n", nil, "mix.yaml:1: kind missing"},
		{"wrong kind", "kind: SLO\nclasses: []\n", nil, `mix.yaml:1: kind: want kind: Mix, got "SLO"`},
		{"unknown top field", "kind: Mix\nsead: 1\nclasses: []\n", nil,
			"mix.yaml:2: sead: unknown field (want one of kind, apiVersion, name, description, seed, tokenizer, template_tokens, time_scale, classes)\nmix.yaml:3: classes: no classes"},
		{"no classes", "kind: Mix\nclasses: []\n", nil, "mix.yaml:2: classes: no classes"},
		{"weights sum to zero", "kind: Mix\nclasses:\n  - name: a\n    weight: 0\n" + synth + "  - name: b\n    weight: 0\n" + synth, nil,
			"mix.yaml:3: classes: class weights sum to 0; want a positive sum"},
		{"negative weight", "kind: Mix\nclasses:\n  - name: a\n    weight: -2\n" + synth, nil,
			"mix.yaml:4: classes[0].weight: must not be negative"},
		{"weight not a number", "kind: Mix\nclasses:\n  - name: a\n    weight: lots\n" + synth, nil,
			`mix.yaml:4: classes[0].weight: "lots" is not a number`},
		{"typo in class field", "kind: Mix\nclasses:\n  - name: a\n    wieght: 2\n" + synth, nil,
			"mix.yaml:4: classes[0].wieght: unknown field (want one of name, weight, source, max_tokens, params, sessions, model, headers, accept_empty)"},
		{"unknown distribution", "kind: Mix\nclasses:\n  - name: a\n    source:\n      type: synthetic\n      input_tokens: {dist: gaussian, mean: 5}\n", nil,
			`mix.yaml:6: classes[0].source.input_tokens.dist: unknown distribution "gaussian" (want fixed, uniform, normal or lognormal)`},
		{"distribution parameter missing", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    max_tokens: {dist: normal, mean: 5}\n", nil,
			"mix.yaml:5: classes[0].max_tokens.stddev missing"},
		{"uniform min above max", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    max_tokens:\n      dist: uniform\n      min: 9\n      max: 3\n", nil,
			"mix.yaml:8: classes[0].max_tokens.max: max 3 is below min 9"},
		{"fractional tokens", "kind: Mix\nclasses:\n  - name: a\n    source: {type: synthetic, input_tokens: 10.5}\n", nil,
			"mix.yaml:4: classes[0].source.input_tokens: 10.5 is not a whole number"},
		{"lognormal mean zero", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    max_tokens: {dist: lognormal, mean: 0, stddev: 1, min: 1}\n", nil,
			"mix.yaml:5: classes[0].max_tokens.mean: must be positive for a lognormal"},
		{"think time not a duration", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    sessions: {turns: 2, think_time: 2}\n", nil,
			`mix.yaml:5: classes[0].sessions.think_time: "2" is not a duration (want e.g. 150ms, 2s, 5m, 30d)`},
		{"synthetic sessions without turns", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    sessions: {think_time: 2s}\n", nil,
			"mix.yaml:5: classes[0].sessions.turns missing"},
		{"source type unknown", "kind: Mix\nclasses:\n  - name: a\n    source: {type: csv, path: x.csv}\n", nil,
			`mix.yaml:4: classes[0].source.type: unknown source type "csv" (want jsonl, sharegpt, synthetic, azure, burstgpt, mooncake, weka, dynamo, otel or agent)`},
		{"source path missing", "kind: Mix\nclasses:\n  - name: a\n    source: {type: jsonl}\n", nil,
			"mix.yaml:4: classes[0].source.path missing"},
		{"source file absent", "kind: Mix\nclasses:\n  - name: a\n    source: {type: jsonl, path: nope.jsonl}\n", nil,
			"mix.yaml:4: classes[0].source.path: open nope.jsonl: no such file or directory"},
		{"field of another source type", "kind: Mix\nclasses:\n  - name: a\n    source: {type: synthetic, input_tokens: 5, path: x}\n", nil,
			"mix.yaml:4: classes[0].source.path: unknown field (want one of type, input_tokens, shared_prefix)"},
		{"duplicate class", "kind: Mix\nclasses:\n  - name: a\n" + synth + "  - name: a\n" + synth, nil,
			`mix.yaml:5: classes[1].name: duplicate class name "a"`},
		{"bad class name", "kind: Mix\nclasses:\n  - name: a b\n" + synth, nil,
			`mix.yaml:3: classes[0].name: "a b": use letters, digits, '_', '-' and '.' only`},
		{"duplicate key", "kind: Mix\nkind: Mix\nclasses: []\n", nil, "mix.yaml:2: kind: duplicate key (first on line 1)\nmix.yaml:3: classes: no classes"},
		{"reserved param", "kind: Mix\nclasses:\n  - name: a\n" + synth + "    params: {max_tokens: 5}\n", nil,
			"mix.yaml:5: classes[0].params.max_tokens: not a parameter: set max_tokens on the class; messages, prompt and stream come from the source and client"},
		{"unknown tokenizer", "kind: Mix\ntokenizer: llama\nclasses: []\n", nil,
			"mix.yaml:2: tokenizer: unknown tokenizer \"llama\" (want one of cl100k_base, o200k_base, p50k_base, r50k_base)\nmix.yaml:3: classes: no classes"},
		{"trace with weight", "kind: Mix\nclasses:\n  - name: t\n    weight: 2\n    source: {type: azure, path: t.csv}\n", nil,
			"mix.yaml:4: classes[0].weight: trace classes take no weight: the trace's timestamps set the arrivals"},
		{"trace mixed with weighted", "kind: Mix\nclasses:\n  - name: a\n" + synth + "  - name: t\n    source: {type: azure, path: t.csv}\n", nil,
			"mix.yaml:6: classes[1].source: cannot mix trace classes (azure, burstgpt, mooncake, dynamo, otel) with weighted classes in one mix"},
		{"bad time scale", "kind: Mix\ntime_scale: 0\nclasses: []\n", nil,
			"mix.yaml:2: time_scale: 0: want a number in (0, 1e6]\nmix.yaml:3: classes: no classes"},
		{"both prefix forms", "kind: Mix\nclasses:\n  - name: a\n    source:\n      type: synthetic\n      input_tokens: 5\n      shared_prefix: {tokens: 9, prompts_per_prefix: 2, prefixes: 3}\n", nil,
			"mix.yaml:7: classes[0].source.shared_prefix.prefixes: give prompts_per_prefix or prefixes, not both"},

		// Data files.
		{"csv row missing a column", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396\n"},
			"t.csv:3: column GeneratedTokens missing"},
		{"csv header missing a column", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens\n2023-11-16 18:15:46.6805900,374\n"},
			"t.csv:1: header: column GeneratedTokens missing (have TIMESTAMP,ContextTokens)"},
		{"csv not a number", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,lots,44\n"},
			`t.csv:2: column ContextTokens: "lots" is not a whole number`},
		{"csv empty value", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,,44\n"},
			"t.csv:2: column ContextTokens: empty"},
		{"csv bad timestamp", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.6805900,1,2\nyesterday,1,2\n"},
			`t.csv:3: column TIMESTAMP: "yesterday" is not a time (want e.g. 2023-11-16 18:15:46.6805900)`},
		{"csv bad quoting", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n\"2023-11-16 18:15:46,1,2\n"},
			"t.csv:2: bad CSV: extraneous or missing \" in quoted-field"},
		{"csv only a header", azureMix, map[string]string{"t.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n"},
			"t.csv: no rows after the header"},
		{"burstgpt row missing a column", "kind: Mix\nclasses:\n  - name: b\n    source: {type: burstgpt, path: b.csv}\n",
			map[string]string{"b.csv": "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n10,ChatGPT,100,20,120,Conversation log\n30,ChatGPT,5000\n"},
			"b.csv:3: column Response tokens missing"},
		{"burstgpt timestamp", "kind: Mix\nclasses:\n  - name: b\n    source: {type: burstgpt, path: b.csv}\n",
			map[string]string{"b.csv": "Timestamp,Request tokens,Response tokens\nten,100,20\n"},
			`b.csv:2: column Timestamp: "ten" is not a number of seconds`},
		{"jsonl line not json", jsonlMix, map[string]string{"p.jsonl": `{"messages": [{"role": "user", "content": "hi"}]}` + "\n\n{\"messages\": [}\n"},
			"p.jsonl:3: not JSON: invalid character '}' looking for beginning of value"},
		{"jsonl not an object", jsonlMix, map[string]string{"p.jsonl": "[1, 2]\n"},
			"p.jsonl:1: want a JSON object, got array"},
		{"jsonl messages missing", jsonlMix, map[string]string{"p.jsonl": `{"max_tokens": 5}`},
			"p.jsonl:1: messages missing"},
		{"jsonl role missing", jsonlMix, map[string]string{"p.jsonl": `{"messages": [{"content": "hi"}]}`},
			"p.jsonl:1: messages[0].role missing"},
		{"jsonl bad role", jsonlMix, map[string]string{"p.jsonl": `{"messages": [{"role": "robot", "content": "hi"}]}`},
			`p.jsonl:1: messages[0].role: want one of system, developer, user, assistant, tool; got "robot"`},
		{"jsonl image part", jsonlMix, map[string]string{"p.jsonl": `{"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]}`},
			`p.jsonl:1: messages[0].content: part 0: only {"type": "text", "text": ...} parts are supported`},
		{"jsonl bad max_tokens", jsonlMix, map[string]string{"p.jsonl": `{"messages": [{"role": "user", "content": "hi"}], "max_tokens": -1}`},
			"p.jsonl:1: max_tokens: want a whole number in [0, 1048576], got -1"},
		{"jsonl empty", jsonlMix, map[string]string{"p.jsonl": "\n\n"}, "p.jsonl: no requests in file"},
		{"sharegpt not json", shareMix, map[string]string{"s.json": "[\n  {\"conversations\": [\n    {\"from\": \"human\", \"value\": \"hi\"},\n  ]}\n]\n"},
			"s.json:4: not JSON: invalid character ']' looking for beginning of value"},
		{"sharegpt wrong type", shareMix, map[string]string{"s.json": "[\n{\"conversations\": []},\n{\"conversations\": [{\"from\": \"human\", \"value\": 5}]}\n]"},
			"s.json:3: [1].conversations.value: want a string, got number"},
		{"sharegpt after blank lines and a BOM", shareMix, map[string]string{"s.json": "\xef\xbb\xbf\n\n[\n{\"conversations\": 5}\n]"},
			"s.json:4: [0].conversations: want a list, got number"},
		{"sharegpt unknown speaker", shareMix, map[string]string{"s.json": `[{"conversations": [{"from": "robot", "value": "x"}]}]`},
			`s.json:1: [0].conversations[0].from: unknown speaker "robot" (want human, gpt or system)`},
		{"sharegpt value missing", shareMix, map[string]string{"s.json": "[\n\n{\"conversations\": [{\"from\": \"human\"}]}]"},
			"s.json:3: [0].conversations[0].value missing"},
		{"sharegpt truncated", shareMix, map[string]string{"s.json": "[\n{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}"},
			"s.json:2: not JSON: unexpected end of file"},
		{"sharegpt nothing usable", shareMix, map[string]string{"s.json": `[{"conversations": [{"from": "human", "value": "hi"}]}]`},
			"s.json: no usable records (a conversation needs a user turn and, outside sessions, an answer after it)"},
		{"mooncake field missing", moonMix, map[string]string{"m.jsonl": "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\n{\"timestamp\": 5, \"output_length\": 5}\n"},
			"m.jsonl:2: input_length missing"},
		{"mooncake not json", moonMix, map[string]string{"m.jsonl": "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}\ntimestamp=5\n"},
			"m.jsonl:2: not JSON: invalid character 'i' in literal true (expecting 'r')"},
		{"mooncake bad hash ids", moonMix, map[string]string{"m.jsonl": `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": ["a"]}`},
			`m.jsonl:1: hash_ids: want a list of whole numbers, got ["a"]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			files := map[string]string{"mix.yaml": c.yaml}
			for k, v := range c.files {
				files[k] = v
			}
			dir := writeFiles(t, files)
			m, err := LoadMix(filepath.Join(dir, "mix.yaml"), LoadOptions{})
			if err == nil {
				t.Fatalf("loaded: %s", m.Describe())
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("%T %v is not an *Error", err, err)
			}
			got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), "")
			if got != c.want {
				t.Errorf("error\n  %s\nwant\n  %s", got, c.want)
			}
		})
	}
}

const (
	azureMix = "kind: Mix\nclasses:\n  - name: t\n    source: {type: azure, path: t.csv}\n"
	jsonlMix = "kind: Mix\nclasses:\n  - name: p\n    source: {type: jsonl, path: p.jsonl}\n"
	shareMix = "kind: Mix\nclasses:\n  - name: s\n    source: {type: sharegpt, path: s.json}\n"
	moonMix  = "kind: Mix\nclasses:\n  - name: m\n    source: {type: mooncake, path: m.jsonl}\n"
)

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		e    *Error
		want string
	}{
		{&Error{File: "a.yaml", Line: 3, Field: "x", Err: ErrMissing}, "a.yaml:3: x missing"},
		{&Error{File: "a.yaml", Field: "x", Err: errors.New("bad")}, "a.yaml: x: bad"},
		{&Error{File: "a.yaml", Line: 1, Err: errors.New("bad")}, "a.yaml:1: bad"},
	} {
		if c.e.Error() != c.want {
			t.Errorf("%q, want %q", c.e.Error(), c.want)
		}
	}
	if !errors.Is(&Error{Err: ErrMissing}, ErrMissing) {
		t.Error("errors.Is(ErrMissing)")
	}
}

// A mix file with two independent mistakes reports both through LoadMix,
// each an *Error with its line.
func TestMixReportsEveryMistake(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"mix.yaml": "kind: Mix\nclasses:\n  - name: a\n    weight: -2\n" +
		"    source: {type: synthetic, input_tokens: 10}\n  - name: b\n    source: {type: synthetic, input_tokens: 10}\n" +
		"    sessions: {turns: 2, think_time: soon}\n"})
	_, err := LoadMix(filepath.Join(dir, "mix.yaml"), LoadOptions{})
	var lines []int
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, member := range j.Unwrap() {
			if e := (*Error)(nil); errors.As(member, &e) {
				lines = append(lines, e.Line)
			}
		}
	}
	if fmt.Sprint(lines) != "[4 8]" || !strings.Contains(err.Error(), "classes[0].weight: must not be negative\n") ||
		!strings.HasSuffix(err.Error(), `classes[1].sessions.think_time: "soon" is not a duration (want e.g. 150ms, 2s, 5m, 30d)`) {
		t.Fatalf("got lines %v of\n%v", lines, err)
	}
}

// Mix files read durations in the one dialect of tailgate's files
// (yamlwalk.ParseDuration), the same as SLO and plan files.
func TestMixDurationDialect(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"500ms", "1.5s", "250us", "1h30m", "30d", "4w", "5O0ms", "1.5d", "-1s", "2", "d", "99999999w"} {
		data := "kind: Mix\nclasses:\n  - name: t\n    source: {type: azure, path: t.csv, from: " + s + "}\n"
		m, err := parseMix("mix.yaml", []byte(data), LoadOptions{})
		want, werr := yamlwalk.ParseDuration(s)
		switch {
		case werr != nil && (err == nil || !strings.HasSuffix(err.Error(), "classes[0].source.from: "+werr.Error())):
			t.Errorf("from: %s: got %v, want %v", s, err, werr)
		case werr == nil && (err != nil || m.classes[0].from != want):
			t.Errorf("from: %s: got %v, want %v", s, err, want)
		}
	}
}
