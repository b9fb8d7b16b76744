package prompts

import (
	"strings"
	"testing"
)

// Synthetic text must have exactly the requested number of tokens in the
// chosen encoding: the tolerance is zero.
func TestSyntheticLengthExact(t *testing.T) {
	t.Parallel()
	for _, enc := range Encodings() {
		t.Run(enc, func(t *testing.T) {
			tok, err := NewTokenizer(enc)
			if err != nil {
				t.Fatal(err)
			}
			if len(tok.Words()) != wordCount {
				t.Errorf("%d words, want %d", len(tok.Words()), wordCount)
			}
			c := corpusFor(tok)
			r := newRNG(1, 2)
			lengths := []int{1, 2, 7, 8, 9, 10, 16, 100, 511, 512, 513, 4096}
			for i := 0; i < 60; i++ {
				lengths = append(lengths, 1+r.intn(20000))
			}
			lengths = append(lengths, 100000)
			if enc == EncodingCl100k && !testing.Short() {
				lengths = append(lengths, corpusTokens) // the longest text: the whole corpus run
			}
			for _, n := range lengths {
				s := c.fresh(r, n)
				if got := tok.Count(s); got != n {
					t.Fatalf("fresh(%d) has %d tokens: %.120q", n, got, s)
				}
			}
		})
	}
}

// Every single word, and the marks, are one token; the corpus as a whole
// has one token per piece.
func TestWordsAreSingleTokens(t *testing.T) {
	t.Parallel()
	for _, enc := range []string{EncodingCl100k, EncodingO200k} {
		tok, _ := NewTokenizer(enc)
		for _, w := range tok.Words() {
			if n := tok.Count(" " + w); n != 1 {
				t.Errorf("%s: %q is %d tokens", enc, " "+w, n)
			}
		}
		c := corpusFor(tok)
		// Pieces in a window of the corpus, counted in one go.
		text := c.text[c.off[1000]:c.off[21000]]
		if got := tok.Count(text); got != 20000 {
			t.Errorf("%s: corpus window of 20000 pieces has %d tokens", enc, got)
		}
		if strings.Contains(c.text, ",,") || strings.Contains(c.text, "..") || strings.Contains(c.text, ",.") || strings.Contains(c.text, ".,") {
			t.Errorf("%s: marks next to each other", enc)
		}
	}
}

// Concatenated spans (Mooncake blocks, prefix + body) add up exactly, and
// a short block is a prefix of its full text.
func TestBlocksConcatenateExactly(t *testing.T) {
	t.Parallel()
	tok, _ := NewTokenizer(EncodingO200k)
	c := corpusFor(tok)
	var b strings.Builder
	total := 0
	for id := int64(0); id < 40; id++ {
		n := 512
		if id%7 == 3 {
			n = int(id) // a short block
		}
		s := c.blockSpan(9, id, 512)
		c.write(&b, s, n)
		total += n
		var full, short strings.Builder
		c.write(&full, s, 512)
		c.write(&short, s, n)
		if !strings.HasPrefix(full.String(), short.String()) {
			t.Fatalf("block %d: %d-token text is not a prefix of the full block", id, n)
		}
		if c.size(s, n) != short.Len() {
			t.Fatalf("block %d: size %d, wrote %d", id, c.size(s, n), short.Len())
		}
	}
	if got := tok.Count(b.String()); got != total {
		t.Errorf("blocks: %d tokens, want %d", got, total)
	}
}

func TestNewTokenizer(t *testing.T) {
	t.Parallel()
	if _, err := NewTokenizer("llama3"); err == nil || !strings.Contains(err.Error(), "cl100k_base") {
		t.Errorf("unknown tokenizer: %v", err)
	}
	a, _ := NewTokenizer(EncodingCl100k)
	b, _ := NewTokenizer(EncodingCl100k)
	if a != b {
		t.Error("tokenizers are not cached")
	}
	if a.Name() != "cl100k_base" || a.Count("") != 0 || a.Count("hello world") != 2 {
		t.Errorf("cl100k: %s %d %d", a.Name(), a.Count(""), a.Count("hello world"))
	}
}

// wordTokenizer is a custom Tokenizer: one token per space-separated word
// or mark.
type wordTokenizer struct{ words []string }

func (w wordTokenizer) Name() string { return "words" }
func (w wordTokenizer) Count(s string) int {
	s = strings.NewReplacer(",", " , ", ".", " . ").Replace(s)
	return len(strings.Fields(s))
}
func (w wordTokenizer) Words() []string { return w.words }

func TestCustomTokenizer(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{"mix.yaml": "kind: Mix\nclasses: [{name: s, source: {type: synthetic, input_tokens: 300}}]\n"})
	if _, err := LoadMix(dir+"/mix.yaml", LoadOptions{Tokenizer: wordTokenizer{[]string{"a", "b"}}}); err == nil ||
		!strings.Contains(err.Error(), "tokenizer words: 2 distinct words") {
		t.Errorf("a two-word tokenizer: %v", err)
	}
	var words []string
	for i := 0; i < 100; i++ {
		words = append(words, "w"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+string(rune('a'+i/26)))
	}
	tok := wordTokenizer{words}
	m, err := LoadMix(dir+"/mix.yaml", LoadOptions{Tokenizer: tok})
	if err != nil {
		t.Fatal(err)
	}
	p := next(t, m.Source(1))
	if m.Tokenizer().Name() != "words" || tok.Count(p.Text) != 300 {
		t.Errorf("%s: %d tokens", m.Tokenizer().Name(), tok.Count(p.Text))
	}
}
