// Package yamlwalk reads YAML input files (mixes, SLOs, plans) through
// go.yaml.in/yaml/v3 nodes and reports every problem located by file, line
// and field path: "mix.yaml:12: classes[2].weight: must not be negative".
package yamlwalk

import (
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// ErrMissing is the cause of an Error for a required field that is absent;
// such errors read "file:line: field missing".
var ErrMissing = errors.New("missing")

// Error is one problem in an input file, located by file, line and field.
type Error struct {
	File  string
	Line  int    // 1-based; 0 when the problem is the whole file
	Field string // e.g. "classes[2].weight"; may be empty
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
		if errors.Is(e.Err, ErrMissing) {
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

// Errorf builds an *Error.
func Errorf(file string, line int, field, format string, args ...any) *Error {
	return &Error{File: file, Line: line, Field: field, Err: fmt.Errorf(format, args...)}
}

// Pos is a place in a file: where a value was read, for an error found
// after the walk.
type Pos struct {
	File  string
	Line  int
	Field string
}

// Errorf builds an *Error at p.
func (p Pos) Errorf(format string, args ...any) *Error {
	return Errorf(p.File, p.Line, p.Field, format, args...)
}

// Errors is every problem found in one file, sorted by line.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As and errors.Is find the individual errors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortByLine orders es by line, keeping the order of errors on one line.
func (es Errors) sortByLine() {
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
}

// Sort orders es by line, keeping the order of errors on one line.
func (es Errors) Sort() { es.sortByLine() }
