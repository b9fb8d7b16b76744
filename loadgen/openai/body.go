package openai

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/tailgate-llm/tailgate/prompts"
)

// plainBody is mapBody's bytes for a prompt without Params, written
// without a map or reflection: the same keys in the same (sorted) order,
// strings escaped as encoding/json does with HTML escaping off. The body
// is built for every request: the map's encoding was 6% of a 1-token
// closed loop's CPU (pprof, bench-peers).
func (c *Client) plainBody(p *prompts.Prompt, maxTokens int) []byte {
	return c.appendPlainBody(nil, p, maxTokens)
}

// appendPlainBody appends plainBody's bytes to b.
func (c *Client) appendPlainBody(b []byte, p *prompts.Prompt, maxTokens int) []byte {
	if n := 128 + len(p.Text) + 32*len(p.Messages); cap(b)-len(b) < n {
		b = append(make([]byte, 0, len(b)+n), b...)
	}
	b = append(b, '{')
	if maxTokens > 0 {
		b = append(b, `"max_tokens":`...)
		b = strconv.AppendInt(b, int64(maxTokens), 10)
		b = append(b, ',')
	}
	if c.api == APIChat {
		b = append(b, `"messages":[`...)
		for i, m := range p.Chat() {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = appendString(b, m.Role)
			b = append(b, `,"content":`...)
			b = appendString(b, m.Content)
			b = append(b, '}')
		}
		b = append(b, "],"...)
	}
	if model := c.modelOf(p); model != "" {
		b = append(b, `"model":`...)
		b = appendString(b, model)
		b = append(b, ',')
	}
	if c.api != APIChat {
		b = append(b, `"prompt":`...)
		b = appendString(b, p.Completion())
		b = append(b, ',')
	}
	b = append(b, `"stream":`...)
	b = strconv.AppendBool(b, c.stream)
	if c.stream && c.usage {
		b = append(b, `,"stream_options":{"include_usage":true}`...)
	}
	return append(b, '}')
}

// appendString writes s as a JSON string the way encoding/json does with
// SetEscapeHTML(false): printable ASCII but quote and backslash as it is,
// anything else through encoding/json itself.
func appendString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.Encode(s)
			return append(b, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// modelOf is the model p is sent to: the one it names (a class's or a
// trace's model, a LoRA adapter), else the run's.
func (c *Client) modelOf(p *prompts.Prompt) string {
	if m := p.ModelName(); m != "" {
		return m
	}
	return c.model
}
