package slo

import (
	"strconv"
	"strings"
)

// Error is one problem in an SLO or plan file: which file, line and field.
// Error() reads like `slo.yaml:12: objectives[1].threshold: "5O0ms" is not a
// duration`.
type Error struct {
	File  string
	Line  int    // 1-based; 0 when unknown
	Field string // path of the field, e.g. objectives[1].threshold; "" for the document
	Msg   string
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteByte(':')
		b.WriteString(strconv.Itoa(e.Line))
	}
	if e.Field != "" {
		b.WriteString(": ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// Errors is every problem found in one file, in file order.
type Errors []*Error

func (es Errors) Error() string {
	s := make([]string, len(es))
	for i, e := range es {
		s[i] = e.Error()
	}
	return strings.Join(s, "\n")
}

// Unwrap lets errors.As find the individual errors.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}
