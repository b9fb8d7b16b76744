package prompts

import (
	"github.com/tailgate-llm/tailgate/internal/yamlwalk"
)

// ErrMissing is the cause of an Error for a required field, column or key
// that is absent; such errors read "file:line: field missing".
var ErrMissing = yamlwalk.ErrMissing

// Error is a problem in an input file, located by file, line and field.
// Every error LoadMix and LoadPromptsFile return for bad input is an
// *Error or, for a mix file, Errors listing every problem in it (errors.As
// finds an *Error in either), and it is returned before any prompt is
// drawn.
//
// It reads "mix.yaml:12: classes[2].weight: must not be negative",
// "trace.csv:57: column GeneratedTokens missing" or
// "prompts.jsonl:3: not JSON: ...". It is the one located error of
// tailgate's input files, shared with the slo package.
type Error = yamlwalk.Error

// Errors is every problem LoadMix found in a mix file, sorted by line, one
// *Error each: errors.As gets the Errors, or the first *Error.
type Errors = yamlwalk.Errors

// errAt builds an *Error.
func errAt(file string, line int, field string, format string, args ...any) *Error {
	return yamlwalk.Errorf(file, line, field, format, args...)
}

// missingAt builds the "field missing" error.
func missingAt(file string, line int, field string) *Error {
	return &Error{File: file, Line: line, Field: field, Err: ErrMissing}
}
