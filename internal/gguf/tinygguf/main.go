// Command tinygguf writes gguf.Tiny to a file, for scripts/ollama.sh serve
// (the tests write it themselves):
//
//	go run ./internal/gguf/tinygguf -o tiny.gguf [-eos-logit 1.2] [-seed 1]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/internal/gguf"
)

func main() {
	out := flag.String("o", "tiny.gguf", "file to write")
	eos := flag.Float64("eos-logit", 0, "end-of-sequence logit above the words (0: answers run to their token limit)")
	seed := flag.Uint64("seed", 1, "weights seed")
	flag.Parse()
	f, err := os.Create(*out)
	if err == nil {
		err = gguf.Write(f, gguf.Tiny(gguf.TinyOptions{Seed: *seed, EOSLogit: *eos}))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tinygguf:", err)
		os.Exit(1)
	}
}
