//go:build timing && !race

package report

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On a quiet machine the simulator's capacity model decides the outcome:
// the peak stage, past capacity, shows metric theater, and the sweep's
// lower levels meet the SLO, so the report has a headroom against the
// current rate. A loaded machine can slow the simulator enough to change
// both, which is why TestReportOfARunAndASweep only follows the files.
func TestReportSectionsOfASaturatedRun(t *testing.T) {
	run, sw := runDir(t), sweepDir(t)
	out := t.TempDir()
	for _, c := range []struct {
		name, dir, want string
	}{
		{"run", run, "Metric theater:"},
		{"sweep", sw, "Headroom:"},
	} {
		path := filepath.Join(out, c.name+".html")
		if err := Write(path, FormatHTML, []string{c.dir}, Options{Version: "test"}); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), c.want) {
			t.Errorf("the %s report lacks %q", c.name, c.want)
		}
	}
}
