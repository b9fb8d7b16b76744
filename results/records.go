package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
}

// ReadRecords streams path's records to fn, one at a time, in file order,
// in every form a run writes: full or compact, plain, gzip or zstd (told
// by the first bytes; a missing requests.jsonl is looked for as .zst and
// .gz);
// memory stays flat however long the run. A line that does not parse is an
// error naming file and line, except a torn last line (see ReadStats). An
// error from fn stops the read and is returned. fn must not keep the
// record: the next line is decoded into it.
func ReadRecords(path string, fn func(*loadgen.Record) error) (ReadStats, error) {
	var st ReadStats
	r, closeFn, err := openRecords(path)
	if err != nil {
		return st, err
	}
	defer closeFn()
	br := bufio.NewReaderSize(r, 1<<16)
	var line int64
	var rec loadgen.Record
	for {
		b, rerr := br.ReadBytes('\n')
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
