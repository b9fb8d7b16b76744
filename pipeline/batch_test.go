package pipeline

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

// recordsPipe is a pipe with only the records sink, writing to a file in
// dir.
func recordsPipe(t testing.TB, dir string) (*pipe, *results.RecordWriter, string) {
	path := filepath.Join(dir, results.RecordsFile)
	w, err := results.CreateRecordWriter(path, results.RecordsFull, results.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipe{metrics: measure.NewMetrics(), judge: newJudge(Spec{})}
	p.sinks = append(p.sinks, newSinkState(&recordsSink{w: w}))
	return p, w, path
}

// streamed is a streamed request of n tokens, one a chunk.
func streamed(seq int64, n int) *loadgen.Record {
	start := time.Duration(seq) * time.Millisecond
	r := &loadgen.Record{Seq: seq, Class: "c", Stage: "main", Intended: start, Sent: start, Status: 200, OutputTokens: n}
	for i := range n {
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: start + time.Duration(i+1)*time.Millisecond, Tokens: 1})
	}
	r.FirstAnswer, r.End = r.Chunks[0].At, r.Chunks[n-1].At
	return r
}

func lines(t testing.TB, path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Count(b, []byte("\n"))
}

// A burst waiting in the channel is written in a few writes, not one a
// record, and every record is on disk as soon as the channel is empty,
// before Close; a record that arrives alone is on disk at once.
func TestBurstIsOneWriteAndOnDiskWhenIdle(t *testing.T) {
	t.Parallel()
	p, w, path := recordsPipe(t, t.TempDir())
	const n = 100
	ch := make(chan *loadgen.Record, n)
	for i := range int64(n) {
		ch <- streamed(i, 4)
	}
	for len(ch) > 0 {
		if err := p.take(<-ch, len(ch)); err != nil {
			t.Fatal(err)
		}
	}
	if got := w.Writes(); got >= n/10 {
		t.Errorf("a burst of %d records took %d writes", n, got)
	}
	if got := lines(t, path); got != n {
		t.Fatalf("idle after the burst: %d of %d records on disk", got, n)
	}
	for i := int64(n); i < n+3; i++ {
		if err := p.take(streamed(i, 4), 0); err != nil {
			t.Fatal(err)
		}
		if got := lines(t, path); got != int(i)+1 {
			t.Fatalf("record %d alone: %d on disk", i, got)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if d := w.Digest(); d.Count != n+3 || w.Lines != n+3 {
		t.Errorf("digest %+v, lines %d", d, w.Lines)
	}
}

// A full disk in a burst's write names the file and the burst's first
// line, and loses the whole burst.
func TestBurstOnAFullDisk(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	w, err := results.CreateRecordWriter("/dev/full", results.RecordsFull, results.CompressNone)
	if err != nil {
		t.Fatal(err)
	}
	p := &pipe{metrics: measure.NewMetrics(), judge: newJudge(Spec{})}
	p.sinks = append(p.sinks, newSinkState(&recordsSink{w: w}))
	for i := range int64(5) {
		err = p.take(streamed(i, 2), int(4-i))
	}
	p.take(streamed(5, 2), 0) // after the failure
	if err == nil || len(p.errs) != 1 || p.errs[0].Lost != 6 {
		t.Fatalf("err %v, sink errors %+v", err, p.errs)
	}
	if msg := err.Error(); msg != "/dev/full: line 1: write: write /dev/full: no space left on device" {
		t.Errorf("error %q", msg)
	}
	w.Close()
}

// lineCheck is a sink that, each time the pipeline goes idle (after the
// records sink wrote), holds requests.jsonl to the records it was given:
// a run killed then has them all on disk.
type lineCheck struct {
	t      *testing.T
	path   string
	n      int
	checks int
}

func (s *lineCheck) Name() string              { return "check" }
func (s *lineCheck) Add(*loadgen.Record) error { s.n++; return nil }
func (s *lineCheck) Close() error              { return nil }
func (s *lineCheck) Idle() error {
	s.checks++
	if got := lines(s.t, s.path); got != s.n {
		s.t.Errorf("idle after %d records: %d in %s", s.n, got, s.path)
	}
	return nil
}

// A run stopped mid-way (Ctrl-C) has every record it gathered in
// requests.jsonl, and had each on disk as soon as no more were waiting.
func TestStoppedRunKeepsEveryRecord(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hanging := make(chan struct{}, 100)
	sp := spec(200, 10*time.Second)
	sp.Validity = warnOnly()
	sp.Client = hangAfter(20, hanging)
	sp.Out = results.Dir(t.TempDir())
	check := &lineCheck{t: t, path: sp.Out.Path(results.RecordsFile)}
	go func() {
		for range 3 {
			<-hanging
		}
		cancel()
	}()
	res, err := Run(ctx, sp, check)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Info.Interrupted || check.checks == 0 {
		t.Fatalf("interrupted %v, %d idle checks", res.Info.Interrupted, check.checks)
	}
	if got := lines(t, check.path); got != check.n || int64(got) != res.Summary.Records.Count || got < 23 {
		t.Errorf("%d records on disk, %d gathered, digest %+v", got, check.n, res.Summary.Records)
	}
}

// BenchmarkRecordsBurst is the records sink's cost per record when
// records wait in the channel (a burst of 256): "each" writes every
// record as it is taken (the reference: one write a record), "burst"
// writes what waited once the channel is empty.
func BenchmarkRecordsBurst(b *testing.B) {
	const burst = 256
	recs := make([]*loadgen.Record, burst)
	for i := range recs {
		recs[i] = streamed(int64(i), 128)
	}
	for _, mode := range []string{"each", "burst"} {
		b.Run(mode, func(b *testing.B) {
			p, w, _ := recordsPipe(b, b.TempDir())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				waiting := burst - 1 - i%burst
				if mode == "each" {
					waiting = 0
				}
				if err := p.take(recs[i%burst], waiting); err != nil {
					b.Fatal(err)
				}
			}
			if err := p.idle(); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(w.Writes())/float64(b.N), "writes/record")
			w.Close()
		})
	}
}
