package results

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// ReadStats says what a read of requests.jsonl found besides the records.
type ReadStats struct {
	Records int64
	// TornTail is set when the last line was cut short (no newline, not
	// valid JSON): what a killed run or a full disk leaves. The rest was
	// read; the torn line is not a record.
	TornTail bool
	TornLine int64  // its line number
	TornPath string // its file
	// Files are, per file read, its records and the SHA-256 of its
	// uncompressed bytes (torn tail included), to hold against the
	// summary's RecordsDigest.
	Files []FileDigest
}

// FileDigest is what one records file held.
type FileDigest struct {
	Path string
	RecordsDigest
}

// ReadRecords streams path's records to fn, one at a time, in file order,
// in every form a run writes: full or compact, plain, gzip or zstd (told
// by the first bytes; a missing requests.jsonl is looked for as .zst and
// .gz);
// memory stays flat however long the run. A line that does not parse is an
// error naming file and line, except a torn last line (see ReadStats). An
// error from fn stops the read and is returned. fn must not keep the
// record: the next line is decoded into it.
func ReadRecords(path string, fn func(*loadgen.Record) error) (st ReadStats, err error) {
	r, closeFn, err := openRecords(path)
	if err != nil {
		return st, err
	}
	defer closeFn()
	sum := sha256.New()
	defer func() {
		st.Files = []FileDigest{{Path: path, RecordsDigest: RecordsDigest{Count: st.Records, SHA256: hex.EncodeToString(sum.Sum(nil))}}}
	}()
	br := bufio.NewReaderSize(r, 1<<16)
	var line int64
	var rec loadgen.Record
	for {
		b, rerr := br.ReadBytes('\n')
		sum.Write(b)
		// A compressed file cut short (killed, disk full) ends in a
		// truncated block: its last line is torn as a plain file's is.
		cut := errors.Is(rerr, io.ErrUnexpectedEOF)
		if len(b) > 0 {
			line++
			complete := b[len(b)-1] == '\n'
			b = bytes.TrimSpace(b)
			if len(b) > 0 {
				if err := json.Unmarshal(b, &rec); err != nil {
					if !complete && (errors.Is(rerr, io.EOF) || cut) {
						st.TornTail, st.TornLine, st.TornPath = true, line, path
						return st, nil
					}
					return st, fmt.Errorf("%s:%d: %w", path, line, err)
				}
				st.Records++
				if err := fn(&rec); err != nil {
					return st, err
				}
			}
		}
		if rerr != nil {
			switch {
			case errors.Is(rerr, io.EOF):
				return st, nil
			case cut:
				st.TornTail, st.TornLine, st.TornPath = true, line+1, path
				return st, nil
			}
			return st, fmt.Errorf("%s: line %d: %w", path, line+1, rerr)
		}
	}
}

// RecordsWriter appends records to requests.jsonl as they arrive.
type RecordsWriter = JSONLWriter

// CreateRecords creates (truncates) a requests.jsonl.
func CreateRecords(path string) (*RecordsWriter, error) { return CreateJSONL(path) }

// RecordsDisagree says how the records read from one file (fd, from
// ReadStats.Files) disagree with the summary.json beside it: a count or
// checksum other than the one the run wrote, which an emptied, torn or
// replaced file shows. It is "" when they agree or when there is nothing
// to hold them against (no summary: the run was cut short, said apart). A
// summary written before it kept the records' digest is held to its
// request count, when it has one (every request sent or dropped has one
// record).
func RecordsDisagree(fd FileDigest) string {
	d := Dir(filepath.Dir(fd.Path))
	s, err := d.ReadSummary()
	if err != nil {
		return ""
	}
	if w := s.Records; w != nil {
		switch {
		case w.Count != fd.Count:
			return fmt.Sprintf("%s holds %d records, but %s says %d were written: the file was emptied, torn or replaced after the run",
				fd.Path, fd.Count, d.Path(SummaryFile), w.Count)
		case w.SHA256 != "" && w.SHA256 != fd.SHA256:
			return fmt.Sprintf("%s holds the %d records %s says were written, but their sha256 is %s, not %s: the file was changed after the run",
				fd.Path, fd.Count, d.Path(SummaryFile), fd.SHA256, w.SHA256)
		}
		return ""
	}
	// A summary with no request count (hand-made, or cut before its
	// counts) has nothing to say about the file.
	if want := s.Requests.Sent + s.Requests.Dropped; want > 0 && want != fd.Count {
		return fmt.Sprintf("%s holds %d records, but %s counts %d requests (sent and dropped, one record each): the file was emptied, torn or replaced after the run",
			fd.Path, fd.Count, d.Path(SummaryFile), want)
	}
	return ""
}
