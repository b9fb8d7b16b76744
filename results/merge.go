package results

import (
	"container/heap"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/tailgate-llm/tailgate/loadgen"
)

// recordStream is one shard's records, read one at a time on its own
// goroutine, for the k-way merge.
type recordStream struct {
	c    chan *loadgen.Record
	errc chan error
	head *loadgen.Record
}

func openStream(path string, shift func(*loadgen.Record) time.Duration) *recordStream {
	rs := &recordStream{c: make(chan *loadgen.Record, 256), errc: make(chan error, 1)}
	go func() {
		defer close(rs.c)
		st, err := ReadRecords(path, func(r *loadgen.Record) error {
			cp := *r
			d := shift(r)
			cp.Intended += d
			cp.Sent += d
			cp.End += d
			if cp.FirstAnswer > 0 {
				cp.FirstAnswer += d
			}
			if cp.LastChunkAt > 0 {
				cp.LastChunkAt += d
			}
			cp.Chunks = append([]loadgen.Chunk(nil), r.Chunks...)
			for i := range cp.Chunks {
				cp.Chunks[i].At += d
			}
			rs.c <- &cp
			return nil
		})
		// Records that disagree with the shard's summary first: a torn
		// tail under a summary is one of the ways they do.
		if err == nil && len(st.Files) == 1 {
			if d := RecordsDisagree(st.Files[0]); d != "" {
				err = &DisagreeError{Dir: Dir(filepath.Dir(path)), Detail: d}
			}
		}
		if err == nil && st.TornTail {
			err = fmt.Errorf("%s: line %d is torn: the shard was killed while writing; merge needs whole shards", path, st.TornLine)
		}
		rs.errc <- err
	}()
	return rs
}

type streamHeap []*recordStream

func (h streamHeap) Len() int           { return len(h) }
func (h streamHeap) Less(i, j int) bool { return h[i].head.End < h[j].head.End }
func (h streamHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *streamHeap) Push(x any)        { *h = append(*h, x.(*recordStream)) }
func (h *streamHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// MergeRecordFiles k-way merges record files (each in end order, as a run
// writes them) into one at path, in order of end instant, each record
// moved by its file's shift (onto a merged epoch). Memory stays flat: one
// record per file is held. It returns the records written; a torn last
// line is an error (a merge needs whole files).
func MergeRecordFiles(paths []string, shifts []func(*loadgen.Record) time.Duration, path string, form RecordsForm, comp Compression) (int64, error) {
	d, err := MergeRecords(paths, shifts, path, form, comp)
	return d.Count, err
}

// DisagreeError is a shard whose records disagree with its summary.json
// (RecordsDisagree): merging it would count requests that are not there.
type DisagreeError struct {
	Dir    Dir
	Detail string
}

func (e *DisagreeError) Error() string {
	return fmt.Sprintf("%s: records disagree with its %s: %s", e.Dir, SummaryFile, e.Detail)
}

// MergeRecords is MergeRecordFiles, returning the digest of what it wrote
// (the merged summary's records). A file whose records disagree with the
// summary.json beside it is a *DisagreeError.
func MergeRecords(paths []string, shifts []func(*loadgen.Record) time.Duration, path string, form RecordsForm, comp Compression) (RecordsDigest, error) {
	w, err := CreateRecordWriter(path, form, comp)
	if err != nil {
		return RecordsDigest{}, err
	}
	var streams []*recordStream
	h := &streamHeap{}
	for i, p := range paths {
		rs := openStream(p, shifts[i])
		streams = append(streams, rs)
		if r, ok := <-rs.c; ok {
			rs.head = r
			heap.Push(h, rs)
		}
	}
	var n int64
	var werr error
	for h.Len() > 0 {
		rs := (*h)[0]
		if werr == nil {
			werr = w.Write(rs.head)
		}
		n++
		if r, ok := <-rs.c; ok {
			rs.head = r
			heap.Fix(h, 0)
		} else {
			heap.Pop(h)
		}
	}
	var rerr error
	for _, rs := range streams {
		for range rs.c {
		}
		if err := <-rs.errc; err != nil && rerr == nil {
			rerr = err
		}
	}
	cerr := w.Close()
	d := w.Digest()
	switch {
	case rerr != nil:
		return d, rerr
	case werr != nil:
		return d, werr
	}
	return d, cerr
}

// MergeHlogs writes the intervals of the interval logs at paths (those
// that exist) into one log at path, starting at base, in order of start
// time (the format's readers sum intervals over a range, so overlapping
// intervals of different logs add up exactly).
func MergeHlogs(paths []string, base time.Time, path string) error {
	type reader struct {
		r    *hdrhistogram.HistogramLogReader
		f    *os.File
		head *hdrhistogram.Histogram
		path string
	}
	var rs []*reader
	defer func() {
		for _, r := range rs {
			r.f.Close()
		}
	}()
	next := func(r *reader) error {
		h, err := r.r.NextIntervalHistogram()
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("%s: %w", r.path, err)
		}
		r.head = h
		return nil
	}
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		r := &reader{r: hdrhistogram.NewHistogramLogReader(f), f: f, path: p}
		rs = append(rs, r)
		if err := next(r); err != nil {
			return err
		}
	}
	w, err := CreateHlog(path, base)
	if err != nil {
		return err
	}
	for {
		var best *reader
		for _, r := range rs {
			if r.head != nil && (best == nil || r.head.StartTimeMs() < best.head.StartTimeMs()) {
				best = r
			}
		}
		if best == nil {
			break
		}
		if err := w.WriteHistogram(best.head); err != nil {
			w.Close()
			return err
		}
		if err := next(best); err != nil {
			w.Close()
			return err
		}
	}
	return w.Close()
}
