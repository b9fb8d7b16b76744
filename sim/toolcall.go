package sim

// Tool-call answers. A chat request that carries tools, or one drawn with
// Config.ToolCallShare, is answered the way vLLM's tool parsers answer an
// agent's call: no content, one tool call whose arguments are the answer's
// tokens, finish_reason "tool_calls". Streamed as OpenAI streams it: the
// role chunk, then each content chunk's tokens as a delta.tool_calls
// arguments piece, the first carrying the call's id, type and function
// name; the finish chunk says "tool_calls". The arguments, joined, are the
// JSON object {"input": "<the answer's words>"}. Every token of the
// answer is in the arguments, so usage completion_tokens is what was
// streamed, as for text. llama-server's stream dialect answers text.

// defaultToolName is the function called when the request's tools name
// none (the share draws a call without tools).
const defaultToolName = "sim_tool"

// toolSalt seeds the tool-call draw apart from the fault draws.
const toolSalt = 0x7001ca11

// Pieces of a tool call, inside a JSON string (the arguments).
const (
	toolArgsOpen  = `{\"input\": \"`
	toolArgsClose = `\"}`
)

// toolDraw reports whether the request with arrival number seq is
// answered with a tool call by the share alone.
func toolDraw(share float64, seed uint64, seq int64) bool {
	return share > 0 && unitFloat(seed, seq, toolSalt) < share
}

// toolCallID is the call's id, vLLM's form.
func toolCallID(reqID string) string { return "chatcmpl-tool-" + reqID }

// appendToolChunk appends one content chunk's delta as a tool-call
// arguments piece: the first (start) with id, type and name, the last
// (end) closing the arguments.
func (rs *responder) appendToolChunk(b, text []byte, start, end, last bool) []byte {
	b = append(b, `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,`...)
	if start {
		b = append(b, `"id":`...)
		b = appendJSONString(b, toolCallID(rs.id))
		b = append(b, `,"type":"function",`...)
	}
	b = append(b, `"function":{`...)
	if start {
		b = append(b, `"name":`...)
		b = appendJSONString(b, rs.tool)
		b = append(b, ',')
	}
	b = append(b, `"arguments":"`...)
	if start {
		b = append(b, toolArgsOpen...)
	}
	b = append(b, text...)
	if end {
		b = append(b, toolArgsClose...)
	}
	b = append(b, `"}}]},"logprobs":null,"finish_reason":`...)
	if last {
		b = append(b, `"tool_calls","stop_reason":null}]`...)
	} else {
		b = append(b, `null}]`...)
	}
	return b
}

// chatFinishTool is the finish chunk of a tool-call answer.
const chatFinishTool = `,"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls","stop_reason":null}]`

// appendToolClose appends a delta that only closes the arguments, for an
// answer whose last token (an unsent EOS) came with no chunk.
func (rs *responder) appendToolClose(b []byte) []byte {
	b = append(b, rs.base...)
	b = append(b, `,"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`...)
	b = append(b, toolArgsClose...)
	b = append(b, `"}}]},"logprobs":null,"finish_reason":null}]`...)
	return append(b, eventEnd...)
}

// appendToolMessage appends a whole answer's message with its tool call.
func (rs *responder) appendToolMessage(b, text []byte) []byte {
	b = append(b, `,"choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":`...)
	b = appendJSONString(b, toolCallID(rs.id))
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendJSONString(b, rs.tool)
	b = append(b, `,"arguments":"`...)
	b = append(b, toolArgsOpen...)
	b = append(b, text...)
	b = append(b, toolArgsClose...)
	return append(b, `"}}]}`...)
}
