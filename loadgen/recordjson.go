package loadgen

import (
	"encoding/json"
	"strconv"
	"time"
)

// AppendJSON appends r's requests.jsonl line (without the newline) to b:
// byte for byte what json.Marshal(r) writes (compact: what
// json.Marshal(r.Compacted()) writes), without reflection. Records are
// written as requests finish, so this is on the generator's hot path:
// encoding/json took about 11% of the CPU of a 1-token closed loop
// (pprof, bench-peers), this a fraction of that.
func (r *Record) AppendJSON(b []byte, compact bool) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendInt(b, r.Seq, 10)
	b = appendStrField(b, "id", r.ID)
	b = appendStrField(b, "class", r.Class)
	b = appendStrField(b, "model", r.Model)
	b = appendStrField(b, "response_model", r.ResponseModel)
	b = appendStrField(b, "stage", r.Stage)
	b = appendStrField(b, "session", r.Session)
	if r.Turn != 0 {
		b = appendIntField(b, "turn", int64(r.Turn))
	}
	b = appendStrField(b, "call", r.Call)
	if len(r.After) > 0 {
		b = append(b, `,"after":[`...)
		for i, a := range r.After {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, a)
		}
		b = append(b, ']')
	}
	if w := us(r.ToolWait); w != 0 {
		b = appendIntField(b, "tool_wait_us", w)
	}
	if r.NotSent {
		b = append(b, `,"not_sent":true`...)
	}
	if r.SessionLast {
		b = append(b, `,"session_last":true`...)
	}
	if r.Warmup {
		b = append(b, `,"warmup":true`...)
	}
	b = appendIntField(b, "intended_us", us(r.Intended))
	b = appendIntField(b, "sent_us", us(r.Sent))
	compact = compact || r.Compact
	if len(r.Chunks) > 0 {
		b = appendIntField(b, "first_token_us", us(r.Chunks[0].At))
	}
	if r.FirstAnswer > 0 {
		b = appendIntField(b, "first_answer_us", us(r.FirstAnswer))
	}
	b = appendIntField(b, "end_us", us(r.End))
	if !compact && len(r.Chunks) > 0 {
		b = append(b, `,"chunk_us":[`...)
		for i, c := range r.Chunks {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, us(c.At), 10)
		}
		b = append(b, `],"chunk_tokens":[`...)
		for i, c := range r.Chunks {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c.Tokens), 10)
		}
		b = append(b, ']')
	}
	if r.RequestedInputTokens != 0 {
		b = appendIntField(b, "requested_input_tokens", int64(r.RequestedInputTokens))
	}
	b = appendIntField(b, "input_tokens", int64(r.InputTokens))
	b = appendIntField(b, "output_tokens", int64(r.OutputTokens))
	if r.MaxTokens != 0 {
		b = appendIntField(b, "max_tokens", int64(r.MaxTokens))
	}
	b = appendStrField(b, "token_source", r.TokenSource)
	b = appendStrField(b, "chunk_token_source", r.ChunkTokenSource)
	if r.Status != 0 {
		b = appendIntField(b, "status", int64(r.Status))
	}
	b = appendStrField(b, "error_kind", string(r.ErrorKind))
	b = appendStrField(b, "error", r.Error)
	b = appendStrField(b, "finish_reason", r.FinishReason)
	if r.Unstreamed {
		b = append(b, `,"unstreamed":true`...)
	}
	if r.Retries != 0 {
		b = appendIntField(b, "retries", int64(r.Retries))
	}
	if compact {
		b = append(b, `,"compact":true`...)
		n := len(r.Chunks)
		if r.Compact {
			n = r.ChunkCount
		}
		if n != 0 {
			b = appendIntField(b, "chunks", int64(n))
		}
		switch {
		case len(r.Chunks) > 1:
			b = appendIntField(b, "last_chunk_us", us(r.Chunks[len(r.Chunks)-1].At))
		case r.LastChunkAt > 0:
			b = appendIntField(b, "last_chunk_us", us(r.LastChunkAt))
		}
	}
	if s := r.Server; s != nil {
		b = append(b, `,"server":{`...)
		n := len(b)
		for _, f := range [...]struct {
			name string
			v    time.Duration
		}{{"total_us", s.Total}, {"load_us", s.Load}, {"prompt_us", s.Prompt}, {"eval_us", s.Eval}} {
			if us(f.v) != 0 {
				b = appendIntField(b, f.name, us(f.v))
			}
		}
		if q, ok := s.Queue(); ok {
			b = appendIntField(b, "queue_us", us(q))
		}
		if len(b) > n {
			b = append(b[:n], b[n+1:]...) // the first field's comma
		}
		b = append(b, '}')
	}
	return append(b, '}')
}

func appendIntField(b []byte, name string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

// appendStrField appends ,"name":"s" unless s is empty (omitempty).
func appendStrField(b []byte, name, s string) []byte {
	if s == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendJSONString(b, s)
}

// appendJSONString writes s as encoding/json does: plain printable ASCII
// as it is, anything else (quotes, backslashes, <, >, &, control bytes,
// non-ASCII, invalid UTF-8) through encoding/json itself.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
