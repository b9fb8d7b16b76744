package prompts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
)

// conv is one dataset record: a chat request (JSONL) or a conversation
// (ShareGPT), before a class turns it into prompts.
type conv struct {
	line      int
	messages  []Message
	text      string         // completions form ("prompt"); messages empty
	maxTokens int            // the request's own max_tokens; 0 = none
	params    map[string]any // the request's own sampling fields
}

// chatParamKeys are the request fields a chat JSONL line may carry into
// Prompt.Params. Other unknown fields (ids, metadata) are ignored so they
// never reach a server that rejects unknown fields; model and stream are
// the client's to set.
var chatParamKeys = map[string]bool{
	"temperature": true, "top_p": true, "top_k": true, "min_p": true,
	"presence_penalty": true, "frequency_penalty": true, "repetition_penalty": true,
	"stop": true, "seed": true, "ignore_eos": true, "min_tokens": true,
	"response_format": true, "tools": true, "tool_choice": true, "logit_bias": true,
}

// chatRoles are the message roles accepted in chat JSONL.
var chatRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// parseChatJSONL reads OpenAI chat requests, one JSON object a line:
// {"messages": [{"role": ..., "content": ...}], "max_tokens": n, ...} or
// {"prompt": "..."} for the completions form. Blank lines are skipped.
// limit > 0 stops after that many records.
func parseChatJSONL(name string, r io.Reader, limit int) ([]conv, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var out []conv
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, errAt(name, line, "", "read: %v", err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			c, perr := parseChatLine(name, line, t)
			if perr != nil {
				return nil, perr
			}
			out = append(out, c)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
		if err == io.EOF {
			break
		}
	}
	if len(out) == 0 {
		return nil, errAt(name, 0, "", "no requests in file")
	}
	return out, nil
}

// jsonObject decodes one JSON object, with the errors our files report.
func jsonObject(name string, line int, b []byte) (map[string]json.RawMessage, *Error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, errAt(name, line, "", "want a JSON object, got %s", te.Value)
		}
		return nil, errAt(name, line, "", "not JSON: %v", err)
	}
	if obj == nil {
		return nil, errAt(name, line, "", "want a JSON object, got null")
	}
	return obj, nil
}

func parseChatLine(name string, line int, b []byte) (conv, *Error) {
	obj, err := jsonObject(name, line, b)
	if err != nil {
		return conv{}, err
	}
	c := conv{line: line}
	msgs, hasMsgs := obj["messages"]
	prompt, hasPrompt := obj["prompt"]
	switch {
	case hasMsgs && hasPrompt:
		return conv{}, errAt(name, line, "prompt", "give messages or prompt, not both")
	case hasPrompt:
		if err := json.Unmarshal(prompt, &c.text); err != nil {
			return conv{}, errAt(name, line, "prompt", "want a string")
		}
		if c.text == "" {
			return conv{}, errAt(name, line, "prompt", "empty")
		}
	case hasMsgs:
		var raw []map[string]json.RawMessage
		if err := json.Unmarshal(msgs, &raw); err != nil {
			return conv{}, errAt(name, line, "messages", "want a list of {role, content} objects")
		}
		if len(raw) == 0 {
			return conv{}, errAt(name, line, "messages", "empty")
		}
		c.messages = make([]Message, len(raw))
		for i, m := range raw {
			f := fmt.Sprintf("messages[%d]", i)
			if m == nil {
				return conv{}, errAt(name, line, f, "want an object")
			}
			rr, ok := m["role"]
			if !ok {
				return conv{}, missingAt(name, line, f+".role")
			}
			if err := json.Unmarshal(rr, &c.messages[i].Role); err != nil || !chatRoles[c.messages[i].Role] {
				return conv{}, errAt(name, line, f+".role", "want one of system, developer, user, assistant, tool; got %s", clip(rr))
			}
			content, perr := messageContent(m["content"])
			if perr != "" {
				return conv{}, errAt(name, line, f+".content", "%s", perr)
			}
			c.messages[i].Content = content
		}
	default:
		return conv{}, missingAt(name, line, "messages")
	}
	for _, key := range []string{"max_tokens", "max_completion_tokens"} {
		v, ok := obj[key]
		if !ok || string(v) == "null" {
			continue
		}
		n, perr := wholeJSON(v)
		if perr != "" {
			return conv{}, errAt(name, line, key, "%s", perr)
		}
		c.maxTokens = n
	}
	for k, v := range obj {
		if !chatParamKeys[k] {
			continue
		}
		var a any
		if err := json.Unmarshal(v, &a); err != nil {
			return conv{}, errAt(name, line, k, "%v", err)
		}
		if c.params == nil {
			c.params = map[string]any{}
		}
		c.params[k] = a
	}
	return c, nil
}

// messageContent reads a message content: a string, null, or a list of
// text parts (joined with newlines, as chat templates do).
func messageContent(raw json.RawMessage) (string, string) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", ""
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, ""
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", "want a string or a list of text parts"
	}
	var b []byte
	for i, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", fmt.Sprintf("part %d: only {\"type\": \"text\", \"text\": ...} parts are supported", i)
		}
		if i > 0 {
			b = append(b, '\n')
		}
		b = append(b, *p.Text...)
	}
	return string(b), ""
}

// wholeJSON reads a JSON number that is a whole count of tokens.
func wholeJSON(raw json.RawMessage) (int, string) {
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		return 0, fmt.Sprintf("want a number, got %s", clip(raw))
	}
	if f != math.Trunc(f) || f < 0 || f > tokenLimit {
		return 0, fmt.Sprintf("want a whole number in [0, %d], got %s", tokenLimit, clip(raw))
	}
	return int(f), ""
}

// clip shortens a raw value for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}
