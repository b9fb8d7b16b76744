package results

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

// Two files' records come out as one, in order of end, every instant of
// the second moved by its shift.
func TestMergeRecordFilesInEndOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, ends ...time.Duration) string {
		p := filepath.Join(dir, name)
		w, err := CreateRecordWriter(p, RecordsFull, CompressNone)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range ends {
			r := loadgen.Record{Seq: int64(i), Intended: e - 5*time.Millisecond, Sent: e - 5*time.Millisecond, End: e,
				Chunks: []loadgen.Chunk{{At: e - time.Millisecond, Tokens: 1}}, OutputTokens: 1}
			if err := w.Write(&r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ms := time.Millisecond
	a := write("a.jsonl", 10*ms, 30*ms, 50*ms)
	b := write("b.jsonl", 5*ms, 25*ms) // shifted by 10 ms: 15, 35
	shift := func(d time.Duration) func(*loadgen.Record) time.Duration {
		return func(*loadgen.Record) time.Duration { return d }
	}
	out := filepath.Join(dir, "out.jsonl")
	n, err := MergeRecordFiles([]string{a, b}, []func(*loadgen.Record) time.Duration{shift(0), shift(10 * ms)}, out, RecordsFull, CompressNone)
	if err != nil || n != 5 {
		t.Fatalf("merged %d records, %v; want 5", n, err)
	}
	var ends []time.Duration
	if _, err := ReadRecords(out, func(r *loadgen.Record) error {
		if r.End-r.Chunks[0].At != ms || r.End-r.Intended != 5*ms {
			t.Errorf("record ending %v: chunk or intended start not moved with it", r.End)
		}
		ends = append(ends, r.End)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []time.Duration{10 * ms, 15 * ms, 30 * ms, 35 * ms, 50 * ms}
	for i := range want {
		if i >= len(ends) || ends[i] != want[i] {
			t.Fatalf("ends %v, want %v", ends, want)
		}
	}
}

// Intervals of two logs are interleaved by start; a missing log is none.
func TestMergeHlogsByStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	start := time.Unix(1_800_000_000, 0)
	write := func(name string, offsets ...int) string {
		p := filepath.Join(dir, name)
		w, err := CreateHlog(p, start)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range offsets {
			h := measure.NewHistogram()
			h.RecordValue(int64(1000 + o))
			from := start.Add(time.Duration(o) * time.Second)
			if err := w.WriteInterval([]*hdrhistogram.Histogram{h}, from, from.Add(time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	out := filepath.Join(dir, "out.hlog")
	if err := MergeHlogs([]string{write("a.hlog", 0, 2, 4), filepath.Join(dir, "none.hlog"), write("b.hlog", 1, 3)}, start, out); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := hdrhistogram.NewHistogramLogReader(f)
	for i := 0; ; i++ {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			if i != 5 {
				t.Errorf("%d intervals, want 5", i)
			}
			break
		}
		if got := h.StartTimeMs(); got != start.Add(time.Duration(i)*time.Second).UnixMilli() || h.Max() < int64(1000+i) || h.Min() > int64(1000+i) {
			t.Errorf("interval %d: start %d, values %d..%d", i, got, h.Min(), h.Max())
		}
	}
}
