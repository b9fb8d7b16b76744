package results

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
)

func TestWriteJSONReplacesAtomically(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "summary.json")
	if err := WriteJSON(p, map[string]int{"a": 1}); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(p, map[string]int{"a": 2}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	var v map[string]int
	if err := json.Unmarshal(b, &v); err != nil || v["a"] != 2 {
		t.Fatalf("%s %v", b, err)
	}
	ents, _ := os.ReadDir(filepath.Dir(p))
	if len(ents) != 1 {
		t.Errorf("temporary files left: %v", ents)
	}
	if err := WriteJSON(filepath.Join(t.TempDir(), "no", "such", "dir.json"), 1); err == nil || !strings.Contains(err.Error(), "dir.json") {
		t.Errorf("error %v does not name the file", err)
	}
}

// A full disk: the first failed write is reported with file and line, and
// later writes do not pretend to succeed.
func TestJSONLWriterFullDisk(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	w, err := CreateJSONL("/dev/full")
	if err != nil {
		t.Fatal(err)
	}
	err = w.Write(map[string]int{"seq": 1})
	if err == nil || !strings.Contains(err.Error(), "/dev/full: line 1") || !strings.Contains(err.Error(), "no space") {
		t.Fatalf("error %v", err)
	}
	if w.Write(1) == nil || w.Err() == nil {
		t.Error("writes after a failure must keep failing")
	}
}

func TestJSONLWriterLines(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "requests.jsonl")
	w, err := CreateJSONL(p)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		rec := &loadgen.Record{Seq: int64(i), Class: "c<&>"}
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 3 {
		t.Fatalf("lines %q", lines)
	}
	var back loadgen.Record
	if err := json.Unmarshal([]byte(lines[2]), &back); err != nil || back.Seq != 2 || back.Class != "c<&>" {
		t.Errorf("line 3 %q: %+v %v", lines[2], back, err)
	}
}

// The interval log reads back, through hdrhistogram-go's reader, into
// histograms equal to those written.
func TestHlogRoundTrip(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	start := time.Unix(1_800_000_000, 0)
	w, err := NewHlogWriter("x.hlog", &buf, start)
	if err != nil {
		t.Fatal(err)
	}
	var want []*hdrhistogram.Histogram
	for i := 0; i < 3; i++ {
		h := measure.NewHistogram()
		h.SetTag("ttft")
		for v := int64(1); v < 50000; v += int64(97 * (i + 1)) {
			h.RecordValue(v)
		}
		from := start.Add(time.Duration(i) * time.Second)
		if err := w.WriteInterval([]*hdrhistogram.Histogram{h}, from, from.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
		want = append(want, h)
	}
	r := hdrhistogram.NewHistogramLogReader(&buf)
	for i := 0; ; i++ {
		h, err := r.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			if i != 3 {
				t.Fatalf("read %d intervals, want 3", i)
			}
			break
		}
		if h.Tag() != "ttft" || h.TotalCount() != want[i].TotalCount() || h.ValueAtQuantile(99) != want[i].ValueAtQuantile(99) {
			t.Errorf("interval %d: tag %q count %d p99 %d; want %d %d", i, h.Tag(), h.TotalCount(), h.ValueAtQuantile(99),
				want[i].TotalCount(), want[i].ValueAtQuantile(99))
		}
		if h.StartTimeMs() != start.Add(time.Duration(i)*time.Second).UnixMilli() {
			t.Errorf("interval %d start %d", i, h.StartTimeMs())
		}
	}
}

// TestHlogLineAsTheLibrary: an interval line is hdrhistogram's
// OutputIntervalHistogram's, byte for byte (tagged or not, empty or not),
// and a tag the library refuses is refused.
func TestHlogLineAsTheLibrary(t *testing.T) {
	t.Parallel()
	start := time.Unix(1_800_000_000, 250_000_000)
	var hists []*hdrhistogram.Histogram
	for i, tag := range []string{"ttft", "", "itl", "e2e"} {
		h := measure.NewHistogram()
		h.SetTag(tag)
		for v := int64(1); i < 3 && v < 5_000_000; v = v*3 + int64(i) {
			h.RecordValues(v, v%7+1)
		}
		hists = append(hists, h)
	}
	var got, want bytes.Buffer
	w := &HlogWriter{path: "x.hlog", w: &got}
	if err := w.WriteInterval(hists, start, start.Add(1500*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	lw := hdrhistogram.NewHistogramLogWriter(&want)
	for _, h := range hists {
		if err := lw.OutputIntervalHistogram(h); err != nil {
			t.Fatal(err)
		}
	}
	if got.String() != want.String() {
		t.Fatalf("interval lines differ from the library's:\n got  %q\n want %q", got.String(), want.String())
	}
	bad := measure.NewHistogram()
	bad.SetTag("a b")
	if err := (&HlogWriter{path: "x.hlog", w: &got}).WriteInterval([]*hdrhistogram.Histogram{bad}, start, start); err == nil {
		t.Fatal("a tag with a space was written")
	}
}

// Replace removes every entry of tailgate's layout, a validate's and a
// sweep's included, and keeps (and names) what tailgate did not write.
func TestReplaceClearsTheLayoutOnly(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	for _, f := range []string{VerdictFile, JUnitFile, ManifestFile, SignatureFile, EnvironmentFile, ReportFile,
		LLMDReportFile, RecordsFile, "requests.jsonl.zst", SweepFile, "notes.txt"} {
		if err := os.WriteFile(d.Path(f), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, sub := range []string{d.Stage("normal").Path(""), d.Level("r10").Path(""), d.Path(InputsDir), d.Path(ShardsDir), d.Path("mine")} {
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if !d.HasResults() {
		t.Fatal("a validate's directory does not count as results")
	}
	var log bytes.Buffer
	if err := d.Replace(&log); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(string(d))
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if strings.Join(left, ",") != "mine,notes.txt" {
		t.Errorf("left %v, want only the user's mine and notes.txt", left)
	}
	if !strings.Contains(log.String(), "kept 2 entries it did not write: mine, notes.txt") {
		t.Errorf("log %q", log.String())
	}
	if d.HasResults() {
		t.Error("still holds results")
	}
	if err := Dir(filepath.Join(string(d), "absent")).Replace(nil); err != nil {
		t.Errorf("an absent directory: %v", err)
	}
}
