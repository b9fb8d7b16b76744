package loadgen_test

import (
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/results/schema"
)

// measured is measure.Metrics as the package's own tests read it
// (measured_hooks_test.go).
type measured struct{ *measure.Metrics }

func (m measured) Merge(o loadgen.Measured, shift time.Duration) {
	m.Metrics.Merge(o.(measured).Metrics, shift)
}

func (m measured) Counts() (warmup, sent int64) { return m.Warmup, m.All.Sent }

func init() {
	loadgen.NewMeasured = func() loadgen.Measured { return measured{measure.NewMetrics()} }
	loadgen.MeasuredFromState = func(st *schema.MetricsState) (loadgen.Measured, error) {
		m, err := measure.MetricsFromState(st)
		if err != nil {
			return nil, err
		}
		return measured{m}, nil
	}
}
