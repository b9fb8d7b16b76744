package results

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// WriteJSON writes v as indented JSON to path atomically (a temporary file
// renamed into place), so a reader never sees half a summary.
func WriteJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return &WriteError{Path: path, Err: fmt.Errorf("encode: %w", err)}
	}
	b = append(b, '\n')
	if err := atomicfile.Write(path, b); err != nil {
		return &WriteError{Path: path, Err: err}
	}
	return nil
}

// JSONLWriter appends one JSON value per line. Write makes each line one
// write, so a process that dies loses at most the line in flight; Append
// holds lines until Drain writes them at once. After the first
// failed write it stops writing and keeps the error; the caller reports it
// at the end rather than aborting the run.
type JSONLWriter struct {
	path string
	f    *os.File
	buf  bytes.Buffer
	enc  *json.Encoder
	err  error
	// Lines counts the lines handed to the file; pending those buffered.
	Lines   int64
	pending int64
}

// CreateJSONL creates (truncates) path.
func CreateJSONL(path string) (*JSONLWriter, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|os.O_APPEND, 0o644)
	if err != nil {
		return nil, &WriteError{Path: path, Err: err}
	}
	w := &JSONLWriter{path: path, f: f}
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w, nil
}

// Write appends v in one write of its own.
func (w *JSONLWriter) Write(v any) error {
	if err := w.Append(v); err != nil {
		return err
	}
	return w.Drain()
}

// Append buffers v's line until Drain or Close write it (the caller
// bounds how many it lets wait).
func (w *JSONLWriter) Append(v any) error {
	if w.err != nil {
		return w.err
	}
	if err := w.enc.Encode(v); err != nil {
		// The lines before it are whole: they still go to the file.
		line := w.Lines + w.pending + 1
		if derr := w.Drain(); derr != nil {
			return derr
		}
		w.err = &WriteError{Path: w.path, Err: fmt.Errorf("line %d: encode: %w", line, err)}
		return w.err
	}
	w.pending++
	return nil
}

// Drain hands the buffered lines to the file in one write.
func (w *JSONLWriter) Drain() error {
	if w.err != nil || w.buf.Len() == 0 {
		return w.err
	}
	_, err := w.f.Write(w.buf.Bytes())
	w.buf.Reset()
	if err != nil {
		// The first line that may not have reached the file.
		w.err = &WriteError{Path: w.path, Err: fmt.Errorf("line %d: write: %w", w.Lines+1, err)}
		return w.err
	}
	w.Lines += w.pending
	w.pending = 0
	return nil
}

// Path is the file written.
func (w *JSONLWriter) Path() string { return w.path }

// Err is the first write error, if any.
func (w *JSONLWriter) Err() error { return w.err }

// Close writes what is buffered, syncs and closes the file.
func (w *JSONLWriter) Close() error {
	w.Drain()
	serr := w.f.Sync()
	cerr := w.f.Close()
	if w.err != nil {
		return w.err
	}
	if serr != nil {
		return &WriteError{Path: w.path, Err: fmt.Errorf("sync: %w", serr)}
	}
	if cerr != nil {
		return &WriteError{Path: w.path, Err: cerr}
	}
	return nil
}

// HlogWriter writes HdrHistogram interval logs (format 1.3), readable by
// HdrHistogram's HistogramLogProcessor and hdrhistogram-go's log reader.
// Values are microseconds, so the interval-max column (which the format
// scales by 1e6, ns→ms) reads in seconds.
type HlogWriter struct {
	path string
	w    io.Writer
	f    *os.File // set by CreateHlog
	lw   *hdrhistogram.HistogramLogWriter
	err  error
}

// NewHlogWriter writes the log header to w with start as the log's start
// time; interval timestamps are absolute.
func NewHlogWriter(path string, w io.Writer, start time.Time) (*HlogWriter, error) {
	h := &HlogWriter{path: path, w: w, lw: hdrhistogram.NewHistogramLogWriter(w)}
	ms := start.UnixMilli()
	for _, f := range []func() error{
		h.lw.OutputLogFormatVersion,
		func() error { return h.lw.OutputComment("[tailgate: values in microseconds; tags name the metric]") },
		func() error { return h.lw.OutputStartTime(ms) },
		func() error { return h.lw.OutputBaseTime(0) },
		h.lw.OutputLegend,
	} {
		if err := f(); err != nil {
			return nil, &WriteError{Path: path, Err: err}
		}
	}
	return h, nil
}

// WriteInterval writes each histogram as one interval [from, to).
func (h *HlogWriter) WriteInterval(hists []*hdrhistogram.Histogram, from, to time.Time) error {
	if h.err != nil {
		return h.err
	}
	for _, hist := range hists {
		hist.SetStartTimeMs(from.UnixMilli())
		hist.SetEndTimeMs(to.UnixMilli())
		if err := h.writeInterval(hist); err != nil {
			h.err = &WriteError{Path: h.path, Err: err}
			return h.err
		}
	}
	return nil
}

// badTag is the library's test of an interval tag.
var badTag = regexp.MustCompile(`.[, \r\n].`)

// writeInterval writes one interval line as hdrhistogram's
// OutputIntervalHistogram does (its base time is 0 here; TestHlogLineAsTheLibrary
// holds the two to the same bytes), the histogram encoded by
// schema.EncodeHistogram, whose compressor is reused: the library's makes
// a new one per histogram, each second, for every metric.
func (h *HlogWriter) writeInterval(hist *hdrhistogram.Histogram) error {
	tag := ""
	if t := hist.Tag(); t != "" {
		if badTag.MatchString(t) {
			return fmt.Errorf("tag string cannot contain commas, spaces, or line breaks. used tag: %s", t)
		}
		tag = "Tag=" + t + ","
	}
	payload, err := schema.EncodeHistogram(hist)
	if err != nil {
		return err
	}
	start := float64(hist.StartTimeMs()) / 1000
	end := float64(hist.EndTimeMs()) / 1000
	_, err = fmt.Fprintf(h.w, "%s%f,%f,%f,%s\n", tag, start, end-start, float64(hist.Max())/hdrhistogram.MsToNsRatio, payload)
	return err
}

// WriteHistogram writes one interval histogram as it is: its tag and its
// own start and end times (a merge of several logs).
func (h *HlogWriter) WriteHistogram(hist *hdrhistogram.Histogram) error {
	if h.err != nil {
		return h.err
	}
	if err := h.lw.OutputIntervalHistogram(hist); err != nil {
		h.err = &WriteError{Path: h.path, Err: err}
	}
	return h.err
}

// CreateHlog creates (truncates) path and writes the log header.
func CreateHlog(path string, start time.Time) (*HlogWriter, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, &WriteError{Path: path, Err: err}
	}
	h, err := NewHlogWriter(path, f, start)
	if err != nil {
		f.Close()
		return nil, err
	}
	h.f = f
	return h, nil
}

// Close syncs and closes a file made by CreateHlog; it returns the first
// write error, if any.
func (h *HlogWriter) Close() error {
	if h.f == nil {
		return h.err
	}
	serr := h.f.Sync()
	cerr := h.f.Close()
	switch {
	case h.err != nil:
		return h.err
	case serr != nil:
		return &WriteError{Path: h.path, Err: fmt.Errorf("sync: %w", serr)}
	case cerr != nil:
		return &WriteError{Path: h.path, Err: cerr}
	}
	return nil
}
