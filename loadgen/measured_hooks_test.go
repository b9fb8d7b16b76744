package loadgen

import (
	"time"

	"github.com/tailgate-llm/tailgate/results/schema"
)

// Measured is what these tests read of the aggregation (package
// loadgen/measure). measure imports loadgen, so only the external test
// package may import it: measured_test.go sets the hooks from there.
type Measured interface {
	Add(r *Record)
	Summary(info Info, meta schema.SummaryMeta) *schema.Summary
	State() (*schema.MetricsState, error)
	Merge(o Measured, shift time.Duration)
	// Counts is the records left out as warm-up and the measured records
	// sent.
	Counts() (warmup, sent int64)
}

// The aggregation's constructors, set by measured_test.go.
var (
	NewMeasured       func() Measured
	MeasuredFromState func(st *schema.MetricsState) (Measured, error)
)
