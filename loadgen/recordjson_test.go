package loadgen

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// AppendJSON writes exactly what encoding/json writes for the full and the
// compact forms, awkward strings included, and a compact record read back
// writes its line again unchanged.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	t.Run("session call", func(t *testing.T) {
		r := &Record{Seq: 9, Session: "s", Call: "b", After: []string{"a", "c"}, ToolWait: 2 * time.Millisecond, SessionLast: true}
		const want = `"session":"s","call":"b","after":["a","c"],"tool_wait_us":2000,"session_last":true`
		line := r.AppendJSON(nil, false)
		if !strings.Contains(string(line), want) {
			t.Errorf("got %s, want it to hold %s", line, want)
		}
		var back Record
		if err := json.Unmarshal(line, &back); err != nil || back.Call != "b" || strings.Join(back.After, ",") != "a,c" ||
			back.ToolWait != r.ToolWait || !back.SessionLast || back.NotSent {
			t.Errorf("read back %+v (%v)", back, err)
		}
	})
	t.Run("server", func(t *testing.T) {
		r := &Record{Server: &ServerTimings{Total: 30 * time.Millisecond, Load: 20 * time.Microsecond, Prompt: 2 * time.Millisecond, Eval: 25 * time.Millisecond}}
		const want = `"server":{"total_us":30000,"load_us":20,"prompt_us":2000,"eval_us":25000,"queue_us":2980}`
		if got := string(r.AppendJSON(nil, false)); !strings.Contains(got, want) {
			t.Errorf("got %s, want it to hold %s", got, want)
		}
		var back Record
		if err := json.Unmarshal(r.AppendJSON(nil, false), &back); err != nil || back.Server == nil || *back.Server != *r.Server {
			t.Errorf("read back %+v (%v), want %+v", back.Server, err, r.Server)
		}
	})
	recs := []*Record{
		{},
		{Seq: 7, ID: "chat-1", Class: "chat", Model: "lora-a", ResponseModel: "base\"-7b", Stage: "peak", Session: "s1", Turn: 2, Warmup: true, Intended: 1500 * time.Microsecond,
			Sent: 1600*time.Microsecond + 999, FirstAnswer: 9 * time.Millisecond, End: 20 * time.Millisecond,
			Chunks: []Chunk{{At: 5 * time.Millisecond, Tokens: 1}, {At: 9 * time.Millisecond, Tokens: 3}}, RequestedInputTokens: 11,
			InputTokens: 12, OutputTokens: 4, TokenSource: TokensFromUsage, ChunkTokenSource: chunkTokensServer, Status: 200,
			FinishReason: "length", Unstreamed: true, Retries: 1},
		{Seq: 1 << 41, ID: `a"b\c<d>&e`, Class: "ünïcode ☃", Error: "line1\nline2\t\x01 \u2028 \xff", ErrorKind: ErrServer, Status: 503,
			Intended: -5 * time.Microsecond, End: time.Hour},
		{Seq: 3, Chunks: []Chunk{{At: time.Millisecond, Tokens: 1}}, OutputTokens: 1, End: 2 * time.Millisecond},
		// Ollama's four timings (queue derived), llama.cpp's two (no queue),
		// and one under a microsecond (absent, as not reported).
		{Seq: 4, Server: &ServerTimings{Total: 30 * time.Millisecond, Load: 20 * time.Microsecond, Prompt: 2 * time.Millisecond, Eval: 25 * time.Millisecond}},
		{Seq: 5, Server: &ServerTimings{Prompt: 1500 * time.Microsecond, Eval: 9 * time.Millisecond}},
		{Seq: 6, Server: &ServerTimings{Load: 999}},
		// A session call: its id, the calls it waited for, its tool wait,
		// and the marks of an unsent call and of a session's last record.
		{Seq: 8, Session: "s2", Turn: 1, Call: "3.1", After: []string{"2", `q"uote`}, ToolWait: 1500 * time.Microsecond,
			NotSent: true, SessionLast: true, ErrorKind: ErrCancelledByDependency},
	}
	for i, r := range recs {
		for _, compact := range []bool{false, true} {
			var want []byte
			var err error
			if compact {
				want, err = json.Marshal(r.Compacted())
			} else {
				want, err = json.Marshal(r.jsonForm(false))
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := r.AppendJSON(nil, compact); string(got) != string(want) {
				t.Errorf("record %d compact=%v:\n got %s\nwant %s", i, compact, got, want)
			}
			if !compact {
				continue
			}
			var back Record
			if err := json.Unmarshal(want, &back); err != nil {
				t.Fatal(err)
			}
			// (Invalid UTF-8 came back as U+FFFD: compare with encoding/json's
			// line for what was read.)
			want, _ = json.Marshal(back.jsonForm(false))
			if got := back.AppendJSON(nil, false); string(got) != string(want) {
				t.Errorf("record %d read back compact:\n got %s\nwant %s", i, got, want)
			}
		}
	}
}
