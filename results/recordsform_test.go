package results

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// streamRecord is a streamed request of n tokens, one per chunk.
func streamRecord(seq int64, n int) *loadgen.Record {
	start := time.Duration(seq) * 10 * time.Millisecond
	r := &loadgen.Record{Seq: seq, ID: fmt.Sprintf("r%d", seq), Class: "chat", Stage: "main", Intended: start,
		Sent: start + 120*time.Microsecond, OutputTokens: n, InputTokens: 40, RequestedInputTokens: 40,
		TokenSource: loadgen.TokensFromUsage, ChunkTokenSource: "spread", Status: 200, FinishReason: "length"}
	for i := 0; i < n; i++ {
		r.Chunks = append(r.Chunks, loadgen.Chunk{At: start + 30*time.Millisecond + time.Duration(i)*5*time.Millisecond + time.Duration(i*i), Tokens: 1})
	}
	r.FirstAnswer = r.Chunks[0].At
	r.End = r.Chunks[n-1].At + time.Millisecond
	return r
}

// Every form and compression reads back with the same per-request
// figures; compact ones give no ICL or ITL samples but keep the chunk
// count and the last chunk; a compressed file is found by the plain name.
func TestRecordFormsRoundTrip(t *testing.T) {
	t.Parallel()
	for _, form := range []RecordsForm{RecordsFull, RecordsCompact} {
		for _, comp := range []Compression{CompressNone, CompressGzip, CompressZstd} {
			t.Run(fmt.Sprintf("%s-%s", form, comp), func(t *testing.T) {
				dir := Dir(t.TempDir())
				w, err := CreateRecordWriter(dir.Path(RecordsFileName(comp)), form, comp)
				if err != nil {
					t.Fatal(err)
				}
				var want []*loadgen.Record
				for i := int64(0); i < 50; i++ {
					r := streamRecord(i, 2+int(i%7))
					want = append(want, r)
					if err := w.Write(r); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if got := CompressionOf(dir.RecordsPath()); got != comp {
					t.Errorf("RecordsPath %s: compression %q, want %q", dir.RecordsPath(), got, comp)
				}
				i := 0
				st, err := ReadRecords(dir.Path(RecordsFile), func(r *loadgen.Record) error {
					w := want[i]
					i++
					wt, _ := w.TTFT()
					gt, ok := r.TTFT()
					wp, _ := w.TPOT()
					gp, _ := r.TPOT()
					if !ok || gt != wt || r.E2E() != w.E2E() || gp != wp || r.ScheduleLag() != w.ScheduleLag() || r.OutputTokens != w.OutputTokens {
						return fmt.Errorf("record %d: figures differ: ttft %v/%v tpot %v/%v", r.Seq, gt, wt, gp, wp)
					}
					icl := 0
					r.EachICL(func(time.Duration) { icl++ })
					switch {
					case form == RecordsCompact && (icl != 0 || !r.Compact || r.ChunkCount != len(w.Chunks) || r.LastChunkAt != loadgen.TruncMicros(w.Chunks[len(w.Chunks)-1].At)):
						return fmt.Errorf("record %d: compact: %d ICL samples, chunk count %d of %d, last %v", r.Seq, icl, r.ChunkCount, len(w.Chunks), r.LastChunkAt)
					case form == RecordsFull && icl != len(w.Chunks)-1:
						return fmt.Errorf("record %d: full: %d ICL samples, want %d", r.Seq, icl, len(w.Chunks)-1)
					}
					return nil
				})
				if err != nil || st.Records != 50 || st.TornTail {
					t.Fatalf("read %d records, torn %v: %v", st.Records, st.TornTail, err)
				}
			})
		}
	}
}

// A compressed file cut short (a killed run) reads as a torn tail: every
// record flushed before the cut is judged.
func TestCompressedTornTail(t *testing.T) {
	t.Parallel()
	for _, comp := range []Compression{CompressGzip, CompressZstd} {
		dir := Dir(t.TempDir())
		p := dir.Path(RecordsFileName(comp))
		w, err := CreateRecordWriter(p, RecordsCompact, comp)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 20; i++ {
			w.Write(streamRecord(i, 4))
		}
		if err := w.Flush(); err != nil { // what the pipeline does each second
			t.Fatal(err)
		}
		flushed, _ := os.Stat(p)
		for i := int64(20); i < 40; i++ {
			w.Write(streamRecord(i, 4))
		}
		w.Close()
		b, _ := os.ReadFile(p)
		// Cut within the second block: after the first flush, before the end.
		cut := filepath.Join(string(dir), "cut"+filepath.Ext(p))
		os.WriteFile(cut, b[:flushed.Size()+(int64(len(b))-flushed.Size())/2], 0o644)
		st, err := ReadRecords(cut, func(*loadgen.Record) error { return nil })
		if err != nil || !st.TornTail || st.Records < 20 || st.Records >= 40 {
			t.Errorf("%s: read %d records, torn %v, err %v; want ≥ 20 whole records and a torn tail", comp, st.Records, st.TornTail, err)
		}
	}
}

// BenchmarkRecordWriter measures the writer's cost per request: a
// streamed request of 128 tokens, one per chunk, with instants jittered
// as a real stream's are (so compression is not flattered), in every form.
func BenchmarkRecordWriter(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	recs := make([]*loadgen.Record, 1024)
	for i := range recs {
		r := streamRecord(int64(i), 128)
		for j := range r.Chunks {
			r.Chunks[j].At += time.Duration(rng.Int64N(int64(3 * time.Millisecond)))
			if j > 0 && r.Chunks[j].At < r.Chunks[j-1].At {
				r.Chunks[j].At = r.Chunks[j-1].At + time.Duration(rng.Int64N(1000))
			}
		}
		r.End = r.Chunks[127].At + time.Duration(rng.Int64N(int64(time.Millisecond)))
		recs[i] = r
	}
	// The reference, in the same run: encoding/json (reflection) writing
	// the same full lines to the same kind of file.
	b.Run("full/encoding-json", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), RecordsFile))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		enc := json.NewEncoder(f)
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			r := recs[i%len(recs)]
			if err := enc.Encode(r.ReferenceForm(false)); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, form := range []RecordsForm{RecordsFull, RecordsCompact} {
		for _, comp := range []Compression{CompressNone, CompressGzip, CompressZstd} {
			name := fmt.Sprintf("%s/%s", form, comp)
			if comp == CompressNone {
				name = string(form) + "/plain"
			}
			b.Run(name, func(b *testing.B) {
				p := filepath.Join(b.TempDir(), RecordsFileName(comp))
				w, err := CreateRecordWriter(p, form, comp)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := w.Write(recs[i%len(recs)]); err != nil {
						b.Fatal(err)
					}
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				st, _ := os.Stat(p)
				b.ReportMetric(float64(st.Size())/float64(b.N), "bytes/req")
			})
		}
	}
}

// The digest a writer keeps as it writes is the one a read of its file
// finds, in every compression; the summary beside the file vouches for it,
// and a file emptied under it disagrees, naming both counts.
func TestRecordsDigestRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []Compression{CompressNone, CompressGzip, CompressZstd} {
		dir := Dir(t.TempDir())
		path := dir.Path(RecordsFileName(c))
		w, err := CreateRecordWriter(path, RecordsFull, c)
		if err != nil {
			t.Fatal(err)
		}
		for i := int64(0); i < 300; i++ {
			if err := w.Write(streamRecord(i, 8)); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		d := w.Digest()
		st, err := ReadRecords(path, func(*loadgen.Record) error { return nil })
		if err != nil || len(st.Files) != 1 {
			t.Fatalf("%q: read: %v, %d files", c, err, len(st.Files))
		}
		if st.Files[0].RecordsDigest != d || d.Count != 300 {
			t.Errorf("%q: written %+v, read %+v", c, d, st.Files[0].RecordsDigest)
		}
		s := &Summary{Records: &d}
		if err := dir.WriteSummary(s); err != nil {
			t.Fatal(err)
		}
		if why := RecordsDisagree(st.Files[0]); why != "" {
			t.Errorf("%q: the file as written disagrees: %s", c, why)
		}
		if why := RecordsDisagree(FileDigest{Path: path}); !strings.Contains(why, "holds 0 records") || !strings.Contains(why, "says 300 were written") {
			t.Errorf("%q: an emptied file: %q", c, why)
		}
	}
}
