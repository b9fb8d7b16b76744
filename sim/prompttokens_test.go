package sim

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tailgate-llm/tailgate/prompts"
)

// promptTokensMix has a plain synthetic class and one whose prompts are a
// shared system prefix plus a body, both sized for a chat template of 7
// tokens (template_tokens), in the mix's default tokenizer.
const promptTokensMix = `kind: Mix
seed: 3
template_tokens: 7
classes:
  - name: plain
    source:
      type: synthetic
      input_tokens: {dist: uniform, min: 20, max: 3000}
    max_tokens: 1
  - name: prefixed
    source:
      type: synthetic
      input_tokens: {dist: uniform, min: 20, max: 1500}
      shared_prefix: {tokens: 400, prompts_per_prefix: 2}
    max_tokens: 1
`

// usagePromptTokens sends p as chat (or, for a text prompt, also as a
// completion) and returns the server's prompt_tokens for each form.
func usagePromptTokens(t *testing.T, url string, p *prompts.Prompt) []int {
	t.Helper()
	c := testClient(t)
	bodies := []struct {
		path string
		body map[string]any
	}{{"/v1/chat/completions", map[string]any{"messages": p.Chat(), "max_tokens": 1}}}
	if p.Text != "" {
		bodies = append(bodies, struct {
			path string
			body map[string]any
		}{"/v1/completions", map[string]any{"prompt": p.Completion(), "max_tokens": 1}})
	}
	var out []int
	for _, b := range bodies {
		res := do(context.Background(), c, url, b.path, b.body, nil)
		var u struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			}
		}
		if res.status != 200 || json.Unmarshal(res.body, &u) != nil {
			t.Fatalf("%s: HTTP %d %s", b.path, res.status, res.body)
		}
		out = append(out, u.Usage.PromptTokens)
	}
	return out
}

// TestPromptTokensMatchMix: a mix asking for N input tokens gets
// prompt_tokens N from the simulator, once the simulator adds the template
// overhead the mix left room for. Counting one token per 4 bytes instead,
// as the simulator once did, reports about 54% more: the mix's words
// average over 6 bytes a token.
func TestPromptTokensMatchMix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mix.yaml")
	if err := os.WriteFile(path, []byte(promptTokensMix), 0o644); err != nil {
		t.Fatal(err)
	}
	mix, err := prompts.LoadMix(path, prompts.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src := mix.Source(mix.Seed())
	var ps []*prompts.Prompt
	for len(ps) < 30 {
		p, err := src.Next()
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}

	exact := fixedCfg(0, 0)
	exact.PromptOverheadTokens = 7
	bare := fixedCfg(0, 0)
	bytes4 := fixedCfg(0, 0)
	bytes4.Tokenizer = TokenizerBytes4
	rExact, rBare, rBytes4 := startSim(t, exact), startSim(t, bare), startSim(t, bytes4)
	var requested, counted4 int
	classes := map[string]int{}
	for _, p := range ps {
		classes[p.Class]++
		for _, got := range usagePromptTokens(t, rExact.URL, p) {
			if got != p.InputTokens {
				t.Errorf("%s (%s): prompt_tokens %d, the mix asked for %d", p.ID, p.Class, got, p.InputTokens)
			}
		}
		for _, got := range usagePromptTokens(t, rBare.URL, p) {
			if got != p.InputTokens-7 {
				t.Errorf("%s without overhead: prompt_tokens %d, want %d (the mix's text alone)", p.ID, got, p.InputTokens-7)
			}
		}
		requested += p.InputTokens
		counted4 += usagePromptTokens(t, rBytes4.URL, p)[0]
	}
	if classes["plain"] == 0 || classes["prefixed"] == 0 {
		t.Fatalf("classes drawn %v: want both", classes)
	}
	ratio := float64(counted4) / float64(requested)
	t.Logf("%d prompts, %d tokens asked for; bytes/4 counts %.2f× that", len(ps), requested, ratio)
	if ratio < 1.4 || ratio > 1.7 {
		t.Errorf("bytes/4 counted %.2f× the requested tokens, want about 1.54× (the excess the default tokenizer removes)", ratio)
	}
}
