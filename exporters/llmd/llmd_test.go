package llmd

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/internal/version"
	"github.com/tailgate-llm/tailgate/loadgen/measure"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
)

func summary() *results.Summary {
	var s results.Summary
	s.Tool = version.NewTool("1.2.3")
	s.Run = schema.RunInfo{Started: "2026-01-02T03:04:05Z", Ended: "2026-01-02T03:04:55Z", DurationS: 49.97,
		Target: "https://gw.example:8443/v1", Model: "m", Load: map[string]any{"mode": "open", "stages": "5@10s,10@10s"}}
	s.Requests = schema.Counts{Sent: 10, OK: 9, Errors: 1, CutAtEnd: 1}
	s.LatencyMs = map[string]schema.Hist{measure.MetricE2E: {Count: 9, Mean: 12, P99: 20}, measure.MetricITL: {}}
	s.Throughput = schema.Throughput{RequestsPerS: 3, OutputTokensPerS: 30, MeasuredWindowS: 3}
	return &s
}

// What tailgate did not measure is absent, not zero: ITL with no events,
// input and total token rates without input counts, and a rate for a run
// of several stages.
func TestUnmeasuredIsAbsent(t *testing.T) {
	t.Parallel()
	r := FromSummary(summary(), []byte("{}"))
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"inter_token_latency", "time_to_first_token", "input_token_rate", "total_token_rate", "rate_qps", "concurrency", "input_seq_len", "output_seq_len"} {
		if strings.Contains(string(b), `"`+k+`"`) {
			t.Errorf("%s written: %s", k, b)
		}
	}
	agg := r.Results.RequestPerformance.Aggregate
	if agg.Latency.RequestLatency == nil || *agg.Latency.RequestLatency.P99 != 20 || agg.Requests.Incomplete != 1 {
		t.Errorf("aggregate %+v", agg)
	}
	if r.Run.Time.Duration != "PT49.97S" || r.Scenario.Load.Native.Config["target_host"] != "gw.example:8443" {
		t.Errorf("run %+v, config %v", r.Run, r.Scenario.Load.Native.Config)
	}
}

// One stage states its level: a rate open, a concurrency closed.
func TestLoadLevel(t *testing.T) {
	t.Parallel()
	q, c := loadLevel(map[string]any{"mode": "open", "stages": "12.5@30s~5s"})
	if q == nil || *q != 12.5 || c != nil {
		t.Errorf("open: %v %v", q, c)
	}
	q, c = loadLevel(map[string]any{"mode": "closed", "stages": "c8@1m0s"})
	if c == nil || *c != 8 || q != nil {
		t.Errorf("closed: %v %v", q, c)
	}
	if q, c = loadLevel(map[string]any{"mode": "trace", "stages": "trace@10s"}); q != nil || c != nil {
		t.Errorf("trace: %v %v", q, c)
	}
}

// reportSchema is the JSON Schema of what tailgate writes.
func reportSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	s, err := c.Compile(filepath.Join("..", "..", "testdata", "schema", "llmd-benchmark-report-v0.2.1.json"))
	if err != nil {
		t.Fatalf("schema: %v", err)
	}
	return s
}

// validate checks r against the schema, as the JSON it is written as.
func validate(t *testing.T, sch *jsonschema.Schema, r any) error {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(inst)
}

// writeRun writes a run directory: summary s, and an interval log of two
// one-second intervals (TTFT and e2e) starting at start.
func writeRun(t *testing.T, dir results.Dir, s *results.Summary, start time.Time) []byte {
	t.Helper()
	if err := os.MkdirAll(string(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteJSON(dir.Path(results.SummaryFile), s); err != nil {
		t.Fatal(err)
	}
	w, err := results.CreateHlog(dir.Path(results.HlogFile), start)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		var hs []*hdrhistogram.Histogram
		for _, m := range []string{measure.MetricTTFT, measure.MetricE2E} {
			h := measure.NewHistogram()
			h.SetTag(m)
			for v := range 4 + i { // microseconds: 1 ms, 2 ms, …
				h.RecordValue(int64(v+1) * 1000)
			}
			hs = append(hs, h)
		}
		from := start.Add(time.Duration(i) * time.Second)
		if err := w.WriteInterval(hs, from, from.Add(time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(dir.Path(results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// near is a to the HDR histograms' resolution (3 significant digits).
func near(a, b float64) bool { return a >= b && a <= b*1.001 }

func uidOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:16])
}

// A lone run: uid is the digest of summary.json's bytes and also its eid,
// lengths sit under requests, the interval log gives a time series point
// per interval, and the report passes the schema.
func TestRunReport(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := summary()
	s.Tokens = schema.Tokens{Input: 900, Output: 180}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	raw := writeRun(t, dir, s, start)
	parts, err := Write(dir)
	if err != nil || len(parts) != 1 || parts[0].Dir != dir {
		t.Fatalf("parts %v, %v", parts, err)
	}
	r := parts[0].Report
	if r.Version != "0.2.1" || r.Run.UID != uidOf(raw) || r.Run.EID != r.Run.UID {
		t.Errorf("version %q, run %+v, want uid %s", r.Version, r.Run, uidOf(raw))
	}
	req := r.Results.RequestPerformance.Aggregate.Requests
	if req.InputLength == nil || req.InputLength.Mean != 100 || req.InputLength.Units != "count" || req.OutputLength.Mean != 20 {
		t.Errorf("requests %+v", req)
	}
	ts := r.Results.RequestPerformance.TimeSeries
	if ts == nil || ts.Latency.TimeToFirstToken == nil || ts.Latency.InterTokenLatency != nil {
		t.Fatalf("time series %+v", ts)
	}
	ttft := ts.Latency.TimeToFirstToken
	if ttft.Units != "ms" || len(ttft.Series) != 2 || ttft.Series[0].TS != "2026-01-02T03:04:05Z" || !near(*ttft.Series[0].Max, 4) ||
		!near(*ttft.Series[1].Max, 5) || !near(*ttft.Series[0].Mean, 2.5) {
		t.Errorf("ttft series %+v: mean %v max %v, %v", ttft, *ttft.Series[0].Mean, *ttft.Series[0].Max, *ttft.Series[1].Max)
	}
	rr := ts.Throughput.RequestRate
	if rr.Units != "queries/s" || len(rr.Series) != 2 || *rr.Series[0].Value != 4 || *rr.Series[1].Value != 5 {
		t.Errorf("request rate series %+v", rr)
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("report does not validate: %v", err)
	}
	// What Write wrote is what Reports built.
	b, err := os.ReadFile(dir.Path(FileName))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.MarshalIndent(r, "", "  ")
	if strings.TrimSpace(string(b)) != string(want) {
		t.Errorf("written report differs:\n%s\n---\n%s", b, want)
	}
}

// A validate pack: one report per stage, in verdict.json's order, each in
// its stage's directory, numbered, with the pack's eid (verdict.json's
// digest) and its own uid; each passes the schema.
func TestPackReports(t *testing.T) {
	dir := results.Dir(t.TempDir())
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	raws := map[string][]byte{}
	for i, n := range []string{"normal", "peak"} {
		s := summary()
		s.Run.Load = map[string]any{"mode": "open", "stages": fmt.Sprintf("%d@10s", 5*(i+1))}
		raws[n] = writeRun(t, dir.Stage(n), s, start.Add(time.Duration(i)*time.Minute))
	}
	verdict := []byte(`{"stages":[{"name":"peak"},{"name":"normal"}]}`)
	if err := os.WriteFile(dir.Path(results.VerdictFile), verdict, 0o644); err != nil {
		t.Fatal(err)
	}
	parts, err := Write(dir)
	if err != nil || len(parts) != 2 {
		t.Fatalf("parts %v, %v", parts, err)
	}
	sch := reportSchema(t)
	for i, n := range []string{"peak", "normal"} {
		p := parts[i]
		st := p.Report.Scenario.Load.Standardized
		if p.Dir != dir.Stage(n) || p.Report.Run.UID != uidOf(raws[n]) || p.Report.Run.EID != uidOf(verdict) ||
			st.Stage == nil || *st.Stage != i || st.RateQPS == nil {
			t.Errorf("part %d: dir %s, run %+v, standardized %+v", i, p.Dir, p.Report.Run, st)
		}
		if _, err := os.Stat(p.Dir.Path(FileName)); err != nil {
			t.Errorf("stage %s: %v", n, err)
		}
		if err := validate(t, sch, p.Report); err != nil {
			t.Errorf("stage %s does not validate: %v", n, err)
		}
	}
}

// A sweep: one report per level in sweep.json's order, eid its digest.
func TestSweepReports(t *testing.T) {
	dir := results.Dir(t.TempDir())
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i, n := range []string{"r10", "r20"} {
		s := summary()
		s.Run.Load = map[string]any{"mode": "open", "stages": fmt.Sprintf("%d@10s", 10*(i+1))}
		writeRun(t, dir.Level(n), s, start)
	}
	sw := []byte(`{"schema":"` + results.SweepSchema + `","levels":[{"name":"r20"},{"name":"r10"}]}`)
	if err := os.WriteFile(dir.Path(results.SweepFile), sw, 0o644); err != nil {
		t.Fatal(err)
	}
	parts, err := Reports(dir)
	if err != nil || len(parts) != 2 {
		t.Fatalf("parts %v, %v", parts, err)
	}
	sch := reportSchema(t)
	for i, want := range []float64{20, 10} {
		r := parts[i].Report
		if q := r.Scenario.Load.Standardized.RateQPS; q == nil || *q != want || r.Run.EID != uidOf(sw) {
			t.Errorf("level %d: rate %v, eid %s", i, q, r.Run.EID)
		}
		if err := validate(t, sch, r); err != nil {
			t.Errorf("level %d does not validate: %v", i, err)
		}
	}
}

// A session run gives session_performance, its durations in seconds.
func TestSessionPerformance(t *testing.T) {
	s := summary()
	s.Sessions = &schema.SessionSummary{Count: 4, OK: 3, Failed: 1, CancelledCalls: 2,
		DurationMs: schema.Hist{Count: 4, Mean: 1500, Min: 1000, P50: 1400, P90: 2000, P95: 2000, P99: 2000, P999: 2000, Max: 2000}}
	r := FromSummary(s, []byte("{}"))
	r.Run.EID = r.Run.UID
	sp := r.Results.SessionPerformance
	if sp == nil || sp.Sessions.Total != 4 || *sp.Sessions.Succeeded != 3 || *sp.Sessions.Failed != 1 ||
		*sp.Sessions.TotalEventsCancelled != 2 || sp.Sessions.SessionDuration.Units != "s" || sp.Sessions.SessionDuration.Mean != 1.5 {
		t.Fatalf("session performance %+v", sp)
	}
	if mt := r.Scenario.Load.Standardized.MultiTurn; mt == nil || !mt.Enabled {
		t.Errorf("multi_turn %v", mt)
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("does not validate: %v", err)
	}
	if r := FromSummary(summary(), []byte("{}")); r.Results.SessionPerformance != nil || r.Scenario.Load.Standardized.MultiTurn != nil {
		t.Error("session blocks for a run without sessions")
	}
}

// The schema refuses an emitted report with a planted wrong unit, and one
// with a planted unknown key, at several depths.
func TestSchemaRefusesPlanted(t *testing.T) {
	s := summary()
	s.Tokens = schema.Tokens{Input: 900, Output: 180}
	s.LatencyMs[measure.MetricTTFT] = schema.Hist{Count: 9, Mean: 3, P99: 5}
	r := FromSummary(s, []byte("{}"))
	plant := planter(t, r)
	at := func(m map[string]any, path ...string) map[string]any {
		for _, k := range path {
			m = m[k].(map[string]any)
		}
		return m
	}
	agg := []string{"results", "request_performance", "aggregate"}
	if err := plant(func(map[string]any) {}); err != nil {
		t.Fatalf("unchanged report refused: %v", err)
	}
	if o := r.Scenario.Load.Standardized.OutputSeqLen; o == nil || o.Distribution != "other" || o.Value != 20 {
		t.Errorf("output_seq_len %+v, want other 20 (180 tokens / 9 ok)", o)
	}
	for name, f := range map[string]func(map[string]any){
		"ttft in ms/token": func(m map[string]any) { at(m, append(agg, "latency", "time_to_first_token")...)["units"] = "ms/token" },
		"e2e in seconds per token": func(m map[string]any) {
			at(m, append(agg, "latency", "request_latency")...)["units"] = "s/token"
		},
		"request rate in tokens/s": func(m map[string]any) { at(m, append(agg, "throughput", "request_rate")...)["units"] = "tokens/s" },
		"input length in ms":       func(m map[string]any) { at(m, append(agg, "requests", "input_length")...)["units"] = "ms" },
		"unit outside the enum":    func(m map[string]any) { at(m, append(agg, "latency", "request_latency")...)["units"] = "msec" },
		"p999 for p99p9":           func(m map[string]any) { at(m, append(agg, "latency", "request_latency")...)["p999"] = 1.0 },
		"unknown key at the top":   func(m map[string]any) { m["extra"] = true },
		"unknown key in requests":  func(m map[string]any) { at(m, append(agg, "requests")...)["dropped"] = 1 },
		"unknown key in standardized": func(m map[string]any) {
			at(m, "scenario", "load", "standardized")["arrival"] = "poisson"
		},
		"output_seq_len distribution outside the enum": func(m map[string]any) {
			at(m, "scenario", "load", "standardized", "output_seq_len")["distribution"] = "poisson"
		},
		"unknown key in output_seq_len": func(m map[string]any) {
			at(m, "scenario", "load", "standardized", "output_seq_len")["p50"] = 1.0
		},
		"zero parallelism": func(m map[string]any) { at(m, "scenario", "load", "standardized")["parallelism"] = 0 },
	} {
		if err := plant(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// planter returns a function that validates r's JSON against the schema
// after f has planted a fault in a fresh copy of it.
func planter(t *testing.T, r *Report) func(f func(m map[string]any)) error {
	t.Helper()
	r.Run.EID = r.Run.UID
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	sch := reportSchema(t)
	return func(f func(m map[string]any)) error {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		f(m)
		return validate(t, sch, m)
	}
}
