package slo

import "github.com/tailgate-llm/tailgate/internal/yamlwalk"

// Error is one problem in an SLO or plan file: which file, line and field.
// Error() reads like `slo.yaml:12: objectives[1].threshold: "5O0ms" is not a
// duration`. It is the one located error of tailgate's input files, shared
// with the prompts package.
type Error = yamlwalk.Error

// Errors is every problem found in one file, sorted by line; errors.As
// finds the individual errors.
type Errors = yamlwalk.Errors
