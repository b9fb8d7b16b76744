package results

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// writeStage writes a stage's run directory: n records numbered from 0
// (zstd-compressed when zst), and a summary started at started unless it
// is zero (a stage cut short).
func writeStage(t *testing.T, d Dir, name string, n int, started time.Time, zst bool) {
	t.Helper()
	sd := d.Stage(name)
	if err := sd.Create(); err != nil {
		t.Fatal(err)
	}
	comp := CompressNone
	if zst {
		comp = CompressZstd
	}
	w, err := CreateRecordWriter(sd.Path(RecordsFileName(comp)), RecordsFull, comp)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(&loadgen.Record{Seq: int64(i), Stage: name, End: time.Duration(i+1) * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !started.IsZero() {
		var s Summary
		s.Run.Started = started.Format(time.RFC3339Nano)
		if err := sd.WriteSummary(&s); err != nil {
			t.Fatal(err)
		}
	}
}

type seen struct {
	stage string
	seq   int64
}

func readRun(t *testing.T, d Dir) ([]seen, ReadStats, error) {
	t.Helper()
	var got []seen
	st, err := d.ReadRunRecords(func(r *loadgen.Record) error {
		got = append(got, seen{r.Stage, r.Seq})
		return nil
	})
	return got, st, err
}

// A validate keeps its records once, per stage: read as one stream, the
// stages come in the order they ran (not by name), each one's Seq moved
// past the one before's, in whatever form each stage kept them.
func TestReadRunRecordsReadsStagesInTurn(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writeStage(t, d, "peak", 2, t0.Add(time.Minute), true)
	writeStage(t, d, "normal", 3, t0, false)
	writeStage(t, d, "aftermath", 1, time.Time{}, false) // killed: no summary
	got, st, err := readRun(t, d)
	if err != nil {
		t.Fatal(err)
	}
	want := []seen{{"normal", 0}, {"normal", 1}, {"normal", 2}, {"peak", 3}, {"peak", 4}, {"aftermath", 5}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("read %v, want %v", got, want)
	}
	if st.Records != 6 || st.TornTail {
		t.Errorf("stats %+v", st)
	}
	if _, err := os.Stat(d.Path(RecordsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("reading wrote a plan-wide %s: %v", RecordsFile, err)
	}

	// A torn last line in the stage cut short: the rest is read and the
	// torn file named.
	p := d.Stage("aftermath").Path(RecordsFile)
	f, _ := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	f.WriteString(`{"seq":1,"stage":"afterm`)
	f.Close()
	got, st, err = readRun(t, d)
	if err != nil || len(got) != 6 || !st.TornTail || st.TornPath != p || st.TornLine != 2 {
		t.Errorf("torn: %d records, %+v, %v", len(got), st, err)
	}
}

// A directory with its own requests.jsonl (a run, a merge, or a validate
// written when it also kept a plan-wide copy) is read from that file only.
func TestReadRunRecordsPrefersItsOwnFile(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	writeStage(t, d, "normal", 3, time.Now(), false)
	w, err := CreateRecords(d.Path(RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	w.Write(&loadgen.Record{Seq: 7, Stage: "normal"})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, st, err := readRun(t, d)
	if err != nil || len(got) != 1 || got[0] != (seen{"normal", 7}) || st.Records != 1 {
		t.Errorf("read %v %+v %v, want the plan-wide file's one record", got, st, err)
	}
}

// No records anywhere: an error that os.ErrNotExist matches (check says
// "kept no records" for a --records none run) and names the directory.
func TestReadRunRecordsMissing(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	if _, _, err := readRun(t, d); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("empty directory: %v", err)
	}
	if err := d.Stage("normal").Create(); err != nil {
		t.Fatal(err)
	}
	_, _, err := readRun(t, d)
	if !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), filepath.Clean(string(d))) {
		t.Errorf("stages without records: %v", err)
	}
}
