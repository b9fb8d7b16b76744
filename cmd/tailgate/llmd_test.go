package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tailgate-llm/tailgate/evidence"
	"github.com/tailgate-llm/tailgate/exporters/llmd"
	"github.com/tailgate-llm/tailgate/loadgen/measure"
	"github.com/tailgate-llm/tailgate/sim"
	"github.com/tailgate-llm/tailgate/sim/simtest"
	"github.com/tailgate-llm/tailgate/slo"
)

// llmdSchema is the JSON Schema of the report tailgate writes.
func llmdSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "testdata", "schema", "llmd-benchmark-report-v0.2.1.json"))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

func validateLLMD(t *testing.T, path string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	inst, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if err := llmdSchema(t).Validate(inst); err != nil {
		t.Fatalf("%s does not validate: %v", path, err)
	}
	return inst.(map[string]any)
}

// A real run against the simulator, with --llm-d-report, writes a
// report that validates against the schema, states the run's rate, keeps
// credentials out, and whose every figure is summary.json's.
func TestRunWritesLLMDReport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = 3*time.Millisecond, time.Millisecond
	cfg.Faults = []sim.FaultRule{{Kind: sim.FaultHTTP429, Every: 5}}
	srv := simtest.Start(t, cfg)
	target := strings.Replace(srv.URL, "http://", "http://admin:hunter2hunter2@", 1) + "/v1"
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", target, "--model", "sim-llama-8b", "--rate", "40", "--duration", "500ms",
		"--out", dir, "--max-error-rate", "1", "--llm-d-report")
	if code != slo.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	path := filepath.Join(dir, llmd.FileName)
	validateLLMD(t, path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "hunter2") || strings.Contains(string(b), "admin") {
		t.Errorf("report holds the target's credentials:\n%s", b)
	}
	var r llmd.Report
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	s := readSummary(t, dir)
	raw, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if r.Version != "0.2.1" || r.Run.UID != hex.EncodeToString(sum[:16]) || r.Run.EID != r.Run.UID {
		t.Errorf("version %q, run %+v: want uid and eid the digest of summary.json", r.Version, r.Run)
	}
	if ts := r.Results.RequestPerformance.TimeSeries; ts == nil || ts.Latency == nil || ts.Latency.TimeToFirstToken == nil ||
		len(ts.Latency.TimeToFirstToken.Series) == 0 || ts.Throughput == nil {
		t.Errorf("time series %+v", ts)
	}
	st := r.Scenario.Load.Standardized
	if st.Tool != "tailgate" || st.ToolVersion != s.Tool.Version || st.RateQPS == nil || *st.RateQPS != 40 || st.Concurrency != nil {
		t.Errorf("standardized load %+v", st)
	}
	if in := st.InputSeqLen; in == nil || s.Tokens.Input == 0 || in.Value != float64(s.Tokens.Input)/float64(s.Requests.OK) || st.Source != "unknown" {
		t.Errorf("input_seq_len %+v, source %q; summary tokens %+v over %d", in, st.Source, s.Tokens, s.Requests.OK)
	}
	agg := r.Results.RequestPerformance.Aggregate
	if agg.Requests.Total != s.Requests.Sent || agg.Requests.Failures != s.Requests.Errors || agg.Requests.Failures == 0 {
		t.Errorf("requests %+v, summary %+v", agg.Requests, s.Requests)
	}
	if agg.Latency == nil {
		t.Fatal("no latency block")
	}
	for name, got := range map[string]*llmd.Statistics{measure.MetricTTFT: agg.Latency.TimeToFirstToken,
		measure.MetricE2E: agg.Latency.RequestLatency, measure.MetricITL: agg.Latency.InterTokenLatency,
		measure.MetricTPOT: agg.Latency.TimePerOutputToken} {
		h := s.LatencyMs[name]
		if got == nil || h.Count == 0 {
			t.Fatalf("%s: report %v, summary count %d", name, got, h.Count)
		}
		if got.Mean != h.Mean || *got.Min != h.Min || *got.P50 != h.P50 || *got.P90 != h.P90 || *got.P95 != h.P95 ||
			*got.P99 != h.P99 || *got.P99p9 != h.P999 || *got.Max != h.Max {
			t.Errorf("%s: report %+v, summary %+v", name, *got, h)
		}
	}
	th := agg.Throughput
	if th == nil || th.RequestRate.Mean != s.Throughput.RequestsPerS || th.OutputTokenRate.Mean != s.Throughput.OutputTokensPerS ||
		th.RequestRate.Mean <= 0 {
		t.Errorf("throughput %+v, summary %+v", th, s.Throughput)
	}
	// The simulator's /metrics was sampled: the stack names its family and
	// model, and the queue figures are summary.json's telemetry.
	tel := s.Telemetry
	if tel == nil || tel.Running == nil {
		t.Fatalf("simulator telemetry not sampled: %+v", tel)
	}
	if len(r.Scenario.Stack) != 1 || r.Scenario.Stack[0].Standardized.Tool != tel.Family ||
		r.Scenario.Stack[0].Standardized.Model == nil || r.Scenario.Stack[0].Standardized.Model.Name != "sim-llama-8b" {
		t.Errorf("stack %+v, telemetry family %q", r.Scenario.Stack, tel.Family)
	}
	if o := r.Results.Observability; o == nil || o.Components[0].Aggregate.RunningRequests == nil ||
		o.Components[0].Aggregate.RunningRequests.Mean != tel.Running.Mean || o.Components[0].Aggregate.RunningRequests.Units != "count" {
		t.Errorf("observability %+v, telemetry running %+v", o, tel.Running)
	}

	// The records give the length distributions and the token-rate
	// series; the telemetry samples the observability series.
	if ol := agg.Requests.OutputLength; ol == nil || ol.P50 == nil || ol.Max == nil || ol.Mean != float64(s.Tokens.Output)/float64(s.Requests.OK) {
		t.Errorf("output_length %+v: want the records' distribution, mean summary.json's", ol)
	}
	if ts := r.Results.RequestPerformance.TimeSeries; ts != nil && ts.Throughput != nil {
		se := ts.Throughput.OutputTokenRate
		if se == nil || len(se.Series) != len(ts.Throughput.RequestRate.Series) || se.Units != "tokens/s" {
			t.Errorf("output token rate series %+v beside %d request-rate points", se, len(ts.Throughput.RequestRate.Series))
		}
	}
	if tel.KVUsage != nil {
		if o := r.Results.Observability; o == nil || o.Components[0].TimeSeries == nil || o.Components[0].TimeSeries.KVCacheUsage == nil ||
			len(o.Components[0].TimeSeries.KVCacheUsage.Series) == 0 {
			t.Errorf("no kv_cache_usage series though telemetry sampled it: %+v", r.Results.Observability)
		}
	}

	// report --format llm-d of the same directory gives the same report.
	var out, errb strings.Builder
	if code := dispatch([]string{"report", "--format", "llm-d", "--out", "-", dir}, &out, &errb); code != 0 {
		t.Fatalf("report exit %d: %s", code, errb.String())
	}
	if strings.TrimSpace(out.String()) != strings.TrimSpace(string(b)) {
		t.Errorf("report --format llm-d differs from run --llm-d-report:\n%s\n---\n%s", out.String(), b)
	}
}

// A closed-loop run without streaming measured no ITL or TPOT: they are
// absent from the report, not zero, and the concurrency is stated.
func TestLLMDReportLeavesOutWhatWasNotMeasured(t *testing.T) {
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "sim-llama-8b", "--concurrency", "2",
		"--requests", "6", "--duration", "5s", "--stream=false", "--out", dir)
	if code != slo.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var errb strings.Builder
	if code := dispatch([]string{"report", "--format", "llm-d", dir}, &strings.Builder{}, &errb); code != 0 {
		t.Fatalf("report exit %d: %s", code, errb.String())
	}
	inst := validateLLMD(t, filepath.Join(dir, llmd.FileName))
	lat := inst["results"].(map[string]any)["request_performance"].(map[string]any)["aggregate"].(map[string]any)["latency"].(map[string]any)
	for _, k := range []string{"inter_token_latency", "time_per_output_token"} {
		if v, ok := lat[k]; ok {
			t.Errorf("%s = %v for an unstreamed run: want it absent", k, v)
		}
	}
	if _, ok := lat["request_latency"]; !ok {
		t.Error("no request_latency")
	}
	st := inst["scenario"].(map[string]any)["load"].(map[string]any)["standardized"].(map[string]any)
	if fmt.Sprint(st["concurrency"]) != "2" || st["rate_qps"] != nil {
		t.Errorf("standardized %v: want concurrency 2, no rate", st)
	}
}

// The schema is not a formality: a planted wrong unit and a planted
// unknown key are each refused.
func TestLLMDSchemaRefusesWrongUnitAndUnknownKey(t *testing.T) {
	good := `{"version":"0.2.1","run":{"uid":"0123456789abcdef0123456789abcdef","eid":"0123456789abcdef0123456789abcdef"},
	"scenario":{"load":{"metadata":{},"native":{},"standardized":{"tool":"tailgate","tool_version":"1","source":"unknown","parallelism":1}}},
	"results":{"request_performance":{"aggregate":{"requests":{"total":1,"failures":0},
	"latency":{"time_to_first_token":{"units":"%s","mean":1,"min":1,"p50":1,"p90":1,"p95":1,"p99":1,"max":1%s}}}}}}`
	sch := llmdSchema(t)
	for _, c := range []struct {
		name, units, extra string
		ok                 bool
	}{{"good", "ms", "", true}, {"wrong unit", "ms/token", "", false}, {"unknown key", "ms", `,"p42":1`, false}} {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(fmt.Sprintf(good, c.units, c.extra)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if err := sch.Validate(inst); (err == nil) != c.ok {
			t.Errorf("%s: validate %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// validateEach validates the report beside each summary.json under dir's
// stages or levels, and returns their eids.
func validateEach(t *testing.T, dir, sub string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, sub))
	if err != nil || len(ents) < 2 {
		t.Fatalf("%s: %v %v", sub, ents, err)
	}
	var eids []string
	for _, e := range ents {
		inst := validateLLMD(t, filepath.Join(dir, sub, e.Name(), llmd.FileName))
		eids = append(eids, inst["run"].(map[string]any)["eid"].(string))
		ts := inst["results"].(map[string]any)["request_performance"].(map[string]any)["time_series"]
		if ts == nil {
			t.Errorf("%s/%s: no time_series though it has a latency.hlog", sub, e.Name())
		}
	}
	for _, id := range eids[1:] {
		if id != eids[0] {
			t.Errorf("%s: eids differ: %v", sub, eids)
		}
	}
	return eids
}

// report --format llm-d of a validate pack and of a sweep writes one
// report per stage or level, each passing the schema, sharing one eid;
// --out - prints them as an array.
func TestLLMDReportOfPackAndSweep(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	srv := simtest.Start(t, sim.DefaultConfig())
	pack := filepath.Join(t.TempDir(), "pack")
	if code, stdout, stderr := tgCmd("validate", "--plan", writePlan(t, srv.URL, "1s", false), "--out", pack, "--self-check", "warn", "--llm-d-report"); code == slo.ExitUsage {
		t.Fatalf("validate: %d\n%s\n%s", code, stdout, stderr)
	}
	sloFile := filepath.Join(t.TempDir(), "slo.yaml")
	os.WriteFile(sloFile, []byte("kind: SLO\nname: s\nowner: o\nobjectives:\n  - {name: tpot, metric: tpot, threshold: 100ms, target: 90%}\n"), 0o644)
	sweep := filepath.Join(t.TempDir(), "sweep")
	if code, stdout, stderr := tgCmd("sweep", "--target", srv.URL, "--slo", sloFile, "--levels", "20,40", "--arrival", "constant",
		"--max-tokens", "8", "--warmup", "100ms", "--min-duration", "500ms", "--grace", "1s", "--self-check", "warn", "--out", sweep); code == slo.ExitUsage {
		t.Fatalf("sweep: %d\n%s\n%s", code, stdout, stderr)
	}
	// Each stage records its mix's plan; the plan's classes are datasets,
	// whose data set the lengths, so the reports state measured means.
	stages, err := os.ReadDir(filepath.Join(pack, "stages"))
	if err != nil || len(stages) == 0 {
		t.Fatalf("stages %v, %v", stages, err)
	}
	for _, e := range stages {
		sd := filepath.Join(pack, "stages", e.Name())
		if lp := readSummary(t, sd).PlannedLengths; lp == nil || len(lp.Classes) != 2 || lp.Classes[0].InputTokens != nil {
			t.Errorf("stage %s planned_lengths %+v", e.Name(), lp)
		}
		inst := validateLLMD(t, filepath.Join(sd, llmd.FileName))
		in := inst["scenario"].(map[string]any)["load"].(map[string]any)["standardized"].(map[string]any)["input_seq_len"]
		if m, _ := in.(map[string]any); m == nil || m["distribution"] != "other" || m["min"] != nil {
			t.Errorf("stage %s input_seq_len %v: want the measured mean", e.Name(), in)
		}
	}
	// The pack's reports are in its manifest; writing them into it
	// afterwards is refused, as it would break verify.
	m, _, err := evidence.Read(pack)
	if err != nil {
		t.Fatal(err)
	}
	if err := evidence.Check(pack, m); err != nil {
		t.Errorf("the pack with its llm-d reports does not match its manifest: %v", err)
	}
	var errp strings.Builder
	if code := dispatch([]string{"report", "--format", "llm-d", pack}, &strings.Builder{}, &errp); code != slo.ExitUsage || !strings.Contains(errp.String(), "--out FILE") {
		t.Errorf("report --format llm-d into a pack: exit %d, want 2 naming --out FILE: %s", code, errp.String())
	}
	if code := dispatch([]string{"report", "--format", "llm-d", sweep}, &strings.Builder{}, &errp); code != 0 {
		t.Fatalf("report sweep: exit %d: %s", code, errp.String())
	}
	for _, c := range []struct{ dir, sub string }{{pack, "stages"}, {sweep, "levels"}} {
		var errb strings.Builder
		validateEach(t, c.dir, c.sub)
		var out strings.Builder
		if code := dispatch([]string{"report", "--format", "llm-d", "--out", "-", c.dir}, &out, &errb); code != 0 {
			t.Fatalf("report --out - %s: exit %d: %s", c.sub, code, errb.String())
		}
		var arr []llmd.Report
		if err := json.Unmarshal([]byte(out.String()), &arr); err != nil || len(arr) < 2 {
			t.Errorf("%s to stdout: %d reports, %v", c.sub, len(arr), err)
		}
	}
}

// A run of agent sessions gives session_performance, which validates, its
// total summary.json's session count.
func TestLLMDReportOfSessionRun(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	mix, err := filepath.Abs("../../testdata/mixes/agent.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "sim-llama-8b", "--mix", mix, "--seed", "3", "--rate", "8",
		"--arrival", "constant", "--duration", "1s", "--max-error-rate", "1", "--self-check", "warn", "--out", dir, "--llm-d-report")
	if code != slo.ExitOK && code != slo.ExitFailed {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	inst := validateLLMD(t, filepath.Join(dir, llmd.FileName))
	s := readSummary(t, dir)
	if s.Sessions == nil || s.Sessions.Count == 0 {
		t.Fatalf("summary has no sessions: %+v", s.Sessions)
	}
	sp, _ := inst["results"].(map[string]any)["session_performance"].(map[string]any)
	ss, _ := sp["sessions"].(map[string]any)
	if fmt.Sprint(ss["total"]) != fmt.Sprint(s.Sessions.Count) || fmt.Sprint(ss["succeeded"]) != fmt.Sprint(s.Sessions.OK) {
		t.Errorf("session_performance %v, summary sessions %+v", sp, s.Sessions)
	}
}

// A run of a mix records its length plan in summary.json, and the report
// states it: two classes of different lengths are a mixture, other with
// the share-weighted mean and the widest bounds; their one max_tokens is
// fixed. The measured lengths stay in the results.
func TestLLMDReportStatesMixPlan(t *testing.T) {
	if testing.Short() {
		t.Skip("runs load against the simulator")
	}
	cfg := sim.DefaultConfig()
	cfg.FixedTTFT, cfg.FixedITL = time.Millisecond, time.Millisecond
	srv := simtest.Start(t, cfg)
	mix := filepath.Join(t.TempDir(), "mix.yaml")
	if err := os.WriteFile(mix, []byte(`kind: Mix
classes:
  - {name: short, weight: 3, source: {type: synthetic, input_tokens: 40}, max_tokens: 8}
  - {name: long, weight: 1, source: {type: synthetic, input_tokens: {dist: uniform, min: 100, max: 140}}, max_tokens: 8}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	code, _, stderr := runCmd(t, "--target", srv.URL+"/v1", "--model", "sim-llama-8b", "--mix", mix, "--rate", "20",
		"--duration", "500ms", "--max-error-rate", "1", "--out", dir, "--llm-d-report")
	if code != slo.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	s := readSummary(t, dir)
	if s.PlannedLengths == nil || len(s.PlannedLengths.Classes) != 2 || s.PlannedLengths.Classes[0].Share != 0.75 {
		t.Fatalf("planned_lengths %+v", s.PlannedLengths)
	}
	inst := validateLLMD(t, filepath.Join(dir, llmd.FileName))
	st := inst["scenario"].(map[string]any)["load"].(map[string]any)["standardized"].(map[string]any)
	in, out := fmt.Sprint(st["input_seq_len"]), fmt.Sprint(st["output_seq_len"])
	if in != "map[distribution:other max:140 min:40 value:60]" || out != "map[distribution:fixed value:8]" {
		t.Errorf("input_seq_len %s, output_seq_len %s", in, out)
	}
}
