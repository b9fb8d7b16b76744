package results

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/tailgate-llm/tailgate/loadgen"
)

// ReadStats says what a read of requests.jsonl found besides the records.
type ReadStats struct {
	Records int64
	// TornTail is set when the last line was cut short (no newline, not
	// valid JSON): what a killed run or a full disk leaves. The rest was
	// read; the torn line is not a record.
	TornTail bool
	TornLine int64 // its line number
}

// ReadRecords streams path's records to fn, one at a time, in file order;
// memory stays flat however long the run. A line that does not parse is an
// error naming file and line, except a torn last line (see ReadStats). An
// error from fn stops the read and is returned. fn must not keep the
// record: the next line is decoded into it.
func ReadRecords(path string, fn func(*loadgen.Record) error) (ReadStats, error) {
	var st ReadStats
	f, err := os.Open(path)
	if err != nil {
		return st, err
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	var line int64
	var rec loadgen.Record
	for {
		b, rerr := br.ReadBytes('\n')
		if len(b) > 0 {
			line++
			complete := b[len(b)-1] == '\n'
			b = bytes.TrimSpace(b)
			if len(b) > 0 {
				if err := json.Unmarshal(b, &rec); err != nil {
					if !complete && errors.Is(rerr, io.EOF) {
						st.TornTail, st.TornLine = true, line
						return st, nil
					}
					return st, fmt.Errorf("%s:%d: %v", path, line, err)
				}
				st.Records++
				if err := fn(&rec); err != nil {
					return st, err
				}
			}
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return st, nil
			}
			return st, fmt.Errorf("%s: %w", path, rerr)
		}
	}
}

// RecordsWriter appends records to requests.jsonl as they arrive.
type RecordsWriter = JSONLWriter

// CreateRecords creates (truncates) a requests.jsonl.
func CreateRecords(path string) (*RecordsWriter, error) { return CreateJSONL(path) }
