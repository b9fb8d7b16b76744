package comparison

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/results"
)

// A long run is read as a uniform sample of MaxRequests per stage; the
// class counts and the request count stay whole.
func TestReadSamplesALongRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	w, err := results.CreateRecords(filepath.Join(dir, results.RecordsFile))
	if err != nil {
		t.Fatal(err)
	}
	const n = MaxRequests + MaxRequests/4
	for i := range n {
		r := loadgen.Record{Seq: int64(i), Stage: "main", Class: []string{"chat", "rag"}[i%2],
			Intended: time.Duration(i) * time.Millisecond, Sent: time.Duration(i) * time.Millisecond,
			End: time.Duration(i)*time.Millisecond + time.Duration(i)*time.Microsecond, OutputTokens: 1}
		r.Chunks = []loadgen.Chunk{{At: r.End, Tokens: 1}}
		if err := w.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Stages["main"]) != MaxRequests || s.Seen["main"] != n || s.Classes["main"]["chat"]+s.Classes["main"]["rag"] != n {
		t.Fatalf("kept %d, seen %d, classes %v", len(s.Stages["main"]), s.Seen["main"], s.Classes["main"])
	}
	var seqs []int64
	for _, r := range s.Stages["main"] {
		seqs = append(seqs, r.Seq)
	}
	slices.Sort(seqs)
	if med := float64(seqs[len(seqs)/2]) / n; med < 0.49 || med > 0.51 {
		t.Errorf("the sample's median record is at %.3f of the run: not uniform", med)
	}
}

// A validate's directory keeps its records per stage only: compare reads
// every stage of it.
func TestReadValidateStages(t *testing.T) {
	t.Parallel()
	d := results.Dir(t.TempDir())
	for i, st := range []string{"normal", "peak"} {
		sd := d.Stage(st)
		if err := sd.Create(); err != nil {
			t.Fatal(err)
		}
		w, err := results.CreateRecords(sd.Path(results.RecordsFile))
		if err != nil {
			t.Fatal(err)
		}
		for j := range 3 + i {
			w.Write(&loadgen.Record{Seq: int64(j), Stage: st, Class: "chat", End: time.Millisecond, OutputTokens: 1})
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Read(string(d))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Order) != 2 || s.Seen["normal"] != 3 || s.Seen["peak"] != 4 {
		t.Errorf("stages %v, seen %v", s.Order, s.Seen)
	}
}
