package telemetry

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// DCGM 4.6 renamed GR_ENGINE_ACTIVE, POWER_USAGE and GPU_TEMP; with
// --use-old-namespace dcgm-exporter writes dcgm_* names and a lowercase
// uuid label. Both read as the classic names do.
func TestParseDCGMNewAndOldNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		file  string
		total float64 // MiB: used + free (+ reserved)
	}{{"dcgm-4.6.prom", 123000 + 20000 + 768}, {"dcgm-old-namespace.prom", 123000 + 20000}} {
		s := parseFile(t, tc.file)
		if s.Family != FamilyDCGM || len(s.GPUs) != 2 {
			t.Fatalf("%s: family %q, gpus %+v", tc.file, s.Family, s.GPUs)
		}
		g := s.GPUs[0]
		if g.UUID != "GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52" || g.GPU != "0" || g.Model != "NVIDIA H200" {
			t.Errorf("%s: gpu %+v", tc.file, g)
		}
		wantVal(t, tc.file+" utilization", g.Utilization, 0.85)
		wantVal(t, tc.file+" engine active", g.EngineActive, 0.78)
		wantVal(t, tc.file+" power", g.PowerWatts, 612.5)
		wantVal(t, tc.file+" temperature", g.TemperatureC, 61)
		wantVal(t, tc.file+" fb used", g.MemoryUsedBytes, 123000*(1<<20))
		wantVal(t, tc.file+" fb total", g.MemoryTotalBytes, tc.total*(1<<20))
	}
}

// A dcgm-exporter that answers without any field tailgate reads is said
// once, in the source's note and the errors, not silently ignored.
func TestDCGMWithNoKnownField(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(fixtures(t, "dcgm-no-known-field.prom"))
	defer srv.Close()
	r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: srv.URL}}, Interval: time.Hour}, nil)
	r.Snapshot()
	r.Snapshot()
	sum := r.Stop()
	if sum.Sources[0].Note != NoteNoDCGMField || sum.ScrapeErrors != 0 {
		t.Errorf("source %+v, scrape errors %d", sum.Sources[0], sum.ScrapeErrors)
	}
	n := 0
	for _, e := range sum.Errors {
		if strings.Contains(e, "no GPU field tailgate reads") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("errors %q: want the note once", sum.Errors)
	}
}

// Tensor pipe and DRAM activity, XID errors and clock event reasons, under
// the classic and the DCGM 4.6 names.
func TestDCGMCapacityFields(t *testing.T) {
	t.Parallel()
	for _, file := range []string{"dcgm-capacity.prom", "dcgm-4.6.prom"} {
		srv := httptest.NewServer(fixtures(t, file))
		r := Start(context.Background(), Config{Scrapes: []ScrapeConfig{{URL: srv.URL}}, Interval: time.Hour}, nil)
		r.Snapshot()
		sum := r.Stop()
		srv.Close()
		if len(sum.GPUs) != 2 {
			t.Fatalf("%s: gpus %+v", file, sum.GPUs)
		}
		g0, g1 := sum.GPUs[0], sum.GPUs[1]
		if g0.TensorActive == nil || !near(g0.TensorActive.Mean, 0.42) || g1.DRAMActive == nil || !near(g1.DRAMActive.Mean, 0.7) {
			t.Errorf("%s: tensor %+v dram %+v", file, g0.TensorActive, g1.DRAMActive)
		}
		if len(g0.XIDErrors) != 0 || len(g1.XIDErrors) != 1 || g1.XIDErrors[0] != 79 {
			t.Errorf("%s: xid %v %v", file, g0.XIDErrors, g1.XIDErrors)
		}
		// 5 = GPU idle (left out) | SW power cap; 64 = HW thermal slowdown.
		if strings.Join(g0.ClockEventReasons, ",") != "sw_power_cap" || strings.Join(g1.ClockEventReasons, ",") != "hw_thermal_slowdown" {
			t.Errorf("%s: clock reasons %v %v", file, g0.ClockEventReasons, g1.ClockEventReasons)
		}
	}
}
