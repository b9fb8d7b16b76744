package slo

import (
	"path/filepath"
	"testing"
)

// The example files shipped in testdata/ must load.
func TestShippedExamples(t *testing.T) {
	t.Parallel()
	plans, _ := filepath.Glob("../testdata/plans/*.yaml")
	if len(plans) == 0 {
		t.Skip("no example plans")
	}
	for _, p := range plans {
		pl, err := LoadPlan(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if len(pl.SLO.Warnings) > 0 {
			t.Errorf("%s: warnings %v", p, pl.SLO.Warnings)
		}
	}
	specs, _ := filepath.Glob("../testdata/slo/*.yaml")
	for _, s := range specs {
		if _, err := LoadSpec(s); err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
}
