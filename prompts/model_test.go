package prompts

import (
	"slices"
	"strings"
	"testing"
)

// A class's model: reaches every prompt it draws (Prompt.ModelName, and
// the "model" parameter the clients send), the mix lists each model once
// for the preflight, and headers: reach the class's prompts only.
func TestClassModelAndHeaders(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `kind: Mix
seed: 3
classes:
  - {name: a, weight: 1, model: lora-a, headers: {x-gateway-inference-fairness-id: tenant-a}, source: {type: synthetic, input_tokens: 4}}
  - {name: b, weight: 1, params: {model: lora-b}, source: {type: synthetic, input_tokens: 4}}
  - {name: c, weight: 1, model: lora-a, source: {type: synthetic, input_tokens: 4}}
  - {name: base, weight: 1, source: {type: synthetic, input_tokens: 4}}
`, nil)
	if got := m.Models(); !slices.Equal(got, []string{"lora-a", "lora-b"}) {
		t.Errorf("Models() = %v, want [lora-a lora-b]", got)
	}
	want := map[string]string{"a": "lora-a", "b": "lora-b", "c": "lora-a", "base": ""}
	src := m.WithHeaders(m.Source(m.Seed()))
	seen := map[string]int{}
	for range 200 {
		p := next(t, src)
		seen[p.Class]++
		if got := p.ModelName(); got != want[p.Class] {
			t.Fatalf("class %s: model %q, want %q", p.Class, got, want[p.Class])
		}
		tenant := p.Headers["x-gateway-inference-fairness-id"]
		if (p.Class == "a") != (tenant == "tenant-a") || (p.Class != "a" && len(p.Headers) > 0) {
			t.Fatalf("class %s: headers %v", p.Class, p.Headers)
		}
	}
	if len(seen) != 4 {
		t.Fatalf("classes drawn: %v", seen)
	}
}

func TestClassModelErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ class, want string }{
		{`model: lora-a, params: {model: lora-b}`, `classes[0].model: model "lora-a", but params names model lora-b: name it once`},
		{`model: ""`, `classes[0].model: want a model name`},
		{`headers: {"bad header": x}`, `header "bad header": a header name is`},
		{`headers: {Host: x}`, `header "Host" is the client's to set`},
		{`headers: [a, b]`, `classes[0].headers: want a map of header names to strings`},
	} {
		data := "kind: Mix\nclasses:\n  - {name: a, " + tt.class + ", source: {type: synthetic, input_tokens: 4}}\n"
		_, err := parseMix("mix.yaml", []byte(data), LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want %q", tt.class, err, tt.want)
		}
	}
}
