package openai

import (
	"fmt"
	"testing"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/transport"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
)

// A tool-call answer (delta.tool_calls arguments, finish_reason
// "tool_calls") is an answer: each arguments chunk is a chunk with its
// output tokens, never empty_answer, with usage or without it.
func TestToolCallAnswersCountTokens(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.Mode = sim.ModeFixed
	cfg.ToolCallShare = 1
	srv := simtest.Start(t, cfg)
	const maxTokens = 7
	for _, tc := range []struct {
		stream, usage bool
	}{{true, true}, {true, false}, {false, false}} {
		t.Run(fmt.Sprintf("stream=%v usage=%v", tc.stream, tc.usage), func(t *testing.T) {
			c := newClient(t, Config{Endpoint: transport.Endpoint{URL: srv.URL}, Model: "m",
				Stream: Bool(tc.stream), IncludeUsage: Bool(tc.usage), MaxTokens: maxTokens})
			rec := runOne(t, c, testPrompt, false)
			if rec.ErrorKind != loadgen.ErrNone {
				t.Fatalf("kind %q (%s)", rec.ErrorKind, rec.Error)
			}
			if rec.FinishReason != "tool_calls" {
				t.Errorf("finish reason %q, want tool_calls", rec.FinishReason)
			}
			if rec.OutputTokens != maxTokens {
				t.Errorf("output tokens %d (%s), want %d", rec.OutputTokens, rec.TokenSource, maxTokens)
			}
			wantChunks := maxTokens
			if !tc.stream {
				wantChunks = 1
			}
			if len(rec.Chunks) != wantChunks || rec.FirstAnswer != rec.Chunks[0].At {
				t.Errorf("%d chunks (first answer %v, first chunk %v), want %d, the first the first answer",
					len(rec.Chunks), rec.FirstAnswer, rec.Chunks[0].At, wantChunks)
			}
		})
	}
}
