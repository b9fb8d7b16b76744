package slo

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// The per-record measurements at the microsecond resolution of
// requests.jsonl (see the package doc): every instant is truncated first,
// exactly as Record.MarshalJSON does, so a live record and its saved copy
// measure the same.

func trunc(d time.Duration) time.Duration { return d / time.Microsecond * time.Microsecond }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func ttft(r *loadgen.Record) (time.Duration, bool) {
	if len(r.Chunks) == 0 {
		return 0, false
	}
	return trunc(r.Chunks[0].At) - trunc(r.Intended), true
}

func ttfat(r *loadgen.Record) (time.Duration, bool) {
	if r.FirstAnswer <= 0 {
		return 0, false
	}
	return trunc(r.FirstAnswer) - trunc(r.Intended), true
}

func e2e(r *loadgen.Record) time.Duration { return trunc(r.End) - trunc(r.Intended) }

func scheduleLag(r *loadgen.Record) time.Duration { return trunc(r.Sent) - trunc(r.Intended) }

func tpot(r *loadgen.Record) (time.Duration, bool) {
	t, ok := ttft(r)
	if !ok || r.OutputTokens < 2 {
		return 0, false
	}
	return (e2e(r) - t) / time.Duration(r.OutputTokens-1), true
}

// eachICL calls f with every gap between consecutive content chunks.
func eachICL(r *loadgen.Record, f func(gap time.Duration)) {
	for i := 1; i < len(r.Chunks); i++ {
		f(trunc(r.Chunks[i].At) - trunc(r.Chunks[i-1].At))
	}
}

// eachITL calls f(perToken, tokens) for every chunk after the first, as
// Record.EachITL does: chunks without a token count are skipped.
func eachITL(r *loadgen.Record, f func(perToken time.Duration, tokens int)) {
	for i := 1; i < len(r.Chunks); i++ {
		n := r.Chunks[i].Tokens
		if n <= 0 {
			continue
		}
		f((trunc(r.Chunks[i].At)-trunc(r.Chunks[i-1].At))/time.Duration(n), n)
	}
}

// sample is one latency value counted weight times.
type sample struct {
	v time.Duration
	n uint64
}

// latencySamples gives the samples of metric m from one successful record.
func latencySamples(m Metric, r *loadgen.Record, f func(v time.Duration, n uint64)) {
	switch m {
	case TTFT:
		if v, ok := ttft(r); ok {
			f(v, 1)
		}
	case TTFAT:
		if v, ok := ttfat(r); ok {
			f(v, 1)
		}
	case TPOT:
		if v, ok := tpot(r); ok {
			f(v, 1)
		}
	case E2E:
		f(e2e(r), 1)
	case ScheduleLag:
		f(scheduleLag(r), 1)
	case ICL:
		eachICL(r, func(g time.Duration) { f(g, 1) })
	case ITL:
		eachITL(r, func(p time.Duration, n int) { f(p, uint64(n)) })
	}
}
