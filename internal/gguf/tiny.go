package gguf

import (
	"math"
	"math/rand/v2"
	"strings"
)

// TinyOptions shape the model Tiny writes.
type TinyOptions struct {
	// Seed makes the weights; the same seed writes the same bytes.
	Seed uint64
	// EOSLogit is the end-of-sequence token's logit relative to the
	// ordinary tokens' (whose own spread is about 0.15), in nats at
	// temperature 1. Zero leaves EOS out of reach (every answer runs to
	// its token limit). Below the words it is cut by top-k sampling; a
	// little above them (0.7) it is a few per cent of the tokens Ollama's
	// default sampling picks.
	EOSLogit float64
	// ContextLength is llama.context_length (default 2048).
	ContextLength uint32
}

// Tiny's shape: small enough that a CPU serves many streams at once.
const (
	tinyEmbd   = 64
	tinyHeads  = 4
	tinyKV     = 2
	tinyFF     = 128
	tinyLayers = 2
	// tinyLift is hidden dimension 0 of every position, kept constant
	// through the layers (no layer writes to it), so the output layer can
	// lift every ordinary token above every special one by its column 0.
	tinyLift = 10
	// tinyGap is the output weight on dimension 0: after the final RMS
	// norm dimension 0 is about sqrt(tinyEmbd) = 8, so an ordinary token's
	// logit sits about 2*8*tinyGap above a special one's.
	tinyGap = 2.0
)

// Token types of tokenizer.ggml.token_type.
const (
	tokenNormal  = 1
	tokenUnknown = 2
	tokenControl = 3
	tokenByte    = 6
)

// Ids of the special tokens.
const (
	TinyUnk = 0
	TinyBOS = 1
	TinyEOS = 2
)

// ChatML is the chat template Tiny carries (Ollama recognises it and
// serves chat with it).
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"

// tinyWords are the ordinary tokens, each with a leading space ("▁").
const tinyWords = `the of and to in is was for on that with as by at from it his an were are which this be
or has had not but first one their its new after who they have her she two been other when there all during into
school also time would only up city more most year world may years where can new over later film state some
three out then national known used team between number first united series since part about season state high
river about while under such made several these before both many music league county war american age him
however them people public group through called being back against each place well work name north road line
house early light lighthouse keeper story short sea ship storm night morning stone tower lamp wave wind shore
harbour boat island rock cliff keeper's beacon sailor fisherman village window door stair bell fog rain sun moon
star cloud bird gull salt tide current deep blue grey green old young quiet loud long small large bright dark
cold warm wet dry slow fast always never often sometimes again alone together nothing everything something
nobody everyone said asked looked turned walked climbed watched waited heard felt knew thought remembered began
ended stayed left came went saw found kept lost gave took made told spoke wrote read sang slept woke
`

// TinyVocab is Tiny's vocabulary: <unk> <s> </s>, the 256 byte tokens,
// the ChatML markers, then the words.
func TinyVocab() (tokens []string, types []int32) {
	tokens = []string{"<unk>", "<s>", "</s>"}
	types = []int32{tokenUnknown, tokenControl, tokenControl}
	for b := range 256 {
		tokens = append(tokens, "<0x"+strings.ToUpper(hex2(b))+">")
		types = append(types, tokenByte)
	}
	tokens = append(tokens, "<|im_start|>", "<|im_end|>")
	types = append(types, tokenControl, tokenControl)
	seen := map[string]bool{}
	for _, w := range strings.Fields(tinyWords) {
		if seen[w] {
			continue
		}
		seen[w] = true
		tokens = append(tokens, "\u2581"+w)
		types = append(types, tokenNormal)
	}
	return tokens, types
}

func hex2(b int) string {
	const d = "0123456789abcdef"
	return string([]byte{d[b>>4], d[b&15]})
}

// Tiny returns a random-weight llama model (F32, under 1 MB) that Ollama
// and llama.cpp serve: only ordinary tokens (words) are ever sampled, and
// end-of-sequence only as o.EOSLogit allows.
func Tiny(o TinyOptions) *File {
	if o.ContextLength == 0 {
		o.ContextLength = 2048
	}
	tokens, types := TinyVocab()
	scores := make([]float32, len(tokens))
	for i := range scores {
		if types[i] == tokenNormal {
			scores[i] = -float32(i) // earlier words merge first
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x7a11_9a7e))
	normal := func(n int, scale float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * scale)
		}
		return v
	}
	ones := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = 1
		}
		return v
	}
	vocab := uint64(len(tokens))
	headDim := tinyEmbd / tinyHeads
	f := &File{KV: []KV{
		{"general.architecture", "llama"},
		{"general.name", "tailgate-tiny"},
		{"general.alignment", uint32(Alignment)},
		{"llama.context_length", o.ContextLength},
		{"llama.embedding_length", uint32(tinyEmbd)},
		{"llama.block_count", uint32(tinyLayers)},
		{"llama.feed_forward_length", uint32(tinyFF)},
		{"llama.attention.head_count", uint32(tinyHeads)},
		{"llama.attention.head_count_kv", uint32(tinyKV)},
		{"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"llama.rope.dimension_count", uint32(headDim)},
		{"llama.rope.freq_base", float32(10000)},
		{"llama.vocab_size", uint32(vocab)},
		{"general.file_type", uint32(0)},
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.unknown_token_id", uint32(TinyUnk)},
		{"tokenizer.ggml.bos_token_id", uint32(TinyBOS)},
		{"tokenizer.ggml.eos_token_id", uint32(TinyEOS)},
		{"tokenizer.ggml.add_bos_token", true},
		{"tokenizer.ggml.add_eos_token", false},
		{"tokenizer.chat_template", ChatML},
	}}
	add := func(name string, data []float32, dims ...uint64) {
		f.Tensors = append(f.Tensors, Tensor{Name: name, Dims: dims, Data: data})
	}
	const e = uint64(tinyEmbd)
	emb := normal(int(vocab*e), 0.5)
	for t := range vocab {
		emb[t*e] = tinyLift
	}
	add("token_embd.weight", emb, e, vocab)
	kv := uint64(tinyKV * headDim)
	for l := range tinyLayers {
		p := "blk." + string(rune('0'+l)) + "."
		add(p+"attn_norm.weight", ones(tinyEmbd), e)
		add(p+"attn_q.weight", normal(int(e*e), 0.2), e, e)
		add(p+"attn_k.weight", normal(int(e*kv), 0.2), e, kv)
		add(p+"attn_v.weight", normal(int(e*kv), 0.2), e, kv)
		out := normal(int(e*e), 0.1)
		clear(out[:e]) // row 0 writes hidden dimension 0: keep it constant
		add(p+"attn_output.weight", out, e, e)
		add(p+"ffn_norm.weight", ones(tinyEmbd), e)
		add(p+"ffn_gate.weight", normal(int(e*tinyFF), 0.2), e, tinyFF)
		add(p+"ffn_up.weight", normal(int(e*tinyFF), 0.2), e, tinyFF)
		down := normal(int(tinyFF*e), 0.1)
		clear(down[:tinyFF])
		add(p+"ffn_down.weight", down, tinyFF, e)
	}
	add("output_norm.weight", ones(tinyEmbd), e)
	// Output: words get +tinyGap on dimension 0, every other token
	// -tinyGap; EOS sits o.EOSLogit from the words when asked. The other
	// dimensions are small, so the words stay close to one another and
	// sampling wanders among them.
	out := normal(int(vocab*e), 0.05)
	lift := math.Sqrt(tinyEmbd) // dimension 0 after the final RMS norm, about
	for t := range vocab {
		w := -tinyGap
		switch {
		case types[t] == tokenNormal:
			w = tinyGap
		case t == TinyEOS && o.EOSLogit != 0:
			w = tinyGap + o.EOSLogit/lift
		}
		out[t*e] = float32(w)
	}
	add("output.weight", out, e, vocab)
	return f
}
