package exporters

import (
	"os"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/slo"
)

// WriteVerdicts writes a report into d as verdict.json and junit.xml.
// Failures are *results.WriteError.
func WriteVerdicts(d results.Dir, r *slo.Report) error {
	if err := d.Create(); err != nil {
		return err
	}
	if err := results.WriteJSON(d.Path(results.VerdictFile), r); err != nil {
		return err
	}
	p := d.Path(results.JUnitFile)
	f, err := os.Create(p)
	if err != nil {
		return &results.WriteError{Path: p, Err: err}
	}
	if err := WriteJUnit(f, r); err != nil {
		f.Close()
		return &results.WriteError{Path: p, Err: err}
	}
	if err := f.Close(); err != nil {
		return &results.WriteError{Path: p, Err: err}
	}
	return nil
}
