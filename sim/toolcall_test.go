package sim

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

type toolChunk struct {
	Choices []struct {
		Delta struct {
			Content   *string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

// streamTool reads a tool-call stream: the arguments joined, the pieces
// with tokens, the first piece's id and name, the finish reason and the
// usage's completion tokens.
func streamTool(t *testing.T, res result) (args string, pieces int, id, name, finish string, completion int) {
	t.Helper()
	if res.err != nil || res.status != http.StatusOK {
		t.Fatalf("status %d err %v", res.status, res.err)
	}
	for _, e := range res.events {
		if e.data == "[DONE]" {
			continue
		}
		var c toolChunk
		if err := json.Unmarshal([]byte(e.data), &c); err != nil {
			t.Fatalf("chunk %q: %v", e.data, err)
		}
		if c.Usage != nil {
			completion = c.Usage.CompletionTokens
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil && *ch.Delta.Content != "" {
				t.Errorf("tool-call answer streamed content %q", *ch.Delta.Content)
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.ID != "" {
					if id != "" {
						t.Errorf("call id sent twice")
					}
					id, name = tc.ID, tc.Function.Name
					if tc.Type != "function" {
						t.Errorf("type %q, want function", tc.Type)
					}
				}
				if strings.TrimSpace(strings.Trim(tc.Function.Arguments, `{}":`)) != "" && strings.Contains(tc.Function.Arguments, " ") {
					pieces++
				}
				args += tc.Function.Arguments
			}
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return
}

func TestToolCallStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  func(*Config)
		want int // tokens streamed
	}{
		{"plain", func(*Config) {}, 6},
		{"finish with last chunk", func(c *Config) { c.FinishWithLastChunk = true }, 6},
		{"eos not streamed", func(c *Config) { c.EOSNotStreamed = true }, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := fastBatch()
			tc.cfg(&cfg)
			r := startSim(t, cfg)
			body := chatBody("what is the weather", 6, true, true)
			body["tools"] = []map[string]any{{"type": "function", "function": map[string]any{"name": "get_weather", "parameters": map[string]any{}}}}
			res := do(context.Background(), testClient(t), r.URL, "/v1/chat/completions", body, map[string]string{"X-Request-Id": "t1"})
			args, pieces, id, name, finish, completion := streamTool(t, res)
			if id != "chatcmpl-tool-t1" || name != "get_weather" {
				t.Errorf("id %q name %q, want chatcmpl-tool-t1 and get_weather", id, name)
			}
			if finish != "tool_calls" {
				t.Errorf("finish_reason %q, want tool_calls", finish)
			}
			var parsed struct{ Input string }
			if err := json.Unmarshal([]byte(args), &parsed); err != nil {
				t.Fatalf("arguments %q are not a JSON object: %v", args, err)
			}
			if want := string(answerText(tc.want)); parsed.Input != want || pieces != tc.want {
				t.Errorf("arguments input %q in %d pieces, want %q in %d", parsed.Input, pieces, want, tc.want)
			}
			if completion != 6 {
				t.Errorf("usage completion_tokens %d, want 6", completion)
			}
			waitIdle(t, r.Server)
			if tr := truthByID(t, r.Server, "t1"); tr.FinishReason != "tool_calls" || tr.ToolCall != "get_weather" || tr.OutputTokens != tc.want {
				t.Errorf("truth finish %q tool %q output %d", tr.FinishReason, tr.ToolCall, tr.OutputTokens)
			}
		})
	}
}

// ToolCallShare answers a share of requests without tools with a call;
// the others answer text. Not streamed: one message with the call.
func TestToolCallShare(t *testing.T) {
	cfg := fastBatch()
	cfg.ToolCallShare = 0.5
	cfg.Seed = 3
	r := startSim(t, cfg)
	c := testClient(t)
	calls := 0
	const n = 40
	for i := range n {
		res := do(context.Background(), c, r.URL, "/v1/chat/completions", chatBody("hi", 3, false, false), nil)
		var body struct {
			Choices []struct {
				Message struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Function struct{ Name, Arguments string }
					} `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(res.body, &body); err != nil || len(body.Choices) != 1 {
			t.Fatalf("request %d: %v %s", i, err, res.body)
		}
		ch := body.Choices[0]
		if len(ch.Message.ToolCalls) == 0 {
			if ch.FinishReason != "length" || ch.Message.Content == nil {
				t.Errorf("text answer: finish %q content %v", ch.FinishReason, ch.Message.Content)
			}
			continue
		}
		calls++
		f := ch.Message.ToolCalls[0].Function
		if ch.FinishReason != "tool_calls" || ch.Message.Content != nil || f.Name != defaultToolName || !json.Valid([]byte(f.Arguments)) {
			t.Errorf("tool answer: finish %q content %v function %+v", ch.FinishReason, ch.Message.Content, f)
		}
	}
	if calls < n/4 || calls > 3*n/4 {
		t.Errorf("%d of %d answered with a tool call at share 0.5", calls, n)
	}
}
