package pipeline

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
)

// okClient answers every request after a fixed delay with two chunks
// (30 ms: long enough that the self-check does not count a loaded test
// machine's scheduling delay as distortion).
var okClient = loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
	rec.Sent = rec.Now()
	select {
	case <-time.After(30 * time.Millisecond):
	case <-ctx.Done():
		rec.ErrorKind, rec.End = loadgen.ErrCancelled, rec.Now()
		return
	}
	rec.Chunks = []loadgen.Chunk{{At: rec.Now(), Tokens: 1}, {At: rec.Now() + time.Microsecond, Tokens: 1}}
	rec.OutputTokens = 2
	rec.End = rec.Now()
})

type countSink struct {
	name   string
	n      int
	failAt int // fail the failAt-th Add (0: never)
	closed bool
}

func (s *countSink) Name() string { return s.name }
func (s *countSink) Add(*loadgen.Record) error {
	s.n++
	if s.failAt > 0 && s.n == s.failAt {
		return &results.WriteError{Path: s.name, Err: errors.New("no space left on device")}
	}
	return nil
}
func (s *countSink) Close() error { s.closed = true; return nil }

func spec(rate float64, d time.Duration) Spec {
	return Spec{Client: okClient, Source: &loadgen.Repeat{Prompt: prompts.Prompt{Class: "c", Text: "x"}},
		Options: loadgen.Options{Stages: []loadgen.Stage{{Name: "main", Rate: rate, Duration: d}}, Arrival: loadgen.ArrivalConstant}}
}

// A failing sink is reported with the records it lost; the other sinks get
// every record; the run stops sending early.
func TestFailingSinkStopsTheRunNotTheOthers(t *testing.T) {
	bad := &countSink{name: "bad.jsonl", failAt: 5}
	good := &countSink{name: "good"}
	res, err := Run(context.Background(), spec(100, 2*time.Second), bad, good)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.SinkErrors) != 1 || res.SinkErrors[0].Sink != "bad.jsonl" {
		t.Fatalf("sink errors %+v", res.SinkErrors)
	}
	got := res.SinkErrors[0].Lost
	if want := int64(good.n - bad.n + 1); got != want {
		t.Errorf("lost %d, want %d (good got %d, bad %d)", got, want, good.n, bad.n)
	}
	if res.Stopped == nil || res.WriteErr() == nil || res.Summary.Validity.Valid {
		t.Errorf("stopped %v, write error %v, validity %+v", res.Stopped, res.WriteErr(), res.Summary.Validity)
	}
	if res.Info.Interrupted {
		t.Error("a stop for a failed sink is not the user's interrupt")
	}
	if res.Summary.Requests.Sent >= 150 {
		t.Errorf("sent %d of 200: the run did not stop", res.Summary.Requests.Sent)
	}
	if !bad.closed || !good.closed {
		t.Error("sinks not closed")
	}
	if int64(good.n) != res.Summary.Requests.Sent+res.Summary.Requests.Dropped {
		t.Errorf("good sink got %d records, summary has %d", good.n, res.Summary.Requests.Sent)
	}
}

// KeepGoing sends the whole schedule even after a sink failed.
func TestKeepGoing(t *testing.T) {
	bad := &countSink{name: "bad", failAt: 2}
	sp := spec(100, 500*time.Millisecond)
	sp.KeepGoing = true
	res, err := Run(context.Background(), sp, bad)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary.Requests.Sent != 50 || res.Stopped != nil || res.SinkErrors[0].Lost != 49 {
		t.Errorf("sent %d stopped %v lost %d", res.Summary.Requests.Sent, res.Stopped, res.SinkErrors[0].Lost)
	}
}

// Out gets requests.jsonl, latency.hlog and summary.json; check reads them
// back with the same records.
func TestRunWritesResults(t *testing.T) {
	dir := results.Dir(t.TempDir())
	sp := spec(50, 400*time.Millisecond)
	sp.Out, sp.SelfCheckWarns = dir, true
	res, err := Run(context.Background(), sp)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	st, err := results.ReadRecords(dir.Path(results.RecordsFile), func(r *loadgen.Record) error { n++; return nil })
	if err != nil || st.TornTail || n != res.Summary.Requests.Sent || n != 20 {
		t.Fatalf("read %d records (%+v, %v), sent %d", n, st, err, res.Summary.Requests.Sent)
	}
	s, err := dir.ReadSummary()
	if err != nil || s.Requests.OK != 20 || !s.Validity.Valid || s.Telemetry != nil {
		t.Fatalf("summary %+v %v", s, err)
	}
}

// A run where most requests fail is invalid; the limit is the spec's.
func TestValidityErrorRate(t *testing.T) {
	sp := spec(100, 200*time.Millisecond)
	sp.SelfCheckWarns = true // judged here: the error rate alone
	sp.Client = loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
		okClient(ctx, p, rec)
		if rec.Seq%4 == 3 {
			rec.ErrorKind = loadgen.ErrServer
		}
	})
	res, _ := Run(context.Background(), sp)
	if res.Summary.Validity.Valid {
		t.Errorf("25%% errors passed the default %.0f%% limit", DefaultMaxErrorRate*100)
	}
	sp.MaxErrorRate = 0.3
	res, _ = Run(context.Background(), sp)
	if !res.Summary.Validity.Valid {
		t.Errorf("25%% errors failed a 30%% limit: %v", res.Summary.Validity.Reasons)
	}
}

func TestMeasuredStarts(t *testing.T) {
	o := loadgen.Options{Stages: []loadgen.Stage{{Name: "a", Duration: 2 * time.Second}, {Name: "b", Duration: 3 * time.Second},
		{Name: "c", Duration: time.Second}}, WarmupDuration: 3 * time.Second}
	got := measuredStarts(o)
	want := []point{{3 * time.Second, "b"}, {5 * time.Second, "c"}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("%v, want %v", got, want)
	}
}
