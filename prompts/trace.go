package prompts

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"time"
)

// traceRow is one request of a production trace.
type traceRow struct {
	line   int
	tsNs   int64 // the trace's own timestamp: absolute (Azure) or from its start
	in     int   // prompt tokens
	out    int   // generated tokens
	hashes []int64
}

// Trace formats (source types).
const (
	SourceAzure    = "azure"
	SourceBurstGPT = "burstgpt"
	SourceMooncake = "mooncake"
)

// csvRows reads a CSV file with a header, finding columns by name
// (case-insensitive, so files that reorder or add columns still read), and
// calls row for each record with a getter for the named columns.
func csvRows(name string, r io.Reader, required []string, row func(line int, get func(col string) (string, *Error)) (stop bool, err *Error)) error {
	cr := csv.NewReader(bufio.NewReaderSize(r, 64<<10))
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	cr.TrimLeadingSpace = true
	csvErr := func(err error) error {
		var pe *csv.ParseError
		if errors.As(err, &pe) {
			return errAt(name, pe.Line, "", "bad CSV: %v", pe.Err)
		}
		return errAt(name, 0, "", "read: %v", err)
	}
	header, err := cr.Read()
	if err == io.EOF {
		return errAt(name, 0, "", "empty file (want a header line)")
	}
	if err != nil {
		return csvErr(err)
	}
	headerLine, _ := cr.FieldPos(0)
	idx := map[string]int{}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if _, dup := idx[h]; !dup {
			idx[h] = i
		}
	}
	for _, c := range required {
		if _, ok := idx[strings.ToLower(c)]; !ok {
			return errAt(name, headerLine, "header", "column %s missing (have %s)", c, clipList(header))
		}
	}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return csvErr(err)
		}
		line, _ := cr.FieldPos(0)
		get := func(col string) (string, *Error) {
			i, ok := idx[strings.ToLower(col)]
			if !ok || i >= len(rec) {
				return "", missingAt(name, line, "column "+col)
			}
			v := strings.TrimSpace(rec[i])
			if v == "" {
				return "", errAt(name, line, "column "+col, "empty")
			}
			return v, nil
		}
		stop, rerr := row(line, get)
		if rerr != nil {
			return rerr
		}
		if stop {
			return nil
		}
	}
}

func clipList(h []string) string {
	s := strings.Join(h, ",")
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	return s
}

// tokenField reads a whole, non-negative token count.
func tokenField(name string, line int, get func(string) (string, *Error), col string) (int, *Error) {
	v, err := get(col)
	if err != nil {
		return 0, err
	}
	n, perr := strconv.ParseInt(v, 10, 64)
	if perr != nil {
		// Some exports write counts as floats ("374.0").
		f, ferr := strconv.ParseFloat(v, 64)
		if ferr != nil || f != math.Trunc(f) || math.Abs(f) > 1e15 {
			return 0, errAt(name, line, "column "+col, "%q is not a whole number", v)
		}
		n = int64(f)
	}
	if n < 0 || n > tokenLimit {
		return 0, errAt(name, line, "column "+col, "%d is out of range [0, %d]", n, tokenLimit)
	}
	return int(n), nil
}

// parseAzureTrace reads the Azure LLM inference trace:
// TIMESTAMP,ContextTokens,GeneratedTokens, timestamps like
// "2023-11-16 18:15:46.6805900" or "2024-05-10 00:00:00.009930+00:00".
func parseAzureTrace(name string, r io.Reader, limit int) ([]traceRow, error) {
	var rows []traceRow
	err := csvRows(name, r, []string{"TIMESTAMP", "ContextTokens", "GeneratedTokens"},
		func(line int, get func(string) (string, *Error)) (bool, *Error) {
			ts, err := get("TIMESTAMP")
			if err != nil {
				return false, err
			}
			ns, ok := parseTimestamp(ts)
			if !ok {
				return false, errAt(name, line, "column TIMESTAMP", "%q is not a time (want e.g. 2023-11-16 18:15:46.6805900)", ts)
			}
			row := traceRow{line: line, tsNs: ns}
			if row.in, err = tokenField(name, line, get, "ContextTokens"); err != nil {
				return false, err
			}
			if row.out, err = tokenField(name, line, get, "GeneratedTokens"); err != nil {
				return false, err
			}
			rows = append(rows, row)
			return limit > 0 && len(rows) >= limit, nil
		})
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, errAt(name, 0, "", "no rows after the header")
	}
	return rows, nil
}

var timeLayouts = []string{
	"2006-01-02 15:04:05Z07:00",
	"2006-01-02 15:04:05",
	"2006-01-02T15:04:05Z07:00",
	"2006-01-02T15:04:05",
}

// parseTimestamp reads a wall-clock time (any number of fraction digits,
// optional UTC offset; no offset means UTC) or plain seconds, as Unix
// nanoseconds.
func parseTimestamp(s string) (int64, bool) {
	for _, l := range timeLayouts {
		if t, err := time.Parse(l, s); err == nil {
			if t.Year() < 1900 || t.Year() > 2200 {
				return 0, false
			}
			return t.UnixNano(), true
		}
	}
	return secondsNs(s)
}

// secondsNs reads a number of seconds as nanoseconds, rounded.
func secondsNs(s string) (int64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.Abs(f) > 4e9 { // 4e9 s ≈ 126 years
		return 0, false
	}
	return int64(math.Round(float64(f * 1e9))), true
}

// parseBurstGPT reads a BurstGPT CSV: Timestamp (seconds), Request tokens,
// Response tokens, and optionally Model (for the model filter). Other
// columns (Session ID, Elapsed time, Total tokens, Log Type) are ignored.
// t0 is the earliest timestamp of all rows read, filtered ones included,
// so classes cut from one file by model stay aligned in time.
func parseBurstGPT(name string, r io.Reader, limit int, model string) (rows []traceRow, filtered int, t0 int64, err error) {
	t0 = math.MaxInt64
	req := []string{"Timestamp", "Request tokens", "Response tokens"}
	if model != "" {
		req = append(req, "Model")
	}
	err = csvRows(name, r, req,
		func(line int, get func(string) (string, *Error)) (bool, *Error) {
			ts, err := get("Timestamp")
			if err != nil {
				return false, err
			}
			ns, ok := secondsNs(ts)
			if !ok {
				return false, errAt(name, line, "column Timestamp", "%q is not a number of seconds", ts)
			}
			row := traceRow{line: line, tsNs: ns}
			t0 = min(t0, ns)
			if row.in, err = tokenField(name, line, get, "Request tokens"); err != nil {
				return false, err
			}
			if row.out, err = tokenField(name, line, get, "Response tokens"); err != nil {
				return false, err
			}
			if model != "" {
				m, err := get("Model")
				if err != nil {
					return false, err
				}
				if m != model {
					filtered++
					return false, nil
				}
			}
			rows = append(rows, row)
			return limit > 0 && len(rows) >= limit, nil
		})
	if err != nil {
		return nil, 0, 0, err
	}
	if len(rows) == 0 {
		return nil, filtered, 0, errAt(name, 0, "", "no rows after the header (model filter %q)", model)
	}
	return rows, filtered, t0, nil
}

// parseMooncake reads a Mooncake trace: JSONL records {"timestamp": ms,
// "input_length": n, "output_length": n, "hash_ids": [...]}.
func parseMooncake(name string, r io.Reader, limit int) ([]traceRow, error) {
	rows, _, err := readMooncake(name, r, limit, 0)
	return rows, err
}

// readMooncake is parseMooncake that, with stopNs > 0, stops at the first
// row stopNs or more after the first row's timestamp (that row not kept):
// a run that needs only the trace's start reads only it. read is the
// length of the lines consumed, the whole file's when it read to the end
// (-1 then): what the trace's identity hashes.
func readMooncake(name string, r io.Reader, limit int, stopNs int64) (rows []traceRow, read int64, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var first int64
	for line := 1; ; line++ {
		b, rerr := br.ReadBytes('\n')
		if rerr != nil && rerr != io.EOF {
			return nil, 0, errAt(name, line, "", "read: %v", rerr)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			row, perr := parseMooncakeLine(name, line, t)
			if perr != nil {
				return nil, 0, perr
			}
			if len(rows) == 0 {
				first = row.tsNs
			} else if stopNs > 0 && row.tsNs-first >= stopNs {
				return rows, read, nil
			}
			rows = append(rows, row)
			if limit > 0 && len(rows) >= limit {
				break
			}
		}
		read += int64(len(b))
		if rerr == io.EOF {
			break
		}
	}
	if len(rows) == 0 {
		return nil, 0, errAt(name, 0, "", "no records in file")
	}
	return rows, -1, nil
}

func parseMooncakeLine(name string, line int, b []byte) (traceRow, *Error) {
	obj, err := jsonObject(name, line, b)
	if err != nil {
		return traceRow{}, err
	}
	row := traceRow{line: line}
	ts, ok := obj["timestamp"]
	if !ok {
		return row, missingAt(name, line, "timestamp")
	}
	var ms float64
	if jerr := json.Unmarshal(ts, &ms); jerr != nil || math.Abs(ms) > 4e12 {
		return row, errAt(name, line, "timestamp", "want milliseconds, got %s", clip(ts))
	}
	row.tsNs = int64(math.Round(float64(ms * 1e6)))
	for _, f := range []struct {
		key string
		dst *int
	}{{"input_length", &row.in}, {"output_length", &row.out}} {
		v, ok := obj[f.key]
		if !ok {
			return row, missingAt(name, line, f.key)
		}
		n, msg := wholeJSON(v)
		if msg != "" {
			return row, errAt(name, line, f.key, "%s", msg)
		}
		*f.dst = n
	}
	if h, ok := obj["hash_ids"]; ok && string(h) != "null" {
		if jerr := json.Unmarshal(h, &row.hashes); jerr != nil {
			return row, errAt(name, line, "hash_ids", "want a list of whole numbers, got %s", clip(h))
		}
	}
	return row, nil
}
