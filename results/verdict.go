package results

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/tailgate-llm/tailgate/slo"
)

// ReadReport reads d's verdict.json (os.ErrNotExist when there is none).
func (d Dir) ReadReport() (*slo.Report, error) {
	p := d.Path(VerdictFile)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	var r slo.Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return &r, nil
}

// ReadManual reads the manual stage results recorded in d (none: nil).
func (d Dir) ReadManual() ([]slo.ManualRecord, error) {
	p := d.Path(ManualFile)
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m []slo.ManualRecord
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

// WriteManual replaces d's manual.json.
func (d Dir) WriteManual(m []slo.ManualRecord) error { return WriteJSON(d.Path(ManualFile), m) }
