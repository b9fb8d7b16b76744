package prompts

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// OpenTelemetry GenAI spans, a session per line: {trace_id, spans[]}.
// Spans whose gen_ai.operation.name is chat, generate or text_completion
// (or absent) are calls, sent with their recorded input messages;
// execute_tool spans are not sent but mark the gap after a call as a
// tool's. A call waits for the predecessor whose recorded output is an
// assistant message of its input (a causal edge), else for the latest
// span that ended before it started (a temporal edge).

type otelSession struct {
	TraceID string     `json:"trace_id"`
	Spans   []otelSpan `json:"spans"`
}

type otelSpan struct {
	SpanID     string                     `json:"span_id"`
	Name       string                     `json:"name"`
	StartTime  json.RawMessage            `json:"start_time"`
	EndTime    json.RawMessage            `json:"end_time"`
	Attributes map[string]json.RawMessage `json:"attributes"`
}

// otelTime reads an RFC 3339 time or Unix nanoseconds.
func otelTime(raw json.RawMessage) (int64, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t, err := time.Parse(time.RFC3339Nano, s)
		return t.UnixNano(), err == nil
	}
	var n json.Number
	if decodeNumbers(raw, &n) == nil {
		if v, err := n.Int64(); err == nil {
			return v, true
		}
	}
	return 0, false
}

// otelMessages reads gen_ai.input/output.messages: a JSON array, or a
// string holding one; a content given as parts is joined.
func otelMessages(raw json.RawMessage) ([]Message, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(s)
	}
	var ms []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Parts   []struct {
			Type    string `json:"type"`
			Content string `json:"content"`
			Text    string `json:"text"`
		} `json:"parts"`
	}
	if err := json.Unmarshal(raw, &ms); err != nil {
		return nil, err
	}
	out := make([]Message, 0, len(ms))
	for _, m := range ms {
		var text string
		if len(m.Content) > 0 && json.Unmarshal(m.Content, &text) != nil {
			var parts []struct{ Text, Content string }
			if err := json.Unmarshal(m.Content, &parts); err != nil {
				return nil, fmt.Errorf("content of a %s message is neither text nor parts", m.Role)
			}
			for _, p := range parts {
				text += p.Text + p.Content
			}
		}
		for _, p := range m.Parts {
			text += p.Text + p.Content
		}
		out = append(out, Message{Role: m.Role, Content: text})
	}
	return out, nil
}

func (m *Mix) loadOTel(c *class) error {
	var ss []*gsession
	err := jsonDocs(c.path, func(file string, line int, raw json.RawMessage) error {
		var os otelSession
		if err := json.Unmarshal(raw, &os); err != nil {
			return errAt(file, line, "", "not a session of spans {trace_id, spans}: %v", err)
		}
		s, err := otelGraph(file, line, &os)
		if err != nil {
			return err
		}
		if s != nil {
			ss = append(ss, s)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return m.finishSessions(c, ss)
}

type otelCall struct {
	gcall
	start, end int64
	output     string
}

func otelGraph(file string, line int, os *otelSession) (*gsession, error) {
	if os.TraceID == "" {
		return nil, missingAt(file, line, "trace_id")
	}
	var calls []otelCall
	var tools [][2]int64
	for i, sp := range os.Spans {
		field := fmt.Sprintf("spans[%d]", i)
		start, ok1 := otelTime(sp.StartTime)
		end, ok2 := otelTime(sp.EndTime)
		if !ok1 || !ok2 || end < start {
			return nil, errAt(file, line, field+".start_time", "want RFC 3339 times or Unix nanoseconds, end not before start")
		}
		var op string
		if raw, ok := sp.Attributes["gen_ai.operation.name"]; ok {
			_ = json.Unmarshal(raw, &op)
		}
		switch op {
		case "execute_tool":
			tools = append(tools, [2]int64{start, end})
			continue
		case "", "chat", "generate", "text_completion":
		default:
			continue
		}
		in, err := otelMessages(sp.Attributes["gen_ai.input.messages"])
		if err != nil {
			return nil, errAt(file, line, field+".attributes.gen_ai.input.messages", "want a list of messages: %v", err)
		}
		if len(in) == 0 {
			return nil, errAt(file, line, field+".attributes.gen_ai.input.messages", "missing or empty: the replay sends the recorded input")
		}
		outMsgs, err := otelMessages(sp.Attributes["gen_ai.output.messages"])
		if err != nil {
			return nil, errAt(file, line, field+".attributes.gen_ai.output.messages", "%v", err)
		}
		cl := otelCall{start: start, end: end}
		for _, om := range outMsgs {
			cl.output += om.Content
		}
		cl.id, cl.line, cl.msgs = sp.SpanID, line, in
		if cl.id == "" {
			cl.id = fmt.Sprintf("span%d", i)
		}
		if raw, ok := sp.Attributes["gen_ai.request.model"]; ok {
			_ = json.Unmarshal(raw, &cl.model)
		}
		for _, f := range []struct {
			dst  *int
			keys []string
		}{{&cl.in, []string{"gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens"}}, {&cl.out, []string{"gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens"}}} {
			for _, k := range f.keys {
				if raw, ok := sp.Attributes[k]; ok {
					v, msg := wholeJSON(raw)
					if msg != "" {
						return nil, errAt(file, line, field+".attributes."+k, "%s", msg)
					}
					*f.dst = v
					break
				}
			}
		}
		if cl.out == 0 {
			return nil, errAt(file, line, field+".attributes.gen_ai.usage.output_tokens", "missing or 0: the replay sends the recorded output length")
		}
		calls = append(calls, cl)
	}
	if len(calls) == 0 {
		return nil, nil
	}
	sort.SliceStable(calls, func(i, j int) bool { return calls[i].start < calls[j].start })
	t0 := calls[0].start
	s := &gsession{id: os.TraceID, line: line, startNs: t0}
	for i := range calls {
		cl := &calls[i]
		cl.startNs, cl.endNs = cl.start-t0, cl.end-t0
		from := -1
		// Causal: an assistant message of the input is a predecessor's output.
		for _, msg := range cl.msgs {
			if msg.Role != "assistant" || msg.Content == "" {
				continue
			}
			for j := i - 1; j >= 0; j-- {
				if calls[j].end <= cl.start && calls[j].output == msg.Content && (from < 0 || j > from) {
					from = j
					break
				}
			}
		}
		if from < 0 {
			// Temporal: the latest span that ended before this one began.
			for j := 0; j < i; j++ {
				if calls[j].end <= cl.start && (from < 0 || calls[j].end >= calls[from].end) {
					from = j
				}
			}
		}
		if from < 0 {
			cl.offset = time.Duration(cl.start - t0)
		} else {
			p := &calls[from]
			tool := false
			for _, t := range tools {
				if t[0] >= p.end && t[1] <= cl.start {
					tool = true
				}
			}
			cl.after = []Edge{{From: from, On: OnEnd, Delay: time.Duration(cl.start - p.end), Tool: tool}}
		}
		s.calls = append(s.calls, cl.gcall)
	}
	if len(s.calls[0].after) > 0 || strings.TrimSpace(s.id) == "" {
		return nil, errAt(file, line, "trace_id", "bad session")
	}
	laneTurns(s.calls)
	return s, nil
}
