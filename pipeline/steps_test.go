package pipeline

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results"
)

// openFiles makes the run's own sinks: none without a directory; the
// interval log and sessions always with one, the records unless told
// none, each file created before the first record.
func TestOpenFiles(t *testing.T) {
	m := measure.NewMetrics()
	if own, rw, err := openFiles(Spec{}, m, time.Now()); own != nil || rw != nil || err != nil {
		t.Fatalf("no Out: %v %v %v", own, rw, err)
	}
	names := func(own []Sink) map[string]bool {
		out := map[string]bool{}
		for _, s := range own {
			out[filepath.Base(s.Name())] = true
		}
		return out
	}
	dir := results.Dir(t.TempDir())
	own, rw, err := openFiles(Spec{Out: dir}, m, time.Now())
	if err != nil || rw == nil {
		t.Fatalf("records by default: %v, writer %v", err, rw)
	}
	if n := names(own); len(n) != 3 || !n[results.HlogFile] || !n[results.SessionsFile] || !n[results.RecordsFileName(results.CompressNone)] {
		t.Errorf("sinks %v", n)
	}
	for _, f := range []string{results.HlogFile, results.RecordsFileName(results.CompressNone)} {
		if _, err := os.Stat(dir.Path(f)); err != nil {
			t.Errorf("%s not created at the start: %v", f, err)
		}
	}
	for _, s := range own {
		s.Close()
	}
	dir2 := results.Dir(t.TempDir())
	own, rw, err = openFiles(Spec{Out: dir2, Records: results.RecordsNone}, m, time.Now())
	if err != nil || rw != nil || len(own) != 2 {
		t.Fatalf("records none: %v, writer %v, %d sinks", err, rw, len(own))
	}
	for _, s := range own {
		s.Close()
	}
}
