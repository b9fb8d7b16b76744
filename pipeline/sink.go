package pipeline

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// Sink consumes the records of a run. The pipeline calls every method from
// its one goroutine, in arrival order, so a sink needs no locks. A sink must
// not keep rec past Add if it changes it; the same record goes to every
// sink.
type Sink interface {
	// Name says what the sink writes, for errors ("requests.jsonl").
	Name() string
	// Add takes one record. After an error the sink gets no more records;
	// the others go on.
	Add(rec *loadgen.Record) error
	// Close ends the sink once the run is over (also after an Add error).
	Close() error
}

// Ticker is a Sink that also acts once a second (an interval log).
type Ticker interface {
	Tick(from, to time.Time) error
}

// Idler is a Sink that may hold what Add gave it, to write a burst of
// records at once. The pipeline calls Idle whenever no record waits
// behind the last one added (and every few dozen records of a backlog,
// and before each tick), so nothing it gathered
// sits in a buffer while the run waits for more: a stopped or killed run
// loses none of it.
type Idler interface {
	// Idle writes out what Add held. An error loses every record added
	// since the last Idle.
	Idle() error
}

// Func adapts a function to a Sink that never fails and has nothing to
// close.
type Func func(rec *loadgen.Record)

// Name is "func".
func (Func) Name() string { return "func" }

// Add calls f.
func (f Func) Add(rec *loadgen.Record) error { f(rec); return nil }

// Close does nothing.
func (Func) Close() error { return nil }

// SinkError is a sink that failed: its error and how many records it did
// not get after failing.
type SinkError struct {
	Sink string
	Err  error
	// Lost counts records missing from what this sink wrote: the one that
	// failed and every one after it.
	Lost int64
}

func (e SinkError) Error() string { return e.Err.Error() }

func (e SinkError) Unwrap() error { return e.Err }
