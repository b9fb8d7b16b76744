package pipeline

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

// recordsSink appends every record to requests.jsonl as it arrives, the
// records of a burst in one write once the burst is taken; each second it
// flushes what a compressed file buffers.
type recordsSink struct{ w *results.RecordWriter }

func (s *recordsSink) Tick(time.Time, time.Time) error { return s.w.Flush() }

func (s *recordsSink) Name() string                  { return s.w.Path() }
func (s *recordsSink) Add(rec *loadgen.Record) error { return s.w.Append(rec) }
func (s *recordsSink) Idle() error                   { return s.w.Drain() }
func (s *recordsSink) Close() error                  { return s.w.Close() }

// sessionsSink writes sessions.jsonl: a line per session, from the
// figures its last record carries, a burst's lines in one write. The file
// is created with the first session, so a run without sessions has none.
type sessionsSink struct {
	path string
	w    *results.JSONLWriter
}

func (s *sessionsSink) Name() string { return s.path }
func (s *sessionsSink) Add(rec *loadgen.Record) error {
	if rec.SessionDone == nil {
		return nil
	}
	if s.w == nil {
		w, err := results.CreateJSONL(s.path)
		if err != nil {
			return err
		}
		s.w = w
	}
	return s.w.Append(rec.SessionDone.Line())
}
func (s *sessionsSink) Idle() error {
	if s.w == nil {
		return nil
	}
	return s.w.Drain()
}
func (s *sessionsSink) Close() error {
	if s.w == nil {
		return nil
	}
	return s.w.Close()
}

// hlogSink writes the interval histograms each second.
type hlogSink struct {
	w *results.HlogWriter
	m *measure.Metrics
}

func (s *hlogSink) Name() string              { return results.HlogFile }
func (s *hlogSink) Add(*loadgen.Record) error { return nil }
func (s *hlogSink) Tick(from, to time.Time) error {
	return s.w.WriteInterval(s.m.TakeInterval(), from, to)
}
func (s *hlogSink) Close() error { return s.w.Close() }
