package loadgen

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

const ms = time.Millisecond

func TestRecordDerivedMetrics(t *testing.T) {
	t.Parallel()
	r := &Record{Intended: 10 * ms, Sent: 12 * ms, End: 200 * ms, OutputTokens: 7,
		Chunks: []Chunk{{At: 60 * ms, Tokens: 1}, {At: 80 * ms, Tokens: 2}, {At: 140 * ms, Tokens: 4}}}
	r.Finalize()
	if d, _ := r.TTFT(); d != 50*ms {
		t.Errorf("TTFT %v, want 50ms (from intended start)", d)
	}
	if r.ScheduleLag() != 2*ms || r.E2E() != 190*ms {
		t.Errorf("lag %v e2e %v", r.ScheduleLag(), r.E2E())
	}
	if d, _ := r.TPOT(); d != (190*ms-50*ms)/6 {
		t.Errorf("TPOT %v", d)
	}
	var icl []time.Duration
	r.EachICL(func(g time.Duration) { icl = append(icl, g) })
	if !reflect.DeepEqual(icl, []time.Duration{20 * ms, 60 * ms}) {
		t.Errorf("ICL %v", icl)
	}
	// ITL: 20ms over 2 tokens → two samples of 10ms; 60ms over 4 → four of 15ms.
	var itl []time.Duration
	r.EachITL(func(per time.Duration, n int) {
		for i := 0; i < n; i++ {
			itl = append(itl, per)
		}
	})
	if !reflect.DeepEqual(itl, []time.Duration{10 * ms, 10 * ms, 15 * ms, 15 * ms, 15 * ms, 15 * ms}) {
		t.Errorf("ITL %v", itl)
	}
	if r.ChunkTokenSource != chunkTokensServer || r.TokenSource != TokensFromUsage {
		t.Errorf("sources %q %q", r.TokenSource, r.ChunkTokenSource)
	}
}

func TestFinalizeSpreadsUsageOverChunks(t *testing.T) {
	t.Parallel()
	r := &Record{OutputTokens: 10, Chunks: make([]Chunk, 4)}
	r.Finalize()
	got := []int{}
	for _, c := range r.Chunks {
		got = append(got, c.Tokens)
	}
	if !reflect.DeepEqual(got, []int{3, 3, 2, 2}) || r.ChunkTokenSource != chunkTokensSpread {
		t.Errorf("spread %v (%s)", got, r.ChunkTokenSource)
	}
	r2 := &Record{Chunks: make([]Chunk, 4)}
	r2.Finalize()
	if r2.OutputTokens != 4 || r2.TokenSource != TokensFromChunks || r2.ChunkTokenSource != chunkTokensOne {
		t.Errorf("no usage: %d tokens from %s/%s", r2.OutputTokens, r2.TokenSource, r2.ChunkTokenSource)
	}
}

func TestRecordJSONRoundTrip(t *testing.T) {
	t.Parallel()
	r := &Record{Seq: 3, ID: "x", Class: "chat", Stage: "peak", Intended: 1500 * time.Microsecond, Sent: 1600 * time.Microsecond,
		FirstAnswer: 9 * ms, End: 20 * ms, Chunks: []Chunk{{At: 5 * ms, Tokens: 1}, {At: 9 * ms, Tokens: 3}},
		InputTokens: 12, OutputTokens: 4, TokenSource: TokensFromUsage, ChunkTokenSource: chunkTokensServer,
		Status: 200, ErrorKind: ErrStreamTruncated, Error: "eof"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Record
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(r, &back) {
		t.Errorf("round trip:\n%+v\n%+v\n%s", r, &back, b)
	}
}
