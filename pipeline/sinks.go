package pipeline

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// recordsSink appends every record to requests.jsonl as it arrives.
type recordsSink struct{ w *results.RecordsWriter }

func (s *recordsSink) Name() string                  { return s.w.Path() }
func (s *recordsSink) Add(rec *loadgen.Record) error { return s.w.Write(rec) }
func (s *recordsSink) Close() error                  { return s.w.Close() }

// NewRecordsSink appends records to the requests.jsonl at path, changed by
// edit first if it is not nil (a copy is edited: other sinks see the
// record as it came). validate uses it for the plan-wide file, renumbering
// each stage's records.
func NewRecordsSink(path string, edit func(*loadgen.Record)) (Sink, error) {
	w, err := results.CreateRecords(path)
	if err != nil {
		return nil, err
	}
	if edit == nil {
		return &recordsSink{w: w}, nil
	}
	return &editSink{recordsSink{w: w}, edit}, nil
}

type editSink struct {
	recordsSink
	edit func(*loadgen.Record)
}

func (s *editSink) Add(rec *loadgen.Record) error {
	c := *rec
	s.edit(&c)
	return s.w.Write(&c)
}

// hlogSink writes the interval histograms each second.
type hlogSink struct {
	w *results.HlogWriter
	m *loadgen.Metrics
}

func (s *hlogSink) Name() string                  { return results.HlogFile }
func (s *hlogSink) Add(*loadgen.Record) error     { return nil }
func (s *hlogSink) Tick(from, to time.Time) error { return s.w.WriteInterval(s.m.TakeInterval(), from, to) }
func (s *hlogSink) Close() error                  { return s.w.Close() }
