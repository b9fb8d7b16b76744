package openai

import (
	"bytes"
	"encoding/json"
	"errors"

	"github.com/tailgate-llm/tailgate/loadgen/transport"
)

// decodeSlow applies the rules on event through encoding/json. It is the
// fallback for input the fast path declines, the judge of input it
// rejects, and the oracle the fuzz tests compare the fast path with.
func decodeSlow(data []byte, ev *event, text []byte, keepText bool) ([]byte, error) {
	ev.reset()
	if !json.Valid(data) {
		var v any
		err := json.Unmarshal(data, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return text, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return text, err
	}
	top, ok := v.(map[string]any)
	if !ok {
		return text, errors.New("chunk is not a JSON object")
	}
	if choices, ok := top["choices"].([]any); ok {
		for _, c := range choices {
			choice, ok := c.(map[string]any)
			if !ok {
				continue
			}
			ev.choices++
			delta, _ := choice["delta"].(map[string]any)
			message, _ := choice["message"].(map[string]any)
			textVal, _ := choice["text"].(string)
			dc, _ := delta["content"].(string)
			mc, _ := message["content"].(string)
			if dc != "" || mc != "" || textVal != "" || nonEmptyArray(delta["tool_calls"]) || nonEmptyArray(message["tool_calls"]) {
				ev.answer = true
			}
			if nonEmptyString(delta["reasoning"]) || nonEmptyString(delta["reasoning_content"]) ||
				nonEmptyString(message["reasoning"]) || nonEmptyString(message["reasoning_content"]) {
				ev.reasoning = true
			}
			if f, _ := choice["finish_reason"].(string); f != "" {
				ev.finish = f
			}
			if keepText {
				text = append(text, dc...)
				text = append(text, mc...)
				text = append(text, textVal...)
			}
		}
	}
	if usage, ok := top["usage"].(map[string]any); ok {
		ev.usage = true
		ev.promptTokens = jsonCount(usage["prompt_tokens"])
		ev.completionTokens = jsonCount(usage["completion_tokens"])
	}
	if timings, ok := top["timings"].(map[string]any); ok {
		ev.predictedTokens = jsonCount(timings["predicted_n"])
		ev.promptMs, ev.predictedMs = jsonMs(timings["prompt_ms"]), jsonMs(timings["predicted_ms"])
	}
	if e, present := top["error"]; present && e != nil {
		ev.isError = true
		switch e := e.(type) {
		case string:
			ev.errMessage = e
		case map[string]any:
			ev.errMessage, _ = e["message"].(string)
			if c := transport.JSONCode(e["code"]); c != nil {
				ev.errCode = *c
			} else if c := transport.JSONCode(e["http_status_code"]); c != nil {
				ev.errCode = *c
			}
		}
	}
	return text, nil
}

func nonEmptyString(v any) bool { s, _ := v.(string); return s != "" }
func nonEmptyArray(v any) bool  { a, _ := v.([]any); return len(a) > 0 }

func jsonCount(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	return tokenCount(string(n))
}

func jsonMs(v any) float64 {
	n, ok := v.(json.Number)
	if !ok {
		return -1
	}
	return timingMs(string(n))
}
