package slo

import (
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/telemetry/promhist"
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

// judgeStage judges spec on stage's records through Assess, the public
// path: a plan of that one stage, judging only the objectives named (all
// when none), with in's other inputs.
func judgeStage(spec *Spec, stage string, recs []loadgen.Record, in Input, only ...string) []Verdict {
	p := &Plan{Stages: []Stage{{Name: stage, Objectives: only}}, Validity: defaultValidityTable}
	in.Records = recs
	return Assess(p, spec, in).Verdicts
}

// queueIn is an Input with stage "s"'s server queue-delay histogram.
func queueIn(h *promhist.Histogram) Input {
	return Input{QueueDelay: map[string]*promhist.Histogram{"s": h}}
}

// qb is a cumulative bucket: n events ≤ le seconds.
func qb(le float64, n uint64) promhist.Bucket { return promhist.Bucket{LeSeconds: le, Count: n} }

// queueHist is a server histogram of the buckets, its count the last's.
func queueHist(bs ...promhist.Bucket) *promhist.Histogram {
	return &promhist.Histogram{Buckets: bs, Count: bs[len(bs)-1].Count}
}
