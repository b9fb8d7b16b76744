package pipeline

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
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
	sp.Out, sp.Validity = dir, warnOnly()
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
	sp.Validity = warnOnly() // judged here: the error rate alone
	sp.Client = loadgen.ClientFunc(func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
		okClient(ctx, p, rec)
		if rec.Seq%4 == 3 {
			rec.ErrorKind = loadgen.ErrServer
		}
	})
	res, _ := Run(context.Background(), sp)
	if res.Summary.Validity.Valid {
		t.Errorf("25%% errors passed the default %s limit", slo.DefaultValidity().MaxErrorRate)
	}
	sp.Validity.MaxErrorRate = slo.MustDecimal("30%")
	res, _ = Run(context.Background(), sp)
	if !res.Summary.Validity.Valid {
		t.Errorf("25%% errors failed a 30%% limit: %v", res.Summary.Validity.Reasons)
	}
}

// warnOnly is the default bounds with the self-check a warning only: a
// test judging one bound on a busy machine.
func warnOnly() *slo.Validity {
	v := slo.DefaultValidity()
	v.DistortionWarns = true
	return &v
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

// Ctrl-C mid-run: the run is invalid (interrupted) and the requests the run
// cancelled itself are no server errors, in the summary or in a verdict.
func TestInterruptedRunIsInvalid(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hanging := make(chan struct{}, 100)
	sp := spec(50, 10*time.Second)
	sp.Validity = warnOnly()
	sp.Client = hangAfter(4, hanging)
	spec, err := slo.ParseSpec("slo.yaml", []byte("kind: SLO\nname: s\nowner: team\nobjectives:\n  - {name: errors, metric: error_rate, threshold: 1%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sp.SLO = &Judging{Spec: spec}
	sp.Out = results.Dir(t.TempDir())
	go func() {
		for range 3 { // three requests hang in flight: then the user presses Ctrl-C
			<-hanging
		}
		cancel()
	}()
	res, err := Run(ctx, sp)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sp.Out.ReadSummary()
	if err != nil {
		t.Fatal(err)
	}
	q := s.Requests
	if s.Validity.Valid || len(s.Validity.Reasons) == 0 || !strings.Contains(s.Validity.Reasons[0], "interrupted") {
		t.Errorf("validity %+v", s.Validity)
	}
	if q.Errors != 0 || q.Cancelled < 3 || q.OK != 4 {
		t.Errorf("requests %+v: cancelled requests must not be errors", q)
	}
	// 4 requests decide nothing at a 1% limit; what matters is that the
	// cancelled ones are left out, not failures.
	if s.SLO == nil || len(s.SLO.Verdicts) != 1 || s.SLO.Verdicts[0].Status == slo.Fail || s.SLO.Verdicts[0].Good != s.SLO.Verdicts[0].Total ||
		s.SLO.Verdicts[0].LeftOut != uint64(q.Cancelled) {
		t.Fatalf("slo %+v", s.SLO)
	}
	if code, why := results.Exit(&s.Validity, s.SLO); code != slo.ExitInvalid || !strings.Contains(why, "interrupted") {
		t.Errorf("exit %d %q", code, why)
	}
	if rep, err := sp.Out.ReadReport(); err != nil || rep.Status != slo.ReportInvalid || res.Report.Status != slo.ReportInvalid {
		t.Errorf("verdict.json %+v %v", rep, err)
	}
}

// The pipeline judges: summary.json holds the report and the bounds used,
// verdict.json the same report.
func TestPipelineJudges(t *testing.T) {
	sp := spec(50, 200*time.Millisecond)
	v := *warnOnly()
	v.MaxErrorRate = slo.MustDecimal("20%")
	sp.Validity, sp.Out = &v, results.Dir(t.TempDir())
	spec, err := slo.ParseSpec("slo.yaml", []byte("kind: SLO\nname: s\nowner: team\nobjectives:\n  - {name: e2e, metric: e2e, threshold: 10s, target: 50%}\n"))
	if err != nil {
		t.Fatal(err)
	}
	sp.SLO = &Judging{Spec: spec}
	if _, err := Run(context.Background(), sp); err != nil {
		t.Fatal(err)
	}
	s, err := sp.Out.ReadSummary()
	if err != nil {
		t.Fatal(err)
	}
	if !s.Validity.Valid || s.Validity.Bounds == nil || s.Validity.Bounds.MaxErrorRate.String() != "20%" || s.Validity.MaxErrorRate != 0.2 {
		t.Errorf("validity %+v", s.Validity)
	}
	rep, err := sp.Out.ReadReport()
	if err != nil || s.SLO == nil || rep.Status != slo.ReportPass || s.SLO.Status != rep.Status || rep.Validity.MaxErrorRate.String() != "20%" {
		t.Errorf("verdict.json %+v (%v), summary slo %+v", rep, err, s.SLO)
	}
	h, err := sp.Out.ReadHistograms()
	if err != nil || h.Bounds().MaxErrorRate.String() != "20%" || !h.Bounds().DistortionWarns {
		t.Errorf("histograms bounds %+v %v", h.Validity, err)
	}
}

// hangAfter answers the first n requests and holds the rest until they are
// cancelled, telling hanging of each one it holds.
func hangAfter(n int64, hanging chan<- struct{}) loadgen.ClientFunc {
	return func(ctx context.Context, p *prompts.Prompt, rec *loadgen.Record) {
		if rec.Seq < n {
			okClient(ctx, p, rec)
			return
		}
		rec.Sent = rec.Now()
		hanging <- struct{}{}
		<-ctx.Done()
		rec.ErrorKind, rec.End = loadgen.ErrCancelled, rec.Now()
	}
}
