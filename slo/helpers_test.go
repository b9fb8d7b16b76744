package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

const ms1 = time.Millisecond

// okRec is a successful record: intended at start, first token after ttft,
// tokens one-token chunks evenly spaced until e2e.
func okRec(stage string, start, ttft, e2e time.Duration, tokens int) loadgen.Record {
	r := loadgen.Record{Stage: stage, Intended: start, Sent: start, End: start + e2e, OutputTokens: tokens,
		InputTokens: 100, TokenSource: loadgen.TokensFromUsage}
	for i := 0; i < tokens; i++ {
		at := start + ttft
		if tokens > 1 {
			at += time.Duration(i) * (e2e - ttft) / time.Duration(tokens-1)
		}
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: at, Tokens: 1})
	}
	if tokens > 0 {
		r.FirstAnswer = r.Chunks[0].At
	}
	return r
}

func errRec(stage string, start time.Duration, kind loadgen.ErrorKind) loadgen.Record {
	r := loadgen.Record{Stage: stage, Intended: start, Sent: start, End: start + 10*ms1, ErrorKind: kind, Error: string(kind)}
	if kind == loadgen.ErrDropped {
		r.Sent, r.End = 0, start
	}
	return r
}

func mustSpec(t *testing.T, y string) *Spec {
	t.Helper()
	s, err := ParseSpec("slo.yaml", []byte(strings.TrimLeft(y, "\n")))
	if err != nil {
		t.Fatalf("ParseSpec: %v", err)
	}
	return s
}

func one(t *testing.T, vs []Verdict) Verdict {
	t.Helper()
	if len(vs) != 1 {
		t.Fatalf("want 1 verdict, got %d: %+v", len(vs), vs)
	}
	return vs[0]
}

var t0 = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
