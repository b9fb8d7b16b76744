package gguf

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	in := &File{
		KV: []KV{{"a.u32", uint32(7)}, {"a.i32", int32(-3)}, {"a.f32", float32(1.5)}, {"a.bool", true},
			{"a.str", "héllo"}, {"a.u64", uint64(1 << 40)}, {"a.strs", []string{"x", "", "yz"}},
			{"a.f32s", []float32{1, -2}}, {"a.i32s", []int32{3, -4}}},
		Tensors: []Tensor{{Name: "m", Dims: []uint64{3, 2}, Data: []float32{1, 2, 3, 4, 5, 6}},
			{Name: "v", Dims: []uint64{1}, Data: []float32{-9}}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range in.KV {
		got := out.Get(kv.Key)
		if fmtv(got) != fmtv(kv.Value) {
			t.Errorf("%s: read %#v, wrote %#v", kv.Key, got, kv.Value)
		}
	}
	for _, tn := range in.Tensors {
		got := out.Tensor(tn.Name)
		if got == nil || fmtv(got.Dims) != fmtv(tn.Dims) || fmtv(got.Data) != fmtv(tn.Data) {
			t.Errorf("tensor %s: read %+v, wrote %+v", tn.Name, got, tn)
		}
	}
}

func fmtv(v any) string { return fmt.Sprint(v) }

func TestWriteRefusesWrongShape(t *testing.T) {
	t.Parallel()
	err := Write(&bytes.Buffer{}, &File{Tensors: []Tensor{{Name: "m", Dims: []uint64{2, 2}, Data: []float32{1}}}})
	if err == nil || !strings.Contains(err.Error(), "tensor m") {
		t.Fatalf("err = %v, want one naming tensor m", err)
	}
}

func TestReadRefusesOthers(t *testing.T) {
	t.Parallel()
	for name, b := range map[string][]byte{
		"magic":     []byte("GGML\x03\x00\x00\x00"),
		"version":   []byte("GGUF\x02\x00\x00\x00"),
		"truncated": []byte("GGUF\x03\x00\x00\x00\x01"),
	} {
		if _, err := Read(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: read without error", name)
		}
	}
}

// TestTiny reads Tiny back and checks what a llama loader needs: every key
// and tensor, each tensor's shape from the hyperparameters, and an output
// layer that lifts every word above every special or byte token.
func TestTiny(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	if err := Write(&buf, Tiny(TinyOptions{Seed: 1, EOSLogit: 0.7})); err != nil {
		t.Fatal(err)
	}
	size := buf.Len()
	if size > 1<<20 {
		t.Errorf("tiny model is %d bytes, want under 1 MiB", size)
	}
	var again bytes.Buffer
	Write(&again, Tiny(TinyOptions{Seed: 1, EOSLogit: 0.7}))
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("same seed wrote different bytes")
	}
	f, err := Read(&buf)
	if err != nil {
		t.Fatal(err)
	}
	u := func(k string) uint64 {
		t.Helper()
		switch v := f.Get(k).(type) {
		case uint32:
			return uint64(v)
		}
		t.Fatalf("%s = %#v, want a uint32", k, f.Get(k))
		return 0
	}
	if f.Get("general.architecture") != "llama" || f.Get("tokenizer.ggml.model") != "llama" {
		t.Errorf("architecture %v, tokenizer %v", f.Get("general.architecture"), f.Get("tokenizer.ggml.model"))
	}
	e, ff, heads, kvh := u("llama.embedding_length"), u("llama.feed_forward_length"), u("llama.attention.head_count"), u("llama.attention.head_count_kv")
	if u("llama.rope.dimension_count") != e/heads {
		t.Errorf("rope dimensions %d, head size %d", u("llama.rope.dimension_count"), e/heads)
	}
	tokens, _ := f.Get("tokenizer.ggml.tokens").([]string)
	types, _ := f.Get("tokenizer.ggml.token_type").([]int32)
	scores, _ := f.Get("tokenizer.ggml.scores").([]float32)
	n := uint64(len(tokens))
	if n < 400 || len(types) != len(tokens) || len(scores) != len(tokens) {
		t.Fatalf("%d tokens, %d types, %d scores", len(tokens), len(types), len(scores))
	}
	if tokens[u("tokenizer.ggml.eos_token_id")] != "</s>" || tokens[u("tokenizer.ggml.bos_token_id")] != "<s>" ||
		tokens[u("tokenizer.ggml.unknown_token_id")] != "<unk>" || tokens[3+0x41] != "<0x41>" {
		t.Errorf("special tokens wrong: %q", tokens[:5])
	}
	if !strings.Contains(f.Get("tokenizer.chat_template").(string), "<|im_start|>") {
		t.Error("no ChatML template")
	}
	kv := kvh * (e / heads)
	want := map[string][]uint64{"token_embd.weight": {e, n}, "output_norm.weight": {e}, "output.weight": {e, n}}
	for l := range u("llama.block_count") {
		p := "blk." + string(rune('0'+l)) + "."
		for k, d := range map[string][]uint64{"attn_norm": {e}, "attn_q": {e, e}, "attn_k": {e, kv}, "attn_v": {e, kv},
			"attn_output": {e, e}, "ffn_norm": {e}, "ffn_gate": {e, ff}, "ffn_up": {e, ff}, "ffn_down": {ff, e}} {
			want[p+k+".weight"] = d
		}
	}
	if len(f.Tensors) != len(want) {
		t.Errorf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for name, dims := range want {
		tn := f.Tensor(name)
		if tn == nil {
			t.Errorf("tensor %s missing", name)
			continue
		}
		if fmtv(tn.Dims) != fmtv(dims) {
			t.Errorf("tensor %s: dims %v, want %v", name, tn.Dims, dims)
		}
	}
	// The hidden state's dimension 0 is the embedding's constant: no layer
	// writes to it, so the output layer's column 0 orders the tokens.
	for l := range u("llama.block_count") {
		p := "blk." + string(rune('0'+l)) + "."
		for _, k := range []string{"attn_output", "ffn_down"} {
			tn := f.Tensor(p + k + ".weight")
			for i, v := range tn.Data[:tn.Dims[0]] {
				if v != 0 {
					t.Fatalf("%s writes hidden dimension 0 (weight %d = %v)", tn.Name, i, v)
				}
			}
		}
	}
	emb, out := f.Tensor("token_embd.weight"), f.Tensor("output.weight")
	for tok := range n {
		if emb.Data[tok*e] <= 0 {
			t.Fatalf("token %d: embedding dimension 0 = %v", tok, emb.Data[tok*e])
		}
		w := out.Data[tok*e]
		var rest float64
		for _, v := range out.Data[tok*e+1 : (tok+1)*e] {
			rest += float64(v * v)
		}
		word := types[tok] == tokenNormal
		if word && w <= 0 || !word && tok != TinyEOS && w >= 0 || rest > float64(w*w) {
			t.Errorf("token %d %q (type %d): output weight %v on dimension 0, %v squared on the rest", tok, tokens[tok], types[tok], w, rest)
		}
	}
	if eos := out.Data[TinyEOS*e]; eos <= out.Data[(n-1)*e] {
		t.Errorf("EOS output weight %v: want above a word's %v (EOSLogit 0.7)", eos, out.Data[(n-1)*e])
	}
}
