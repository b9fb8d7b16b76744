package results

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

func TestMergeSessionFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, ls ...loadgen.SessionLine) string {
		p := filepath.Join(dir, name)
		w, err := CreateJSONL(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if err := w.Write(l); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.jsonl", loadgen.SessionLine{Session: "s0", StartUs: 0, EndUs: 500, Calls: 2}, loadgen.SessionLine{Session: "s2", StartUs: 100, EndUs: 900})
	b := write("b.jsonl", loadgen.SessionLine{Session: "s1", StartUs: 0, EndUs: 300})
	out := filepath.Join(dir, SessionsFile)
	n, err := MergeSessionFiles([]string{a, b, filepath.Join(dir, "none")}, []time.Duration{0, time.Millisecond, 0}, out)
	if err != nil || n != 3 {
		t.Fatalf("merged %d (%v), want 3", n, err)
	}
	got, err := ReadSessions(out)
	if err != nil {
		t.Fatal(err)
	}
	// s1 moved by its shard's 1 ms onto the merged epoch: 1000–1300 µs.
	want := []struct {
		id       string
		from, to int64
	}{{"s0", 0, 500}, {"s2", 100, 900}, {"s1", 1000, 1300}}
	for i, w := range want {
		if got[i].Session != w.id || got[i].StartUs != w.from || got[i].EndUs != w.to {
			t.Errorf("line %d: %+v, want %s %d–%d", i, got[i], w.id, w.from, w.to)
		}
	}
	if _, err := MergeSessionFiles([]string{filepath.Join(dir, "x")}, []time.Duration{0}, filepath.Join(dir, "y")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "y")); !os.IsNotExist(err) {
		t.Errorf("no shard had sessions, yet %v", err)
	}
}
