package prompts

import (
	"testing"
)

// Next runs on the engine's scheduling goroutine, so it must cost
// microseconds, not milliseconds. Run with:
//
//	go test ./prompts -run '^$' -bench . -benchmem
func benchNext(b *testing.B, yaml string) {
	m := loadYAML(b, yaml, map[string]string{})
	src := m.Source(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := src.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNextSynthetic1k(b *testing.B) {
	benchNext(b, "kind: Mix\nclasses: [{name: s, source: {type: synthetic, input_tokens: 1000}, max_tokens: 100}]\n")
}

func BenchmarkNextSynthetic8k(b *testing.B) {
	benchNext(b, "kind: Mix\nclasses: [{name: s, source: {type: synthetic, input_tokens: 8000}, max_tokens: 100}]\n")
}

func BenchmarkNextSyntheticLognormal(b *testing.B) {
	benchNext(b, "kind: Mix\nclasses: [{name: s, source: {type: synthetic, input_tokens: {dist: lognormal, mean: 1000, stddev: 600}}, max_tokens: {dist: normal, mean: 200, stddev: 50}}]\n")
}

func BenchmarkNextSharedPrefix(b *testing.B) {
	benchNext(b, "kind: Mix\nclasses: [{name: s, source: {type: synthetic, input_tokens: 3000, shared_prefix: {tokens: 2000, prompts_per_prefix: 8}}}]\n")
}

func BenchmarkNextProductionMix(b *testing.B) {
	m, err := LoadMix("../testdata/mixes/production.yaml", LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	src := m.Source(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := src.Next(); err != nil {
			b.Fatal(err)
		}
	}
}

// A Mooncake trace row of ~2,000 tokens in 512-token shared blocks.
func BenchmarkNextMooncakeRow(b *testing.B) {
	m, err := LoadMix("../testdata/mixes/trace-mooncake.yaml", LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	src := m.Source(1)
	for i := 0; i < b.N; i++ {
		if _, err := src.Next(); err != nil {
			src = m.Source(1) // the trace ended: start again
		}
	}
}

// FollowUp counts the answer's tokens (here ~60) and copies the history.
func BenchmarkFollowUp(b *testing.B) {
	m, err := LoadMix("../testdata/mixes/sessions.yaml", LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	src := m.Source(1)
	var first *Prompt
	for first == nil || first.FollowUp == nil {
		first, _ = src.Next()
	}
	answer := "Start with three short sessions of twenty to thirty minutes, alternating one minute of easy running with two minutes of walking. Rest a day between sessions."
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		first.FollowUp(answer)
	}
}

// Loading: building the tokenizer word list and corpus happens once per
// process; this is the cost of a mix load after that.
func BenchmarkLoadMix(b *testing.B) {
	for i := 0; i < b.N; i++ {
		if _, err := LoadMix("../testdata/mixes/production.yaml", LoadOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
