package prompts

import (
	"fmt"
	"strings"
	"sync"

	"github.com/tiktoken-go/tokenizer"
)

// Tokenizer counts tokens the way a server's vocabulary does. Synthetic
// prompts are built from its Words so their length is known exactly by
// construction; Count measures dataset prompts and session answers.
// Implementations must be safe for concurrent use.
type Tokenizer interface {
	// Name identifies the vocabulary, e.g. "cl100k_base".
	Name() string
	// Count is the number of tokens in text, without special tokens.
	Count(text string) int
	// Words are distinct words such that " "+word is exactly one token,
	// and a text made of such " word" pieces, optionally each followed by
	// one "," or ".", has exactly one token per piece and per mark. The
	// order is fixed (it is part of the byte-for-byte determinism).
	Words() []string
}

// Encodings that NewTokenizer accepts. DefaultEncoding is used when a mix
// names none.
const (
	EncodingCl100k  = "cl100k_base"
	EncodingO200k   = "o200k_base"
	EncodingP50k    = "p50k_base"
	EncodingR50k    = "r50k_base"
	DefaultEncoding = EncodingCl100k
)

// Encodings lists the names NewTokenizer accepts.
func Encodings() []string {
	return []string{EncodingCl100k, EncodingO200k, EncodingP50k, EncodingR50k}
}

var (
	tokenizersMu sync.Mutex
	tokenizers   = map[string]*tiktoken{}
)

// NewTokenizer returns the offline BPE tokenizer for an OpenAI encoding
// (vocabularies are embedded in github.com/tiktoken-go/tokenizer; nothing
// is downloaded). Tokenizers are cached: the same name gives the same value.
func NewTokenizer(encoding string) (Tokenizer, error) {
	tokenizersMu.Lock()
	defer tokenizersMu.Unlock()
	if t, ok := tokenizers[encoding]; ok {
		return t, nil
	}
	known := false
	for _, e := range Encodings() {
		known = known || e == encoding
	}
	if !known {
		return nil, fmt.Errorf("unknown tokenizer %q (want one of %s)", encoding, strings.Join(Encodings(), ", "))
	}
	c, err := tokenizer.Get(tokenizer.Encoding(encoding))
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", encoding, err)
	}
	t := &tiktoken{name: encoding, codec: c}
	t.words = singleTokenWords(c, wordCount)
	if len(t.words) < minWords {
		return nil, fmt.Errorf("tokenizer %s: only %d single-token words", encoding, len(t.words))
	}
	tokenizers[encoding] = t
	return t, nil
}

// wordCount is how many words synthetic text draws from: the lowest-ranked
// (most frequent) all-lowercase single-token words of the vocabulary, which
// most other English BPE and SentencePiece vocabularies also hold as one
// token. minWords is what a custom Tokenizer must offer.
const (
	wordCount = 4096
	minWords  = 64
)

type tiktoken struct {
	name  string
	codec tokenizer.Codec
	words []string
}

func (t *tiktoken) Name() string { return t.name }

func (t *tiktoken) Count(text string) int {
	if text == "" {
		return 0
	}
	n, err := t.codec.Count(text)
	if err != nil {
		return 0
	}
	return n
}

func (t *tiktoken) Words() []string { return t.words }

// singleTokenWords walks token IDs in rank order and keeps tokens that are
// a space and 3 to 12 lowercase ASCII letters. A piece found whole in the
// vocabulary is encoded as that one token, and the split pattern of every
// tiktoken encoding cuts " word" pieces apart at each space and a
// punctuation mark off the letters before it, so counts add up exactly.
func singleTokenWords(c tokenizer.Codec, want int) []string {
	var words []string
	seen := map[string]bool{}
	misses := 0
	for id := uint(0); len(words) < want && misses < 10000; id++ {
		w, err := c.Decode([]uint{id})
		if err != nil {
			misses++ // past the end of the vocabulary
			continue
		}
		misses = 0
		if len(w) < 4 || len(w) > 13 || w[0] != ' ' {
			continue
		}
		ok := true
		for i := 1; i < len(w) && ok; i++ {
			ok = w[i] >= 'a' && w[i] <= 'z'
		}
		if ok && !seen[w] {
			seen[w] = true
			words = append(words, w[1:])
		}
	}
	return words
}

// checkTokenizer validates a caller's Tokenizer: synthetic text needs
// enough distinct non-empty words.
func checkTokenizer(tok Tokenizer) error {
	ws := tok.Words()
	seen := make(map[string]bool, len(ws))
	for _, w := range ws {
		if w == "" || strings.ContainsAny(w, " \t\r\n") {
			return fmt.Errorf("tokenizer %s: word %q is empty or has white space", tok.Name(), w)
		}
		seen[w] = true
	}
	if len(seen) < minWords {
		return fmt.Errorf("tokenizer %s: %d distinct words; synthetic text needs at least %d", tok.Name(), len(seen), minWords)
	}
	return nil
}
