package results

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// File names of a results directory. Users' scripts read them: add, never
// rename.
const (
	SummaryFile = "summary.json"
	RecordsFile = "requests.jsonl"
	// SessionsFile holds one line per agent session (loadgen.SessionLine),
	// written as each session completes; absent when the run had none.
	SessionsFile   = "sessions.jsonl"
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
	// An evidence pack's files (package evidence writes them): the
	// environment fingerprint, exact copies of the inputs, the manifest
	// and its signature; a merged pack keeps every shard's environment
	// under ShardsDir.
	EnvironmentFile = "environment.json"
	InputsDir       = "inputs"
	ManifestFile    = "manifest.json"
	SignatureFile   = "manifest.dsse.json"
	ShardsDir       = "shards"
	// CanonicalMixFile, under InputsDir, is the mix resolved: every
	// setting and each data file by name and SHA-256.
	CanonicalMixFile = "mix.canonical.json"
	// ReportFile is the HTML report written into a results directory.
	ReportFile = "report.html"
	// LLMDReportFile is llm-d-benchmark's benchmark report of a run
	// (package exporters/llmd), under the name llm-d's harnesses give it.
	LLMDReportFile = "benchmark_report.json"
)

// ShardDir is, under ShardsDir of a merged evidence pack, the directory
// of shard i (its own environment.json: where it ran).
func ShardDir(i int) string { return fmt.Sprintf("shard-%d", i) }

// ShardDirs matches every ShardDir, for messages.
const ShardDirs = "shard-*"

// layoutNames are every entry tailgate writes into a results directory:
// what --force removes, and nothing else.
var layoutNames = append([]string{SummaryFile, HlogFile, TelemetryFile, QueueDelayFile, VerdictFile, JUnitFile,
	ManualFile, HistogramsFile, StagesDir, SweepFile, LevelsDir, ReadyFile, EnvironmentFile, InputsDir,
	ManifestFile, SignatureFile, ShardsDir, ReportFile, LLMDReportFile, SessionsFile}, recordsNames...)

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

// HasResults reports whether d already holds results of a run, validate,
// sweep or merge (records, summary, verdict, stages, levels, a manifest),
// which a new run must not overwrite without --force.
func (d Dir) HasResults() bool {
	for _, f := range append([]string{SummaryFile, HistogramsFile, VerdictFile, SweepFile, StagesDir, LevelsDir, ManifestFile}, recordsNames...) {
		if _, err := os.Stat(d.Path(f)); err == nil {
			return true
		}
	}
	return false
}

// Clear removes every entry of tailgate's layout from d, so results that
// replace a run (--force) are not read beside what another run left: a
// run over a validate's directory used to keep its verdict, manifest,
// JUnit and stages, and check then judged a mix of both. Entries tailgate
// does not write are left in place and returned, so the caller can say
// so. A d that does not exist is nothing to clear.
func (d Dir) Clear() (kept []string, err error) {
	ents, err := os.ReadDir(string(d))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, &WriteError{Path: string(d), Err: err}
	}
	ours := map[string]bool{}
	for _, n := range layoutNames {
		ours[n] = true
	}
	for _, e := range ents {
		if !ours[e.Name()] {
			kept = append(kept, e.Name())
			continue
		}
		if err := os.RemoveAll(d.Path(e.Name())); err != nil {
			return kept, &WriteError{Path: d.Path(e.Name()), Err: err}
		}
	}
	return kept, nil
}

// Replace clears d for a run that replaces its results (--force), saying
// on log which entries it kept because tailgate did not write them.
func (d Dir) Replace(log io.Writer) error {
	kept, err := d.Clear()
	if err != nil {
		return err
	}
	if len(kept) > 0 && log != nil {
		fmt.Fprintf(log, "warning: %s: replaced tailgate's results; kept %d entries it did not write: %s\n", d, len(kept), strings.Join(kept, ", "))
	}
	return nil
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
	// An error from os itself ("write PATH: ...") already names the path:
	// say it once. A wrapped one ("line 3: write PATH: ...") still needs
	// it first, so only the error itself counts, not its chain.
	if pe := (*os.PathError)(nil); errors.As(e.Err, &pe) && pe.Error() == e.Err.Error() && pe.Path == e.Path {
		return e.Err.Error()
	}
	return fmt.Sprintf("%s: %v", e.Path, e.Err)
}

func (e *WriteError) Unwrap() error { return e.Err }
