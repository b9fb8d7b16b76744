package results

import (
	"os"
	"strings"
	"testing"

	"github.com/tailgate-llm/tailgate/slo"
)

func TestSweepRoundTripAndSchema(t *testing.T) {
	t.Parallel()
	d := Dir(t.TempDir())
	want := &Sweep{Schema: SweepSchema, Mode: "closed", Levels: []SweepLevel{{Name: "c4", Concurrency: 4, AchievedPerS: 7.5, Pass: true}},
		SLOMax: &SweepPoint{Level: "c4", Concurrency: 4, AchievedPerS: 7.5}}
	if err := d.WriteSweep(want); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadSweep()
	if err != nil {
		t.Fatal(err)
	}
	if got.Levels[0].Value() != 4 || got.Levels[0].Load() != 7.5 || got.SLOMax.Value() != 4 || got.SLOMax.Rate() != 7.5 {
		t.Errorf("closed loop: level value %g load %g, SLO-max value %g rate %g; want 4, 7.5, 4, 7.5",
			got.Levels[0].Value(), got.Levels[0].Load(), got.SLOMax.Value(), got.SLOMax.Rate())
	}
	os.WriteFile(d.Path(SweepFile), []byte(`{"schema":"tailgate.sweep/v0"}`), 0o644)
	if _, err := d.ReadSweep(); err == nil || !strings.Contains(err.Error(), SweepFile) || !strings.Contains(err.Error(), "tailgate.sweep/v0") {
		t.Errorf("another schema: %v, want an error naming the file and the schema", err)
	}
}

func TestSweepExitPrecedence(t *testing.T) {
	t.Parallel()
	pt := &SweepPoint{Level: "r10", RatePerS: 10}
	for _, c := range []struct {
		name string
		s    Sweep
		want int
	}{
		{"SLO-max found", Sweep{SLOMax: pt}, slo.ExitOK},
		{"none passed", Sweep{}, slo.ExitFailed},
		{"demand past the SLO-max", Sweep{SLOMax: pt, Headroom: &SweepHeadroom{HeadroomPct: -20}}, slo.ExitFailed},
		{"interrupted beats failed", Sweep{Interrupted: true}, slo.ExitInvalid},
		{"interrupted with an SLO-max", Sweep{Interrupted: true, SLOMax: pt}, slo.ExitInvalid},
	} {
		code, why := SweepExit(&c.s)
		if code != c.want {
			t.Errorf("%s: exit %d (%q), want %d", c.name, code, why, c.want)
		}
		if code == slo.ExitInvalid && !strings.Contains(why, "interrupted") {
			t.Errorf("%s: why %q does not say interrupted", c.name, why)
		}
	}
}
