package prompts_test

import (
	"errors"
	"fmt"
	"io"

	"github.com/tailgate-llm/tailgate/prompts"
)

// The engine's side of a mix: load it (every error before anything is
// sent), then draw prompts from its seeded stream.
func ExampleLoadMix() {
	mix, err := prompts.LoadMix("../testdata/mixes/chat.yaml", prompts.LoadOptions{})
	if err != nil {
		fmt.Println(err) // e.g. chat.yaml:12: classes[1].weight: must not be negative
		return
	}
	fmt.Println(mix.Classes(), mix.IsTrace())
	src := mix.Source(mix.Seed())
	for i := 0; i < 3; i++ {
		p, _ := src.Next()
		fmt.Println(p.ID, p.InputTokens, p.MaxTokens)
	}
	// Output:
	// [chat sharegpt] false
	// chat-0 10 350
	// sharegpt-0 9 63
	// chat-1 21 48
}

// A trace is replayed on its own clock: each prompt is due At after the
// start, and the source ends.
func ExampleMix_IsTrace() {
	mix, err := prompts.LoadMix("../testdata/mixes/trace-azure.yaml", prompts.LoadOptions{TimeScale: 0.5})
	if err != nil {
		fmt.Println(err)
		return
	}
	src := mix.Source(mix.Seed())
	n := 0
	for {
		p, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if n < 2 {
			fmt.Println(p.ID, p.At, p.InputTokens, p.MaxTokens)
		}
		n++
	}
	fmt.Println(n, "requests over", mix.Span())
	// Output:
	// azure-conv-0 0s 1276 344
	// azure-conv-1 172.7365ms 947 189
	// 240 requests over 49.4719184s
}

// A session's turns: the engine sends the first, then calls FollowUp with
// the answer and sends the result Think after the answer ended.
func ExamplePrompt_FollowUp() {
	mix, err := prompts.LoadMix("../testdata/mixes/sessions.yaml", prompts.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	p, _ := mix.Source(mix.Seed()).Next()
	for p != nil {
		fmt.Println(p.Session, p.Turn, len(p.Messages), "messages, think", p.Think)
		if p.FollowUp == nil {
			break
		}
		p = p.FollowUp("an answer from the server")
	}
	// Output:
	// sharegpt-sessions-0 0 2 messages, think 0s
	// sharegpt-sessions-0 1 4 messages, think 1.552646826s
}
