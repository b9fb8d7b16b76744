package prompts

import (
	"encoding/json"
	"testing"
)

// The length plan states each synthetic class's drawn lengths as the mix
// gives them (a shared prefix added to the input, default bounds left
// out), and none for a class whose data sets its lengths.
func TestLengths(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - name: short
    weight: 3
    source: {type: synthetic, input_tokens: 100}
    max_tokens: {dist: uniform, min: 10, max: 30}
  - name: long
    weight: 1
    source: {type: synthetic, input_tokens: {dist: normal, mean: 1000, stddev: 100, max: 1500}, shared_prefix: {tokens: 50, prompts_per_prefix: 2}}
    max_tokens: {dist: lognormal, mean: 200, stddev: 50}
  - name: data
    weight: 0
    source: {type: jsonl, path: d.jsonl}
    max_tokens: 7
`, map[string]string{"d.jsonl": `{"prompt": "hi"}` + "\n"})
	b, err := json.Marshal(m.Lengths())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"classes":[` +
		`{"class":"short","share":0.75,"input_tokens":{"dist":"fixed","value":100},"max_tokens":{"dist":"uniform","min":10,"max":30}},` +
		`{"class":"long","share":0.25,"input_tokens":{"dist":"normal","mean":1050,"stddev":100,"max":1550},"max_tokens":{"dist":"lognormal","mean":200,"stddev":50}},` +
		`{"class":"data","share":0}]}`
	if string(b) != want {
		t.Errorf("plan\n%s\nwant\n%s", b, want)
	}
}

// A trace sets every length from its rows: no plan.
func TestLengthsTrace(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, "kind: Mix\nclasses:\n  - name: t\n    source: {type: mooncake, path: t.jsonl}\n",
		map[string]string{"t.jsonl": `{"timestamp": 0, "input_length": 10, "output_length": 5, "hash_ids": [0]}` + "\n"})
	if lp := m.Lengths(); lp != nil {
		t.Errorf("trace plan %+v", lp)
	}
}
