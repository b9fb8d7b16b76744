package results

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// RecordsForm is how much of each request requests.jsonl keeps. At a
// million requests of 128 tokens the full form is about 2 GB, most of it
// chunk instants.
type RecordsForm string

const (
	// RecordsFull keeps every chunk instant: every figure, ICL and ITL
	// included, can be re-judged from the file.
	RecordsFull RecordsForm = "full"
	// RecordsCompact keeps the per-request figures (TTFT, TTFAT, TPOT,
	// E2E, schedule lag, tokens, status, error), the first and last chunk
	// instants and the chunk count: check re-judges every objective but
	// ICL and ITL ones, which read NO_DATA from it.
	RecordsCompact RecordsForm = "compact"
	// RecordsNone writes no records: the summary, latency.hlog and
	// histograms.json hold the figures (merge still works), check cannot
	// re-judge.
	RecordsNone RecordsForm = "none"
)

// ParseRecordsForm reads full, compact or none.
func ParseRecordsForm(s string) (RecordsForm, error) {
	switch f := RecordsForm(s); f {
	case RecordsFull, RecordsCompact, RecordsNone:
		return f, nil
	case "":
		return RecordsFull, nil
	}
	return "", fmt.Errorf("records form %q: want full, compact or none", s)
}

// Compression is how requests.jsonl is compressed; the file name says it.
type Compression string

// How records.jsonl is stored; CompressNone is plain text.
const (
	CompressNone Compression = ""
	CompressGzip Compression = "gzip"
	CompressZstd Compression = "zstd"
)

// ParseCompression reads none, gzip or zstd.
func ParseCompression(s string) (Compression, error) {
	switch s {
	case "", "none":
		return CompressNone, nil
	case "gzip", "gz":
		return CompressGzip, nil
	case "zstd", "zst":
		return CompressZstd, nil
	}
	return "", fmt.Errorf("records compression %q: want none, gzip or zstd", s)
}

// RecordsFileName is requests.jsonl, requests.jsonl.gz or requests.jsonl.zst.
func RecordsFileName(c Compression) string {
	switch c {
	case CompressGzip:
		return RecordsFile + ".gz"
	case CompressZstd:
		return RecordsFile + ".zst"
	}
	return RecordsFile
}

// CompressionOf is the compression a file name's suffix says.
func CompressionOf(path string) Compression {
	switch {
	case strings.HasSuffix(path, ".gz"):
		return CompressGzip
	case strings.HasSuffix(path, ".zst"), strings.HasSuffix(path, ".zstd"):
		return CompressZstd
	}
	return CompressNone
}

// recordsNames are the names a results directory's records may have, in
// the order looked for.
var recordsNames = []string{RecordsFile, RecordsFile + ".zst", RecordsFile + ".gz"}

// RecordsPath is the records file in d, whichever compression it was
// written with; d.Path(RecordsFile) when there is none.
func (d Dir) RecordsPath() string {
	for _, n := range recordsNames {
		if _, err := os.Stat(d.Path(n)); err == nil {
			return d.Path(n)
		}
	}
	return d.Path(RecordsFile)
}

// RecordWriter streams records to requests.jsonl in a form and a
// compression, as requests finish. Uncompressed, Write makes each line one
// write, so a process that dies loses at most the line in flight; Append
// holds lines until Drain hands them over in one write (the pipeline
// drains whenever no record waits, so a burst costs one write, not one a
// line). Compressed, Flush (called once a second by the pipeline) ends a
// compressed block, so it loses at most the last second. After the first
// failure it writes nothing more and keeps the error.
type RecordWriter struct {
	path  string
	form  RecordsForm
	f     *os.File
	z     compressor // nil: uncompressed
	buf   bytes.Buffer
	line  []byte
	err   error
	Lines int64
	// sum and written are the SHA-256 and the line count of the
	// uncompressed bytes handed to the file so far, kept as they are
	// written so the summary can vouch for the file without reading it
	// back (a re-read would hash what the disk holds, not what was meant).
	sum     hash.Hash
	pending int64 // lines buffered, not yet handed to the file
	written int64
	writes  int64 // writes handed to the file or the compressor
}

// RecordsDigest is summary.json's "records": how many lines the run wrote
// to its records file and the SHA-256 of their uncompressed bytes, so
// check and merge can tell an emptied or torn file from the one written.
type RecordsDigest struct {
	Count  int64  `json:"count"`
	SHA256 string `json:"sha256"`
}

// compressor is gzip.Writer's and zstd.Encoder's common ground.
type compressor interface {
	io.WriteCloser
	Flush() error
}

// CreateRecordWriter creates (truncates) path for records of form
// (RecordsFull or RecordsCompact) compressed with c.
func CreateRecordWriter(path string, form RecordsForm, c Compression) (*RecordWriter, error) {
	if form == RecordsNone {
		return nil, fmt.Errorf("%s: records form none writes no file", path)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, &WriteError{Path: path, Err: err}
	}
	w := &RecordWriter{path: path, form: form, f: f, sum: sha256.New()}
	switch c {
	case CompressGzip:
		w.z, _ = gzip.NewWriterLevel(f, gzip.BestSpeed)
	case CompressZstd:
		z, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
			zstd.WithLowerEncoderMem(true))
		if err != nil {
			f.Close()
			return nil, &WriteError{Path: path, Err: err}
		}
		w.z = z
	}
	return w, nil
}

// Write appends rec in the writer's form (loadgen.Record.AppendJSON:
// encoding/json's bytes without its reflection) and, uncompressed, writes
// it out at once.
func (w *RecordWriter) Write(rec *loadgen.Record) error {
	if err := w.Append(rec); err != nil || w.z != nil {
		return err
	}
	return w.drain()
}

// Append buffers rec's line until Drain, Flush or Close write it (the
// caller bounds how many it lets wait); compressed, it hands the buffer
// to the compressor once it passes 64 KiB.
func (w *RecordWriter) Append(rec *loadgen.Record) error {
	if w.err != nil {
		return w.err
	}
	w.line = rec.AppendJSON(w.line[:0], w.form == RecordsCompact)
	w.line = append(w.line, '\n')
	w.buf.Write(w.line)
	w.Lines++
	w.pending++
	if w.z == nil || w.buf.Len() < 64<<10 {
		return nil
	}
	return w.drain()
}

// Drain hands the lines Append buffered to an uncompressed file in one
// write. A compressed file keeps batching to 64 KiB: Flush ends its
// blocks.
func (w *RecordWriter) Drain() error {
	if w.err != nil || w.z != nil {
		return w.err
	}
	return w.drain()
}

// Writes is how many writes the file (or, compressed, the compressor) has
// been handed: one a line through Write, one a batch through Append.
func (w *RecordWriter) Writes() int64 { return w.writes }

// drain hands the buffered lines to the file (through the compressor).
func (w *RecordWriter) drain() error {
	if w.buf.Len() == 0 {
		return nil
	}
	var err error
	if w.z != nil {
		_, err = w.z.Write(w.buf.Bytes())
	} else {
		_, err = w.f.Write(w.buf.Bytes())
	}
	w.writes++
	if err == nil {
		w.sum.Write(w.buf.Bytes())
		w.written += w.pending
	}
	w.buf.Reset()
	w.pending = 0
	if err != nil {
		// The first line that may not have reached the file.
		w.err = &WriteError{Path: w.path, Err: fmt.Errorf("line %d: write: %w", w.written+1, err)}
	}
	return w.err
}

// Digest is the count and SHA-256 of the lines handed to the file so far
// (after Close: every line the file holds, unless a write failed).
func (w *RecordWriter) Digest() RecordsDigest {
	return RecordsDigest{Count: w.written, SHA256: hex.EncodeToString(w.sum.Sum(nil))}
}

// Flush writes what is buffered and, compressed, ends the block, so the
// file on disk holds every record written so far.
func (w *RecordWriter) Flush() error {
	if w.err != nil {
		return w.err
	}
	if err := w.drain(); err != nil {
		return err
	}
	if w.z != nil {
		if err := w.z.Flush(); err != nil {
			w.err = &WriteError{Path: w.path, Err: fmt.Errorf("flush: %w", err)}
		}
	}
	return w.err
}

// Path is the file written.
func (w *RecordWriter) Path() string { return w.path }

// Close writes the rest, ends the compressed stream, syncs and closes.
func (w *RecordWriter) Close() error {
	if w.err == nil {
		if err := w.drain(); err == nil && w.z != nil {
			if err := w.z.Close(); err != nil {
				w.err = &WriteError{Path: w.path, Err: fmt.Errorf("close: %w", err)}
			}
		}
	}
	serr := w.f.Sync()
	cerr := w.f.Close()
	switch {
	case w.err != nil:
		return w.err
	case serr != nil:
		return &WriteError{Path: w.path, Err: fmt.Errorf("sync: %w", serr)}
	case cerr != nil:
		return &WriteError{Path: w.path, Err: cerr}
	}
	return nil
}

// openRecords opens path for reading, decompressing by its first bytes
// (gzip 1f 8b, zstd 28 b5 2f fd) whatever its name. A path named
// requests.jsonl that does not exist is looked for compressed too.
func openRecords(path string) (io.Reader, func(), error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) && filepath.Base(path) == RecordsFile {
		for _, n := range recordsNames[1:] {
			if g, gerr := os.Open(path + strings.TrimPrefix(n, RecordsFile)); gerr == nil {
				f, err, path = g, nil, path+strings.TrimPrefix(n, RecordsFile)
				break
			}
		}
	}
	if err != nil {
		return nil, nil, err
	}
	br := bufio.NewReaderSize(f, 1<<20)
	magic, _ := br.Peek(4)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		z, err := gzip.NewReader(br)
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: gzip: %w", path, err)
		}
		return bufio.NewReaderSize(z, 1<<20), func() { z.Close(); f.Close() }, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true))
		if err != nil {
			f.Close()
			return nil, nil, fmt.Errorf("%s: zstd: %w", path, err)
		}
		return bufio.NewReaderSize(z, 1<<20), func() { z.Close(); f.Close() }, nil
	}
	return br, func() { f.Close() }, nil
}
