package main

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/tailgate-llm/tailgate/exporters/otlp"
	"github.com/tailgate-llm/tailgate/internal/collectortest"
	"github.com/tailgate-llm/tailgate/internal/syncbuf"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// collector is an OpenTelemetry Collector assembled from the Collector's
// own modules on loopback (OTLP receiver, service pipeline, an
// in-process exporter), its exporter feeding a sink the test reads.
type collector struct {
	sink     *consumertest.MetricsSink
	endpoint string // what --otlp-endpoint takes
}

func freeAddr(t *testing.T) string { return collectortest.FreeAddr(t) }

// startCollector starts a Collector receiving OTLP over protocol on a
// free loopback port; it stops at the test's end.
func startCollector(t *testing.T, protocol string) *collector {
	t.Helper()
	sink := new(consumertest.MetricsSink)
	c := collectortest.Start(t, protocol, "", sink.ConsumeMetrics)
	return &collector{sink: sink, endpoint: c.Endpoint}
}

// point is one histogram or sum data point of the last export.
type point struct {
	metric string
	attrs  map[string]any
	count  uint64
	sum    float64
	bounds []float64
	kind   pmetric.MetricType
}

// lastExport is the points of the last batch the collector got (the
// export is cumulative: the last holds every series' totals) and its
// resource attributes.
func (c *collector) lastExport(t *testing.T) ([]point, map[string]any) {
	t.Helper()
	all := c.sink.AllMetrics()
	if len(all) == 0 {
		t.Fatal("the collector got no metrics")
	}
	md := all[len(all)-1]
	var out []point
	var res map[string]any
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		rm := md.ResourceMetrics().At(i)
		res = rm.Resource().Attributes().AsRaw()
		for j := 0; j < rm.ScopeMetrics().Len(); j++ {
			ms := rm.ScopeMetrics().At(j).Metrics()
			for k := 0; k < ms.Len(); k++ {
				m := ms.At(k)
				switch m.Type() {
				case pmetric.MetricTypeExponentialHistogram:
					dps := m.ExponentialHistogram().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						out = append(out, point{m.Name(), dp.Attributes().AsRaw(), dp.Count(), dp.Sum(), nil, m.Type()})
					}
				case pmetric.MetricTypeHistogram:
					dps := m.Histogram().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						out = append(out, point{m.Name(), dp.Attributes().AsRaw(), dp.Count(), dp.Sum(), dp.ExplicitBounds().AsRaw(), m.Type()})
					}
				case pmetric.MetricTypeSum:
					dps := m.Sum().DataPoints()
					for p := 0; p < dps.Len(); p++ {
						dp := dps.At(p)
						v := float64(dp.IntValue())
						if dp.ValueType() == pmetric.NumberDataPointValueTypeDouble {
							v = dp.DoubleValue()
						}
						out = append(out, point{metric: m.Name(), attrs: dp.Attributes().AsRaw(), sum: v, kind: m.Type()})
					}
				}
			}
		}
	}
	return out, res
}

// total sums count and sum over the points of metric whose attributes
// include every pair of match.
func total(ps []point, metric string, match map[string]any) (count uint64, sum float64) {
	for _, p := range ps {
		if p.metric != metric {
			continue
		}
		ok := true
		for k, v := range match {
			if v == nil {
				_, has := p.attrs[k]
				ok = ok && !has
				continue
			}
			ok = ok && p.attrs[k] == v
		}
		if ok {
			count += p.count
			sum += p.sum
		}
	}
	return count, sum
}

// run --otlp-endpoint against a real Collector, HTTP and gRPC:
// every request counted once in operation.duration, token sums and the
// TTFT and ITL sample counts equal to summary.json's, the SLO events
// equal to the verdict's, the resource naming the run.
func TestRunOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP503, Every: 5}}
	cfg.AnswerModel = "sim-llama-8b-fp8" // a router answering an alias
	srv := simtest.Start(t, cfg)
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte(checkSLO), 0o644)
	for _, tc := range []struct{ protocol, histogram string }{
		{otlp.ProtocolHTTP, otlp.HistogramExponential},
		{otlp.ProtocolGRPC, otlp.HistogramExplicit},
	} {
		t.Run(tc.protocol, func(t *testing.T) {
			col := startCollector(t, tc.protocol)
			dir := t.TempDir()
			code, stdout, stderr := runCmd(t, "--target", srv.URL, "--model", "sim-llama-8b", "--rate", "40", "--arrival", "constant",
				"--duration", "1s", "--max-tokens", "4", "--out", dir, "--max-error-rate", "1", "--slo", sloFile,
				"--otlp-endpoint", col.endpoint, "--otlp-protocol", tc.protocol, "--otlp-histogram", tc.histogram)
			if code != slo.ExitFailed && code != slo.ExitOK {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			if strings.Contains(stderr, "warning: OTLP") || !strings.Contains(stderr, "exported OTLP metrics to "+col.endpoint) {
				t.Errorf("stderr:\n%s", stderr)
			}
			s := readSummary(t, dir)
			ps, res := col.lastExport(t)
			if res["service.name"] != "tailgate" || res["tailgate.shard"] != "0/1" || res["tailgate.run.id"] == "" || res["service.version"] == nil {
				t.Errorf("resource %v", res)
			}
			if !strings.Contains(stderr, "run id "+res["tailgate.run.id"].(string)) {
				t.Errorf("stderr does not name run id %v", res["tailgate.run.id"])
			}
			n, _ := total(ps, otlp.MetricOperationDuration, nil)
			t.Logf("summary: sent %d ok %d, tokens in %d out %d, ttft %d itl %d samples; %d points in the last of %d exports",
				s.Requests.Sent, s.Requests.OK, s.Tokens.Input, s.Tokens.Output, s.LatencyMs["ttft"].Count, s.LatencyMs["itl"].Count, len(ps), len(col.sink.AllMetrics()))
			if int64(n) != s.Requests.Sent || n == 0 {
				t.Errorf("operation.duration count %d, summary sent %d", n, s.Requests.Sent)
			}
			okN, okSum := total(ps, otlp.MetricOperationDuration, map[string]any{otlp.AttrErrorType: nil})
			if int64(okN) != s.Requests.OK {
				t.Errorf("operation.duration without error.type %d, summary ok %d", okN, s.Requests.OK)
			}
			if e2e := s.LatencyMs["e2e"]; math.Abs(okSum*1000-e2e.Mean*float64(e2e.Count)) > 0.01*e2e.Mean*float64(e2e.Count)+1 {
				t.Errorf("operation.duration sum %v s, summary e2e mean×count %v ms", okSum, e2e.Mean*float64(e2e.Count))
			}
			errN, _ := total(ps, otlp.MetricOperationDuration, map[string]any{otlp.AttrErrorType: "server_error"})
			if int64(errN) != s.Requests.ErrorsByKind["server_error"] || errN == 0 {
				t.Errorf("server_error durations %d, summary %v", errN, s.Requests.ErrorsByKind)
			}
			_, in := total(ps, otlp.MetricTokenUsage, map[string]any{otlp.AttrTokenType: "input"})
			_, out := total(ps, otlp.MetricTokenUsage, map[string]any{otlp.AttrTokenType: "output"})
			if int64(in) != s.Tokens.Input || int64(out) != s.Tokens.Output || out == 0 {
				t.Errorf("token usage input %v output %v, summary %d and %d", in, out, s.Tokens.Input, s.Tokens.Output)
			}
			if n, _ := total(ps, otlp.MetricTimeToFirstChunk, nil); int64(n) != s.LatencyMs["ttft"].Count || n == 0 {
				t.Errorf("time_to_first_chunk count %d, summary ttft count %d", n, s.LatencyMs["ttft"].Count)
			}
			if n, _ := total(ps, otlp.MetricTimePerOutChunk, nil); int64(n) != s.LatencyMs["itl"].Count || n == 0 {
				t.Errorf("time_per_output_chunk count %d, summary itl count %d", n, s.LatencyMs["itl"].Count)
			}
			for _, p := range ps {
				if p.metric == otlp.MetricSLOEvents {
					continue
				}
				a := p.attrs
				if a[otlp.AttrOperationName] != "chat" || a[otlp.AttrProviderName] != "openai" || a[otlp.AttrRequestModel] != "sim-llama-8b" ||
					a[otlp.AttrServerAddress] != "127.0.0.1" || a[otlp.AttrServerPort] == nil || a[otlp.AttrSession] != false || a[otlp.AttrClass] != "default" {
					t.Errorf("%s attributes %v", p.metric, a)
				}
				// The model that answered: only where a server answered.
				if answered := a[otlp.AttrErrorType] == nil; answered != (a[otlp.AttrResponseModel] == "sim-llama-8b-fp8") {
					t.Errorf("%s: response model %v beside error.type %v", p.metric, a[otlp.AttrResponseModel], a[otlp.AttrErrorType])
				}
				want := pmetric.MetricTypeExponentialHistogram
				if tc.histogram == otlp.HistogramExplicit {
					want = pmetric.MetricTypeHistogram
				}
				if p.kind != want {
					t.Errorf("%s is %v, want %v", p.metric, p.kind, want)
				}
				// The SLO's TTFT threshold (500ms) is a bucket edge.
				if p.metric == otlp.MetricTimeToFirstChunk && tc.histogram == otlp.HistogramExplicit && !slices.Contains(p.bounds, 0.5) {
					t.Errorf("TTFT bounds %v lack the SLO's 0.5", p.bounds)
				}
			}
			for _, v := range s.SLO.Verdicts {
				if v.Objective != "errors" {
					continue
				}
				_, good := total(ps, otlp.MetricSLOEvents, map[string]any{otlp.AttrSLOObjective: "errors", otlp.AttrSLOOutcome: "good"})
				_, bad := total(ps, otlp.MetricSLOEvents, map[string]any{otlp.AttrSLOObjective: "errors", otlp.AttrSLOOutcome: "bad"})
				if int64(good) != int64(v.Good) || int64(good+bad) != int64(v.Total) {
					t.Errorf("slo events errors %v good of %v; verdict %d of %d", good, good+bad, v.Good, v.Total)
				}
			}
		})
	}
}

// An endpoint that refuses (a closed port) is one warning: the run's exit
// code is the same as without the export, and the run ends promptly.
func TestRunOTLPRefused(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	args := []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "20", "--duration", "300ms", "--max-tokens", "2"}
	base, _, _ := runCmd(t, args...)
	for _, protocol := range []string{otlp.ProtocolHTTP, otlp.ProtocolGRPC} {
		start := time.Now()
		code, _, stderr := runCmd(t, append(args, "--otlp-endpoint", "http://"+freeAddr(t), "--otlp-protocol", protocol)...)
		if code != base || code != slo.ExitOK {
			t.Errorf("%s: exit %d with a refusing endpoint, %d without\n%s", protocol, code, base, stderr)
		}
		// The final export was the only one: one warning, the count.
		if strings.Count(stderr, "warning: OTLP export") != 1 || !strings.Contains(stderr, "1 of 1 exports failed") {
			t.Errorf("%s: want the failure said once:\n%s", protocol, stderr)
		}
		if el := time.Since(start); el > otlpShutdownBound {
			t.Errorf("%s: the run took %v", protocol, el)
		}
	}
	code, _, stderr := runCmd(t, append(args, "--otlp-endpoint", "collector:4318")...)
	if code != slo.ExitUsage || !strings.Contains(stderr, "--otlp-endpoint") {
		t.Errorf("bad --otlp-endpoint: exit %d\n%s", code, stderr)
	}
	code, _, stderr = runCmd(t, append(args, "--otlp-endpoint", "http://127.0.0.1:1", "--otlp-protocol", "http/json")...)
	if code != slo.ExitUsage || !strings.Contains(stderr, "--otlp-protocol") {
		t.Errorf("http/json: exit %d\n%s", code, stderr)
	}
	// A typo is a usage error before the target is reached: with a
	// target that does not answer it is still exit 2, not 3.
	dead := "http://" + freeAddr(t)
	sloFile, _ := filepath.Abs("../../testdata/slo/chat.yaml")
	mix, _ := filepath.Abs("../../testdata/mixes/chat.yaml")
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(plan, []byte("kind: Plan\nname: p\ntarget: "+dead+"\nmodel: m\nslo: "+sloFile+"\nmix: "+mix+"\nstages:\n  - {name: normal, rate: 1, duration: 1s}\n"), 0o644)
	bad := []string{"--otlp-endpoint", "http://127.0.0.1:1", "--otlp-protocol", "http/json", "--out", t.TempDir()}
	for _, a := range [][]string{
		{"run", "--target", dead, "--model", "m", "--duration", "1s"},
		{"sweep", "--target", dead, "--model", "m", "--slo", sloFile, "--levels", "1,2"},
		{"validate", "--plan", plan},
	} {
		code, _, stderr := tgCmd(append(a, bad...)...)
		if code != slo.ExitUsage || !strings.Contains(stderr, "--otlp-protocol") {
			t.Errorf("%s with a dead target and http/json: exit %d\n%s", a[0], code, stderr)
		}
	}
}

// The standard variables turn the export on without a flag, and Ctrl-C
// mid-run still flushes: what arrived counts every request summary.json
// counts.
func TestRunOTLPEnvInterrupt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 20*time.Millisecond, 50*time.Millisecond
	srv := simtest.Start(t, cfg)
	col := startCollector(t, otlp.ProtocolGRPC)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", col.endpoint)
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret-token")
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	var err error
	go func() {
		defer wg.Done()
		err = commands["run"].run(ctx, []string{"--target", srv.URL, "--model", "sim-llama-8b", "--rate", "40",
			"--duration", "60s", "--max-tokens", "20", "--out", dir, "--self-check=warn"}, &stdout, &stderr)
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), time.Minute)
	defer wcancel()
	if werr := srv.Await(wctx, func() bool { return len(srv.Truth()) >= 20 }); werr != nil {
		cancel()
		wg.Wait()
		t.Fatalf("the server saw %d requests in a minute", len(srv.Truth()))
	}
	cancel()
	wg.Wait()
	if code := exitCode(err); code != slo.ExitInvalid {
		t.Errorf("interrupted run: exit %d (%v)", code, err)
	}
	if !strings.Contains(stderr.String(), "exported OTLP metrics") || strings.Contains(stderr.String(), "s3cret") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	s := readSummary(t, dir)
	if !s.Run.Interrupted {
		t.Error("summary.json: not interrupted")
	}
	ps, _ := col.lastExport(t)
	if n, _ := total(ps, otlp.MetricOperationDuration, nil); int64(n) != s.Requests.Sent || n < 20 {
		t.Errorf("operation.duration count %d after Ctrl-C, summary sent %d", n, s.Requests.Sent)
	}
	if n, _ := total(ps, otlp.MetricOperationDuration, map[string]any{otlp.AttrErrorType: "cancelled"}); int64(n) != s.Requests.ErrorsByKind["cancelled"] {
		t.Errorf("cancelled durations %d, summary %v", n, s.Requests.ErrorsByKind)
	}
}

// validate --otlp-endpoint: both stages' records reach the collector,
// each under its tailgate.stage, counted as the stages' summaries count.
func TestValidateOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.DefaultConfig())
	col := startCollector(t, otlp.ProtocolHTTP)
	plan := writePlan(t, srv.URL, "1s", false)
	out := filepath.Join(t.TempDir(), "out")
	code, stdout, stderr := tgCmd("validate", "--plan", plan, "--out", out, "--otlp-endpoint", col.endpoint, "--self-check", "warn")
	if code != slo.ExitOK && code != slo.ExitFailed {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ps, _ := col.lastExport(t)
	stages := map[string]uint64{}
	for _, p := range ps {
		if p.metric == otlp.MetricOperationDuration {
			st, _ := p.attrs[otlp.AttrStage].(string)
			stages[st] += p.count
		}
	}
	if len(stages) != 2 {
		t.Fatalf("stages %v, want two", stages)
	}
	for st, n := range stages {
		s := readSummary(t, filepath.Join(out, "stages", st))
		if int64(n) != s.Requests.Sent {
			t.Errorf("stage %s: %d durations, summary sent %d", st, n, s.Requests.Sent)
		}
	}
}

// sweep --otlp-endpoint: every level's records reach the collector under
// the level's name as tailgate.stage, counted as the level's summary
// counts, with the warm-up left out of both.
func TestSweepOTLP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	col := startCollector(t, otlp.ProtocolGRPC)
	dir := t.TempDir()
	sloFile := filepath.Join(dir, "slo.yaml")
	os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: ttft, metric: ttft, threshold: 500ms, target: 90%}\n"), 0o644)
	out := filepath.Join(dir, "out")
	code, stdout, stderr := tgCmd("sweep", "--target", srv.URL, "--slo", sloFile, "--levels", "20,40", "--arrival", "constant",
		"--max-tokens", "4", "--warmup", "200ms", "--min-duration", "500ms", "--grace", "1s", "--self-check", "warn", "--no-report",
		"--out", out, "--otlp-endpoint", col.endpoint, "--otlp-protocol", "grpc")
	if code != slo.ExitOK && code != slo.ExitFailed {
		t.Fatalf("sweep: %d\n%s\n%s", code, stdout, stderr)
	}
	ps, _ := col.lastExport(t)
	levels := map[string]uint64{}
	for _, p := range ps {
		if p.metric == otlp.MetricOperationDuration {
			st, _ := p.attrs[otlp.AttrStage].(string)
			levels[st] += p.count
		}
	}
	if len(levels) != 2 {
		t.Fatalf("levels %v, want two", levels)
	}
	for name, n := range levels {
		s, err := results.Dir(out).Level(name).ReadSummary()
		if err != nil {
			t.Fatal(err)
		}
		if int64(n) != s.Requests.Sent || n == 0 {
			t.Errorf("level %s: %d durations, summary sent %d", name, n, s.Requests.Sent)
		}
	}
}

// canary --otlp-endpoint: the probes reach the collector under the
// target's name, and at shutdown the final export counts every probe
// once: operation.duration's count equals the error objective's events
// (one per probe, the operate phase's rules leaving out the probes the
// shutdown cancelled from both).
func TestCanaryOTLP(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 2*time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	col := startCollector(t, otlp.ProtocolHTTP)
	path := writeCanary(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout bytes.Buffer
	stderr := &syncbuf.Buffer{}
	done := make(chan int, 1)
	go func() {
		done <- exitCode(cmdCanary(ctx, []string{"--config", path, "--otlp-endpoint", col.endpoint, "--otlp-histogram", "explicit"}, &stdout, stderr))
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if err := srv.Await(wctx, func() bool { return len(srv.Truth()) >= 5 }); err != nil {
		t.Fatalf("the simulator saw %d probes\n%s", len(srv.Truth()), stderr.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != slo.ExitOK {
			t.Errorf("exit %d\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("tailgate canary did not stop")
	}
	if !strings.Contains(stderr.String(), "exported OTLP metrics to "+col.endpoint) {
		t.Errorf("no final export:\n%s", stderr.String())
	}
	ps, _ := col.lastExport(t)
	n, _ := total(ps, otlp.MetricOperationDuration, map[string]any{otlp.AttrTarget: "sim"})
	_, good := total(ps, otlp.MetricSLOEvents, map[string]any{otlp.AttrTarget: "sim", otlp.AttrSLOObjective: "errors", otlp.AttrSLOOutcome: "good"})
	_, bad := total(ps, otlp.MetricSLOEvents, map[string]any{otlp.AttrTarget: "sim", otlp.AttrSLOObjective: "errors", otlp.AttrSLOOutcome: "bad"})
	if n < 3 || float64(n) != good+bad { // the probes in flight at shutdown are cancelled: not counted
		t.Errorf("operation.duration count %d, errors events %v good + %v bad", n, good, bad)
	}
	for _, p := range ps {
		if p.metric == otlp.MetricTimeToFirstChunk && !slices.Contains(p.bounds, 2.0) {
			t.Errorf("TTFT bounds %v lack the canary SLO's 2s", p.bounds)
		}
	}
}
