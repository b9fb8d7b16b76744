package loadgen

import (
	"context"
	"errors"
	"io"
	"runtime"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/prompts"
)

// liveBytes is the heap and stacks in use after a collection.
func liveBytes() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapInuse + ms.StackInuse)
}

// thinkSessions yields sessions of two calls, the second an hour of
// think time after the first's answer: live sessions that wait.
type thinkSessions struct{ n int }

func (s *thinkSessions) Next() (*prompts.Prompt, error) {
	id := "s" + strconv.Itoa(s.n)
	s.n++
	call := func(c string, turn int, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: c, After: after, Prompt: &prompts.Prompt{ID: id + c, Session: id, Turn: turn, Call: c, Text: "x"}}
	}
	return &prompts.Prompt{ID: id, Session: id, Graph: &prompts.Graph{ID: id, Calls: []prompts.Call{call("a", 0),
		call("b", 1, prompts.Edge{From: 0, On: prompts.OnEnd, Delay: time.Hour})}}}, nil
}

// heldLive runs src until n requests (or roots) reached, measures the
// bytes held per live unit, then stops the run.
func heldLive(b *testing.B, c Client, src Source, reached func() int64, n int64) float64 {
	b.Helper()
	base := liveBytes()
	r, err := NewRunner(c, &limited{src: src, n: n}, Options{MaxInFlight: 2 * int(n), Grace: 2 * time.Hour, Timeout: 2 * time.Hour,
		Stages: []Stage{{Rate: maxRatePerS, Duration: 2 * time.Hour}}})
	if err != nil {
		b.Fatal(err)
	}
	out := make(chan *Record, 1024)
	go func() {
		for range out {
		}
	}()
	done := make(chan struct{})
	go func() {
		r.Run(context.Background(), out)
		close(done)
	}()
	deadline := time.Now().Add(time.Minute)
	for reached() < n {
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d live after a minute", reached(), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // the last records delivered
	per := float64(liveBytes()-base) / float64(n)
	r.Stop(errors.New("measured"))
	<-done
	return per
}

// BenchmarkWaitingSessions measures the bytes a live session waiting on
// think time holds, beside a stream waiting for its answer.
func BenchmarkWaitingSessions(b *testing.B) {
	const n = 10000
	for i := 0; i < b.N; i++ {
		var waiting atomic.Int64
		stream := ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *Record) {
			rec.Sent = rec.Now()
			waiting.Add(1)
			<-ctx.Done()
			rec.ErrorKind, rec.End = ErrCancelled, rec.Now()
		})
		perStream := heldLive(b, stream, &Repeat{Prompt: prompts.Prompt{Text: "x"}}, waiting.Load, n)

		var answered atomic.Int64
		answer := ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *Record) {
			rec.Sent = rec.Now()
			rec.Chunks = append(rec.Chunks, Chunk{At: rec.Now(), Tokens: 1})
			rec.OutputTokens, rec.End = 1, rec.Now()
			answered.Add(1)
		})
		perSession := heldLive(b, answer, &thinkSessions{}, answered.Load, n)
		b.ReportMetric(perStream, "B/waiting-stream")
		b.ReportMetric(perSession, "B/waiting-session")
		b.ReportMetric(perSession-perStream, "B/session-beyond-stream")
	}
}

// BenchmarkDependentLag compares the schedule lag p99 of dependent calls
// (due a delay after their predecessor's answer) with open-loop requests'
// at the same event rate.
func BenchmarkDependentLag(b *testing.B) {
	const rate, dur = 1000.0, 2 * time.Second
	server := ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *Record) {
		rec.Sent = rec.Now()
		time.Sleep(time.Millisecond)
		rec.Chunks = append(rec.Chunks, Chunk{At: rec.Now(), Tokens: 1})
		rec.OutputTokens, rec.End = 1, rec.Now()
	})
	p99 := func(recs []*Record, keep func(*Record) bool) float64 {
		var lags []time.Duration
		for _, r := range recs {
			if keep(r) && r.OK() {
				lags = append(lags, r.ScheduleLag())
			}
		}
		if len(lags) == 0 {
			b.Fatal("no lag samples")
		}
		sort.Slice(lags, func(i, j int) bool { return lags[i] < lags[j] })
		return float64(lags[len(lags)*99/100].Microseconds()) / 1000
	}
	run := func(src Source, rate float64) []*Record {
		r, err := NewRunner(server, src, Options{Stages: []Stage{{Rate: rate, Duration: dur}}})
		if err != nil {
			b.Fatal(err)
		}
		out := make(chan *Record, 1024)
		var recs []*Record
		got := make(chan struct{})
		go func() {
			for rec := range out {
				recs = append(recs, rec)
			}
			close(got)
		}()
		if _, err := r.Run(context.Background(), out); err != nil {
			b.Fatal(err)
		}
		<-got
		return recs
	}
	for i := 0; i < b.N; i++ {
		open := run(&Repeat{Prompt: prompts.Prompt{Text: "x"}}, 2*rate)
		// Half the rate in sessions of two calls: the same events a second.
		sess := run(&lagSessions{}, rate)
		b.ReportMetric(p99(open, func(*Record) bool { return true }), "ms-lag-p99-open")
		b.ReportMetric(p99(sess, func(r *Record) bool { return len(r.After) > 0 }), "ms-lag-p99-dependent")
	}
}

// lagSessions are two calls, the second 5 ms after the first's answer.
type lagSessions struct{ n int }

func (s *lagSessions) Next() (*prompts.Prompt, error) {
	id := "s" + strconv.Itoa(s.n)
	s.n++
	call := func(c string, after ...prompts.Edge) prompts.Call {
		return prompts.Call{ID: c, After: after, Prompt: &prompts.Prompt{ID: id + c, Session: id, Call: c, Text: "x"}}
	}
	return &prompts.Prompt{ID: id, Session: id, Graph: &prompts.Graph{ID: id, Calls: []prompts.Call{call("a"),
		call("b", prompts.Edge{From: 0, On: prompts.OnEnd, Delay: 5 * time.Millisecond})}}}, nil
}

// limited ends src after n prompts.
type limited struct {
	src Source
	n   int64
}

func (l *limited) Next() (*prompts.Prompt, error) {
	if l.n <= 0 {
		return nil, io.EOF
	}
	l.n--
	return l.src.Next()
}
