package prompts

import (
	"errors"
	"fmt"
	"strconv"
)

// ErrMissing is the cause of an Error for a required field, column or key
// that is absent; such errors read "file:line: field missing".
var ErrMissing = errors.New("missing")

// Error is a problem in an input file, located by file, line and field.
// Every error LoadMix and LoadPromptsFile return for bad input is an
// *Error (use errors.As), and it is returned before any prompt is drawn.
//
// It reads "mix.yaml:12: classes[2].weight: must not be negative",
// "trace.csv:57: column GeneratedTokens missing" or
// "prompts.jsonl:3: not JSON: ...".
type Error struct {
	File  string // the file as named by the caller or the mix file
	Line  int    // 1-based; 0 when the problem is the whole file
	Field string // e.g. "classes[2].weight", "column GeneratedTokens", "messages[0].role"; may be empty
	Err   error
}

func (e *Error) Error() string {
	b := make([]byte, 0, 64)
	b = append(b, e.File...)
	if e.Line > 0 {
		b = append(b, ':')
		b = strconv.AppendInt(b, int64(e.Line), 10)
	}
	b = append(b, ": "...)
	if e.Field != "" {
		b = append(b, e.Field...)
		if errors.Is(e.Err, ErrMissing) && e.Err.Error() == ErrMissing.Error() {
			return string(append(b, " missing"...))
		}
		b = append(b, ": "...)
	}
	if e.Err != nil {
		b = append(b, e.Err.Error()...)
	}
	return string(b)
}

func (e *Error) Unwrap() error { return e.Err }

// errAt builds an *Error.
func errAt(file string, line int, field string, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

// missingAt builds the "field missing" error.
func missingAt(file string, line int, field string) *Error {
	return &Error{File: file, Line: line, Field: field, Err: ErrMissing}
}
