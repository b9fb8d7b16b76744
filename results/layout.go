package results

import (
	"fmt"
	"os"
	"path/filepath"
)

// File names of a results directory. Users' scripts read them: add, never
// rename.
const (
	SummaryFile    = "summary.json"
	RecordsFile    = "requests.jsonl"
	HlogFile       = "latency.hlog"
	TelemetryFile  = "telemetry.jsonl"
	QueueDelayFile = "queue_delay.json"
	VerdictFile    = "verdict.json"
	JUnitFile      = "junit.xml"
	ManualFile     = "manual.json"
	// HistogramsFile holds the run's histograms and counters whole (every
	// class and stage), with the shard and what it ran, for tailgate
	// merge: HDR histograms merge losslessly.
	HistogramsFile = "histograms.json"
	// StagesDir holds one run directory per stage of an acceptance run.
	StagesDir = "stages"
	// SweepFile is a capacity sweep's result; LevelsDir holds one run
	// directory per load level it ran.
	SweepFile = "sweep.json"
	LevelsDir = "levels"
	// ReadyFile is tailgate ready's time-to-ready result.
	ReadyFile = "ready.json"
)

// Dir is a results directory.
type Dir string

// Path is the path of a file in d.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Stage is the run directory of one acceptance stage.
func (d Dir) Stage(name string) Dir { return Dir(filepath.Join(string(d), StagesDir, name)) }

// Level is the run directory of one load level of a sweep.
func (d Dir) Level(name string) Dir { return Dir(filepath.Join(string(d), LevelsDir, name)) }

// HasSweep reports whether d already holds a sweep's sweep.json.
func (d Dir) HasSweep() bool {
	_, err := os.Stat(d.Path(SweepFile))
	return err == nil
}

// HasResults reports whether d already holds a run's results (requests.jsonl
// or summary.json), which a new run must not overwrite without --force.
func (d Dir) HasResults() bool {
	for _, f := range append([]string{SummaryFile, HistogramsFile}, recordsNames...) {
		if _, err := os.Stat(d.Path(f)); err == nil {
			return true
		}
	}
	return false
}

// Create makes d (and its parents).
func (d Dir) Create() error {
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		return &WriteError{Path: string(d), Err: err}
	}
	return nil
}

// WriteError is a failure to write results: a full disk, a read-only
// directory. Commands map it to exit 3 (results could not be written).
type WriteError struct {
	Path string
	Err  error
}

func (e *WriteError) Error() string {
	// Errors from os already name the path.
	if pe, ok := e.Err.(*os.PathError); ok && pe.Path == e.Path {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }
