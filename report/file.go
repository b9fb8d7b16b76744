package report

import (
	"bytes"
	"fmt"

	"github.com/tailgate-llm/tailgate/internal/atomicfile"
	"github.com/tailgate-llm/tailgate/results"
)

// Formats of a report.
const (
	FormatHTML     = "html"
	FormatMarkdown = "md"
)

// Write reads dirs and writes their report to path atomically, in format
// (FormatHTML or FormatMarkdown). A failure to write is a
// *results.WriteError.
func Write(path, format string, dirs []string, opt Options) error {
	var srcs []*Source
	for _, d := range dirs {
		s, err := Read(d)
		if err != nil {
			return err
		}
		srcs = append(srcs, s)
	}
	var b bytes.Buffer
	var err error
	switch format {
	case FormatHTML, "":
		err = WriteHTML(&b, srcs, opt)
	case FormatMarkdown:
		err = WriteMarkdown(&b, srcs, opt)
	default:
		return fmt.Errorf("report format %q: want html or md", format)
	}
	if err != nil {
		return err
	}
	if err := atomicfile.Write(path, b.Bytes()); err != nil {
		return &results.WriteError{Path: path, Err: err}
	}
	return nil
}
