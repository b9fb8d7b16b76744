package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/tailgate-llm/tailgate/exporters/prom"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// pushgateway records the pushes it gets.
type pushgateway struct {
	mu     sync.Mutex
	paths  []string
	bodies [][]byte
	header http.Header
	status int
}

func startPushgateway(t *testing.T, status int) (*pushgateway, string) {
	pg := &pushgateway{status: status}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		pg.mu.Lock()
		pg.paths = append(pg.paths, r.Method+" "+r.URL.Path)
		pg.bodies = append(pg.bodies, b)
		pg.header = r.Header.Clone()
		pg.mu.Unlock()
		w.WriteHeader(pg.status)
	}))
	t.Cleanup(srv.Close)
	return pg, srv.URL
}

// families decodes the last push body.
func (pg *pushgateway) families(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	pg.mu.Lock()
	defer pg.mu.Unlock()
	if len(pg.bodies) != 1 {
		t.Fatalf("%d pushes (%v), want 1", len(pg.bodies), pg.paths)
	}
	dec := expfmt.NewDecoder(bytes.NewReader(pg.bodies[0]), expfmt.ResponseFormat(pg.header))
	out := map[string]*dto.MetricFamily{}
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
			return out
		}
		out[mf.GetName()] = &mf
	}
}

func sumOf(mf *dto.MetricFamily, label, value string) float64 {
	var s float64
	for _, m := range mf.GetMetric() {
		match := label == ""
		for _, l := range m.Label {
			match = match || (l.GetName() == label && l.GetValue() == value)
		}
		if match {
			s += m.GetCounter().GetValue()
		}
	}
	return s
}

// run --push: the final metrics reach the Pushgateway under the canary's
// names, job tailgate, the target in the grouping key, and agree with
// summary.json.
func TestRunPush(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 5}}
	srv := simtest.Start(t, cfg)
	pg, url := startPushgateway(t, http.StatusOK)
	dir := t.TempDir()
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte(checkSLO), 0o644)
	code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "50", "--arrival", "constant",
		"--duration", "1s", "--max-tokens", "4", "--out", dir, "--max-error-rate", "1", "--slo", sloFile, "--push", url)
	if code != slo.ExitFailed && code != slo.ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "pushed metrics to "+url) {
		t.Errorf("no push line:\n%s", stderr)
	}
	host := strings.TrimPrefix(srv.URL, "http://")
	if p := pg.paths[0]; p != "PUT /metrics/job/tailgate/target/"+host {
		t.Errorf("pushed to %s", p)
	}
	s := readSummary(t, dir)
	f := pg.families(t)
	if v := sumOf(f[prom.RequestsTotal], "outcome", "ok"); v != float64(s.Requests.OK) || v == 0 {
		t.Errorf("pushed ok requests %v, summary %d", v, s.Requests.OK)
	}
	if v := sumOf(f[prom.RequestErrorsTotal], "kind", "server_error"); v != float64(s.Requests.ErrorsByKind["server_error"]) || v == 0 {
		t.Errorf("pushed server errors %v, summary %v", v, s.Requests.ErrorsByKind)
	}
	// SLI events follow acceptance's rules: the error_rate verdict's counts.
	for _, v := range s.SLO.Verdicts {
		if v.Objective != "errors" {
			continue
		}
		ev := f[prom.SLOEventsTotal]
		good := 0.0
		bad := 0.0
		for _, m := range ev.GetMetric() {
			obj, out := "", ""
			for _, l := range m.Label {
				switch l.GetName() {
				case "objective":
					obj = l.GetValue()
				case "outcome":
					out = l.GetValue()
				}
			}
			if obj == "errors" && out == "good" {
				good += m.GetCounter().GetValue()
			}
			if obj == "errors" && out == "bad" {
				bad += m.GetCounter().GetValue()
			}
		}
		if good != float64(v.Good) || good+bad != float64(v.Total) {
			t.Errorf("pushed errors events %v good of %v; verdict %d of %d", good, good+bad, v.Good, v.Total)
		}
	}
	for _, mf := range f {
		for _, m := range mf.GetMetric() {
			for _, l := range m.Label {
				if l.GetName() == "target" {
					t.Fatalf("%s carries a target label", mf.GetName())
				}
			}
		}
	}
}

// A Pushgateway that refuses the push makes the run exit 3; a bad --push
// URL is a usage error.
func TestRunPushErrors(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	_, url := startPushgateway(t, http.StatusBadRequest)
	code, _, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "300ms",
		"--max-tokens", "2", "--push", url, "--push-target", "pool-a")
	if code != slo.ExitInvalid || !strings.Contains(stderr, "push to "+url) {
		t.Errorf("refused push: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "300ms", "--push", "gateway:9091")
	if code != slo.ExitUsage || !strings.Contains(stderr, "--push") {
		t.Errorf("bad --push URL: exit %d\n%s", code, stderr)
	}
}

// validate --push: every stage's records reach one push at the end.
func TestValidatePush(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.DefaultConfig())
	pg, url := startPushgateway(t, http.StatusOK)
	plan := writePlan(t, srv.URL, "1s", false)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := tgCmd("validate", "--plan", plan, "--out", out, "--push", url, "--push-target", "pool-a", "--self-check", "warn")
	if code != slo.ExitOK && code != slo.ExitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	if p := pg.paths[0]; p != "PUT /metrics/job/tailgate/target/pool-a" {
		t.Errorf("pushed to %s", p)
	}
	f := pg.families(t)
	// Two stages of 2s at 5/s and 10/s: about 30 requests in all.
	if v := sumOf(f[prom.RequestsTotal], "", ""); v < 20 {
		t.Errorf("pushed %v requests for both stages", v)
	}
	if f[prom.SLOEventsTotal] == nil || f[prom.TTFTSeconds] == nil {
		t.Errorf("push lacks SLO events or TTFT: %v", f)
	}
}
