package loadgen

import (
	"encoding/json"
	"testing"
	"time"
)

// AppendJSON writes exactly what encoding/json writes for the full and the
// compact forms, awkward strings included, and a compact record read back
// writes its line again unchanged.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	recs := []*Record{
		{},
		{Seq: 7, ID: "chat-1", Class: "chat", Stage: "peak", Session: "s1", Turn: 2, Warmup: true, Intended: 1500 * time.Microsecond,
			Sent: 1600*time.Microsecond + 999, FirstAnswer: 9 * time.Millisecond, End: 20 * time.Millisecond,
			Chunks: []Chunk{{At: 5 * time.Millisecond, Tokens: 1}, {At: 9 * time.Millisecond, Tokens: 3}}, RequestedInputTokens: 11,
			InputTokens: 12, OutputTokens: 4, TokenSource: TokensFromUsage, ChunkTokenSource: ChunkTokensServer, Status: 200,
			FinishReason: "length", Unstreamed: true, Retries: 1},
		{Seq: 1 << 41, ID: `a"b\c<d>&e`, Class: "ünïcode ☃", Error: "line1\nline2\t\x01 \u2028 \xff", ErrorKind: ErrServer, Status: 503,
			Intended: -5 * time.Microsecond, End: time.Hour},
		{Seq: 3, Chunks: []Chunk{{At: time.Millisecond, Tokens: 1}}, OutputTokens: 1, End: 2 * time.Millisecond},
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
