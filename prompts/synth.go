package prompts

import (
	"strconv"
	"strings"
	"sync"
)

// corpus is a long random text made only of pieces the tokenizer counts as
// one token each (" word", ",", "."), with the byte offset of every piece,
// so a run of n tokens is a substring found in O(1). It is built once per
// tokenizer from a fixed seed and shared, read-only, by every source.
type corpus struct {
	words []string // " word" pieces
	text  string
	off   []int32 // off[i]: start of piece i; off[len(off)-1] = len(text)
}

const (
	corpusTokens = tokenLimit // the longest synthetic text
	corpusSeed   = 0x7a11_6a7e
	// headTokens fresh random words open every synthetic text, so no two
	// prompts share a prefix by accident (4096^8 = 2^96 choices): prefix
	// caching only ever hits where the mix asks for it.
	headTokens = 8
)

var (
	corporaMu sync.Mutex
	corpora   = map[string]*corpus{}
)

// corpusKey identifies a tokenizer's corpus by name and words (a custom
// Tokenizer need not be comparable).
func corpusKey(tok Tokenizer) string {
	h := fnv64(tok.Name())
	for _, w := range tok.Words() {
		h = splitmix64(h ^ fnv64(w))
	}
	return tok.Name() + "\x00" + strconv.FormatUint(h, 16)
}

// corpusFor returns the tokenizer's corpus, building it on first use
// (it is large and slow to build: once per tokenizer and process).
func corpusFor(tok Tokenizer) *corpus {
	key := corpusKey(tok)
	corporaMu.Lock()
	defer corporaMu.Unlock()
	if c, ok := corpora[key]; ok {
		return c
	}
	ws := tok.Words()
	c := &corpus{words: make([]string, len(ws))}
	for i, w := range ws {
		c.words[i] = " " + w
	}
	r := newRNG(corpusSeed, fnv64(tok.Name()))
	var b strings.Builder
	b.Grow(corpusTokens * 8)
	c.off = make([]int32, 0, corpusTokens+1)
	prevWord := false
	for len(c.off) < corpusTokens {
		c.off = append(c.off, int32(b.Len()))
		// A mark follows a word only, never another mark, so no two marks
		// merge into one piece.
		if prevWord {
			switch x := r.intn(64); {
			case x < 4:
				b.WriteByte(',')
				prevWord = false
				continue
			case x < 7:
				b.WriteByte('.')
				prevWord = false
				continue
			}
		}
		b.WriteString(c.words[r.intn(len(c.words))])
		prevWord = true
	}
	c.text = b.String()
	c.off = append(c.off, int32(len(c.text)))
	corpora[key] = c
	return c
}

// textSpan is a synthetic text of full tokens, of which the first n are
// used: headTokens random words, then a run of the corpus from a random
// start. Texts drawn with the same rng state and full length agree on
// every prefix, which is what lets Mooncake blocks be cut short.
type textSpan struct {
	head  [headTokens]int32 // word indices
	start int               // corpus piece where the run begins
}

func (c *corpus) span(r *rng, full int) textSpan {
	var s textSpan
	for i := range s.head {
		s.head[i] = int32(r.intn(len(c.words)))
	}
	if rest := full - headTokens; rest > 0 {
		s.start = r.intn(len(c.off) - 1 - rest + 1)
	}
	return s
}

// size is the byte length of the first n tokens of s.
func (c *corpus) size(s textSpan, n int) int {
	b := 0
	for i := 0; i < n && i < headTokens; i++ {
		b += len(c.words[s.head[i]])
	}
	if rest := n - headTokens; rest > 0 {
		b += int(c.off[s.start+rest] - c.off[s.start])
	}
	return b
}

// write appends the first n tokens of s.
func (c *corpus) write(b *strings.Builder, s textSpan, n int) {
	for i := 0; i < n && i < headTokens; i++ {
		b.WriteString(c.words[s.head[i]])
	}
	if rest := n - headTokens; rest > 0 {
		b.WriteString(c.text[c.off[s.start]:c.off[s.start+rest]])
	}
}

// fresh returns a new text of exactly n tokens.
func (c *corpus) fresh(r *rng, n int) string {
	if n <= 0 {
		return ""
	}
	s := c.span(r, n)
	var b strings.Builder
	b.Grow(c.size(s, n))
	c.write(&b, s, n)
	return b.String()
}

// blockSpan is the text of one shared block of a trace: the same
// (seed, id) always gives the same text, and fewer tokens its prefix.
func (c *corpus) blockSpan(seed int64, id int64, full int) textSpan {
	return c.span(newRNG(seed, 0xb10c, uint64(id)), full)
}
