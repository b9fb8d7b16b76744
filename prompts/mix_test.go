package prompts

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeFiles writes name → content into a temporary directory and returns
// the path of the first name given as "mix.yaml" (or of dir).
func writeFiles(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadYAML(t testing.TB, yaml string, files map[string]string) *Mix {
	t.Helper()
	if files == nil {
		files = map[string]string{}
	}
	files["mix.yaml"] = yaml
	dir := writeFiles(t, files)
	m, err := LoadMix(filepath.Join(dir, "mix.yaml"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func next(t testing.TB, s Source) *Prompt {
	t.Helper()
	p, err := s.Next()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Class frequencies match weights: Pearson's chi-square over 10,000 draws,
// 3 degrees of freedom, at significance 0.001 (critical value 16.266), for
// each of 20 seeds. A zero-weight class is never drawn.
func TestClassFrequenciesChiSquare(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - {name: a, weight: 50, source: {type: synthetic, input_tokens: 4}}
  - {name: b, weight: 25, source: {type: synthetic, input_tokens: 4}}
  - {name: off, weight: 0, source: {type: synthetic, input_tokens: 4}}
  - {name: c, weight: 15, source: {type: synthetic, input_tokens: 4}}
  - {name: d, weight: 10, source: {type: synthetic, input_tokens: 4}}
`, nil)
	const draws = 10000
	const critical = 16.266 // chi-square, df = 3, upper 0.1% point
	want := map[string]float64{"a": 0.5, "b": 0.25, "c": 0.15, "d": 0.10}
	for seed := int64(1); seed <= 20; seed++ {
		src := m.Source(seed)
		got := map[string]int{}
		for i := 0; i < draws; i++ {
			got[next(t, src).Class]++
		}
		if got["off"] != 0 {
			t.Fatalf("seed %d: zero-weight class drawn %d times", seed, got["off"])
		}
		chi2 := 0.0
		for cls, p := range want {
			e := p * draws
			d := float64(got[cls]) - e
			chi2 += d * d / e
		}
		if chi2 > critical {
			t.Errorf("seed %d: chi-square %.2f > %.3f (counts %v)", seed, chi2, critical, got)
		}
	}
}

// A class's own prompts do not change when other classes are added: each
// class draws from a stream keyed by its name.
func TestClassStreamsIndependent(t *testing.T) {
	t.Parallel()
	one := loadYAML(t, `
kind: Mix
classes:
  - {name: x, source: {type: synthetic, input_tokens: {dist: uniform, min: 10, max: 50}}, max_tokens: {dist: uniform, min: 1, max: 99}}
`, nil)
	two := loadYAML(t, `
kind: Mix
classes:
  - {name: y, weight: 3, source: {type: synthetic, input_tokens: 20}}
  - {name: x, source: {type: synthetic, input_tokens: {dist: uniform, min: 10, max: 50}}, max_tokens: {dist: uniform, min: 1, max: 99}}
`, nil)
	a, b := one.Source(5), two.Source(5)
	for i := 0; i < 50; i++ {
		pa := next(t, a)
		var pb *Prompt
		for pb = next(t, b); pb.Class != "x"; pb = next(t, b) {
		}
		if pa.ID != pb.ID || pa.Text != pb.Text || pa.MaxTokens != pb.MaxTokens {
			t.Fatalf("prompt %d differs: %s/%d vs %s/%d", i, pa.ID, pa.MaxTokens, pb.ID, pb.MaxTokens)
		}
	}
}

// Synthetic prompts: InputTokens is the requested length and the text has
// exactly that many tokens; the shared prefix is shared by
// prompts_per_prefix consecutive prompts and no more.
func TestSyntheticPrompts(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
tokenizer: o200k_base
classes:
  - name: rag
    source:
      type: synthetic
      input_tokens: {dist: normal, mean: 300, stddev: 50}
      shared_prefix: {tokens: 100, prompts_per_prefix: 3}
    max_tokens: 64
    params: {temperature: 0.5}
`, nil)
	tok := m.Tokenizer()
	src := m.Source(1)
	var prefixes []string
	for i := 0; i < 9; i++ {
		p := next(t, src)
		if len(p.Messages) != 2 || p.Messages[0].Role != "system" || p.Messages[1].Role != "user" {
			t.Fatalf("messages %+v", p.Messages)
		}
		sys, body := tok.Count(p.Messages[0].Content), tok.Count(p.Messages[1].Content)
		if sys != 100 || sys+body != p.InputTokens {
			t.Errorf("%s: prefix %d + body %d tokens, InputTokens %d", p.ID, sys, body, p.InputTokens)
		}
		if p.ID != fmt.Sprintf("rag-%d", i) || p.MaxTokens != 64 || p.Params["temperature"] != 0.5 {
			t.Errorf("prompt %+v", p)
		}
		prefixes = append(prefixes, p.Messages[0].Content)
	}
	for i := range prefixes {
		same := prefixes[i] == prefixes[i/3*3]
		if !same {
			t.Errorf("prompt %d does not share its group's prefix", i)
		}
		if i%3 == 0 && i > 0 && prefixes[i] == prefixes[i-1] {
			t.Errorf("prompt %d shares the previous group's prefix", i)
		}
	}
}

func TestTemplateTokens(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
template_tokens: 7
classes:
  - {name: s, source: {type: synthetic, input_tokens: 100}}
`, nil)
	p := next(t, m.Source(0))
	if p.InputTokens != 100 || m.Tokenizer().Count(p.Text) != 93 {
		t.Errorf("InputTokens %d, text %d tokens", p.InputTokens, m.Tokenizer().Count(p.Text))
	}
}

// Dataset classes: JSONL requests as written, with their own max_tokens
// winning over the class's; ShareGPT first turns with reference lengths.
func TestDatasetPrompts(t *testing.T) {
	t.Parallel()
	m := loadYAML(t, `
kind: Mix
classes:
  - name: chat
    source: {type: jsonl, path: chat.jsonl, order: sequential}
    max_tokens: 99
    params: {temperature: 0.1}
  - name: share
    weight: 0
    source: {type: sharegpt, path: share.json}
`, map[string]string{
		"chat.jsonl": `{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hello there"}], "max_tokens": 5, "top_p": 0.5, "temperature": 1, "id": "x"}

{"prompt": "Once upon a time"}
`,
		"share.json": `[{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello, how can I help"}]}]`,
	})
	src := m.Source(3)
	p := next(t, src)
	if p.ID != "chat-0" || len(p.Messages) != 2 || p.MaxTokens != 5 || p.InputTokens != 5 {
		t.Errorf("first: %+v", p)
	}
	if p.Params["top_p"] != 0.5 || p.Params["temperature"] != 0.1 || p.Params["id"] != nil {
		t.Errorf("params %v: want the line's top_p, the class's temperature, no id", p.Params)
	}
	p = next(t, src)
	if p.Text != "Once upon a time" || p.MaxTokens != 99 || p.InputTokens != 4 || p.Params["temperature"] != 0.1 {
		t.Errorf("second: %+v", p)
	}
	if p = next(t, src); p.ID != "chat-2" || p.MaxTokens != 5 {
		t.Errorf("sequential order does not cycle: %+v", p)
	}

	// The ShareGPT class alone.
	m2, err := LoadPromptsFile(filepath.Join(filepath.Dir(m.file), "share.json"), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p = next(t, m2.Source(0))
	if p.Class != "share" || p.Messages[0].Content != "hi" || p.MaxTokens != 6 || p.InputTokens != 1 {
		t.Errorf("sharegpt: %+v", p)
	}
}

// Shuffle order visits every record once per pass.
func TestShuffleOrder(t *testing.T) {
	t.Parallel()
	var lines []string
	for i := 0; i < 10; i++ {
		lines = append(lines, fmt.Sprintf(`{"prompt": "p%d"}`, i))
	}
	m := loadYAML(t, "kind: Mix\nclasses: [{name: c, source: {type: jsonl, path: p.jsonl}}]\n",
		map[string]string{"p.jsonl": strings.Join(lines, "\n")})
	src := m.Source(8)
	for pass := 0; pass < 3; pass++ {
		seen := map[string]bool{}
		for i := 0; i < 10; i++ {
			seen[next(t, src).Text] = true
		}
		if len(seen) != 10 {
			t.Errorf("pass %d saw %d distinct records", pass, len(seen))
		}
	}
}

func TestLoadPromptsFileDetects(t *testing.T) {
	t.Parallel()
	dir := "../testdata/mixes"
	for file, want := range map[string]string{
		"chat.jsonl":             SourceJSONL,
		"sharegpt.json":          SourceShareGPT,
		"azure-conv-excerpt.csv": SourceAzure,
		"burstgpt-excerpt.csv":   SourceBurstGPT,
		"mooncake-excerpt.jsonl": SourceMooncake,
	} {
		m, err := LoadPromptsFile(filepath.Join(dir, file), LoadOptions{Seed: 3, TimeScale: 2})
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if got := m.classes[0].srcType; got != want {
			t.Errorf("%s: detected %s, want %s", file, got, want)
		}
		if m.Seed() != 3 || len(m.Classes()) != 1 || m.IsTrace() != isTraceType(want) {
			t.Errorf("%s: seed %d classes %v trace %v", file, m.Seed(), m.Classes(), m.IsTrace())
		}
	}
	if _, err := LoadPromptsFile(filepath.Join(writeFiles(t, map[string]string{"x.txt": "hello"}), "x.txt"), LoadOptions{}); err == nil {
		t.Error("a text file was accepted")
	}
}

// Every sample mix loads, describes itself, and draws prompts.
func TestSampleMixes(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("../testdata/mixes/*.yaml")
	if len(files) < 8 {
		t.Fatalf("only %d sample mixes", len(files))
	}
	for _, f := range files {
		m, err := LoadMix(f, LoadOptions{})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if !strings.Contains(m.Describe(), m.Classes()[0]) || len(m.Hash()) != 64 {
			t.Errorf("%s: describe %q", f, m.Describe())
		}
		src := m.Source(m.Seed())
		for i := 0; i < 200; i++ {
			p, err := src.Next()
			if errors.Is(err, io.EOF) {
				if !m.IsTrace() {
					t.Errorf("%s: EOF from an endless mix", f)
				}
				break
			}
			if p.Graph != nil {
				if err := p.Graph.Validate(); err != nil {
					t.Errorf("%s: %v", f, err)
				}
				p = p.Graph.Calls[0].Prompt
			}
			if p.ID == "" || p.Class == "" || (len(p.Messages) == 0 && p.Text == "") || p.InputTokens <= 0 {
				t.Errorf("%s: bad prompt %+v", f, p)
			}
		}
	}
}

// Canonical names data files by base name and content hash, so the hash
// does not depend on where the files are; changing the seed changes it.
func TestCanonical(t *testing.T) {
	t.Parallel()
	a, err := LoadMix("../testdata/mixes/chat.yaml", LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs("../testdata/mixes/chat.yaml")
	b, err := LoadMix(abs, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() != b.Hash() {
		t.Errorf("hash depends on the path:\n%s\n%s", a.Canonical(), b.Canonical())
	}
	c, _ := LoadMix("../testdata/mixes/chat.yaml", LoadOptions{Seed: 99})
	if c.Hash() == a.Hash() || c.Seed() != 99 || a.Seed() != 7 {
		t.Error("seed override not reflected")
	}
	if !strings.Contains(string(a.Canonical()), `"sha256":"`) {
		t.Errorf("no file hash in %s", a.Canonical())
	}
}

// accept_empty: true names the classes whose empty answers are successes,
// and is part of the mix's canonical form (its hash changes with it).
func TestMixAcceptEmpty(t *testing.T) {
	t.Parallel()
	const base = `
kind: Mix
classes:
  - name: chat
    source: {type: synthetic, input_tokens: 10}
  - name: probe
    source: {type: synthetic, input_tokens: 10}
`
	plain := loadYAML(t, base, nil)
	if got := plain.AcceptEmpty(); got != nil {
		t.Errorf("AcceptEmpty() = %v without the key, want none", got)
	}
	m := loadYAML(t, base+"    accept_empty: true\n", nil)
	if got := m.AcceptEmpty(); len(got) != 1 || got[0] != "probe" {
		t.Errorf("AcceptEmpty() = %v, want [probe]", got)
	}
	if m.Hash() == plain.Hash() {
		t.Error("accept_empty does not change the mix's hash")
	}
}
