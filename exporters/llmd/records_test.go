package llmd

import (
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/tailgate-llm/tailgate/loadgen"
	"github.com/tailgate-llm/tailgate/prompts"
	"github.com/tailgate-llm/tailgate/results"
	"github.com/tailgate-llm/tailgate/results/schema"
	"github.com/tailgate-llm/tailgate/telemetry"
)

// writeRecords writes requests.jsonl: one successful request per entry of
// lengths ({input, output} tokens), the i-th ending at ends[i] after the
// run's start, and a warm-up and a failed request that count for nothing.
func writeRecords(t *testing.T, dir results.Dir, lengths [][2]int, ends []time.Duration) {
	t.Helper()
	w, err := results.CreateRecords(dir.RecordsPath())
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range lengths {
		r := &loadgen.Record{Seq: int64(i), Class: "default", Sent: ends[i] - time.Millisecond, End: ends[i],
			InputTokens: l[0], OutputTokens: l[1], Status: 200}
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []*loadgen.Record{
		{Seq: 100, Warmup: true, End: 10 * time.Millisecond, InputTokens: 999, OutputTokens: 999, Status: 200},
		{Seq: 101, End: 20 * time.Millisecond, ErrorKind: loadgen.ErrServer, Status: 500, InputTokens: 999},
	} {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// With records that add up to summary.json, the lengths are full
// distributions (exact order statistics and the standard deviation) and
// the token rates a time series over latency.hlog's intervals, each
// request counted in the interval it ended in; the report passes the
// schema.
func TestRecordsLengthsAndTokenSeries(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := summary()
	s.Requests.OK = 4
	s.Tokens = schema.Tokens{Input: 100, Output: 40}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Run.Started = start.Format(time.RFC3339Nano)
	writeRun(t, dir, s, start)
	writeRecords(t, dir, [][2]int{{10, 4}, {20, 8}, {30, 12}, {40, 16}},
		[]time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 1200 * time.Millisecond, 1900 * time.Millisecond})
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	req := r.Results.RequestPerformance.Aggregate.Requests
	in, out := req.InputLength, req.OutputLength
	if in == nil || in.Mean != 25 || *in.Min != 10 || *in.P50 != 20 || *in.P90 != 40 || *in.Max != 40 || in.StdDev == nil ||
		*in.StdDev < 11.18 || *in.StdDev > 11.19 {
		t.Errorf("input_length %+v", in)
	}
	if out == nil || out.Mean != 10 || *out.Min != 4 || *out.Max != 16 || out.Units != "count" {
		t.Errorf("output_length %+v", out)
	}
	th := r.Results.RequestPerformance.TimeSeries.Throughput
	want := map[string][2]float64{"output": {12, 28}, "input": {30, 70}, "total": {42, 98}}
	for name, se := range map[string]*Series{"output": th.OutputTokenRate, "input": th.InputTokenRate, "total": th.TotalTokenRate} {
		if se == nil || se.Units != "tokens/s" || len(se.Series) != 2 || *se.Series[0].Value != want[name][0] ||
			*se.Series[1].Value != want[name][1] || se.Series[1].TS != "2026-01-02T03:04:06Z" {
			t.Errorf("%s token rate series %+v, want %v", name, se, want[name])
		}
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("report does not validate: %v", err)
	}

	// Records that do not add up to summary.json (here: a token total
	// that differs) are not read: the mean only, no token series.
	s.Tokens.Output = 41
	writeRun(t, dir, s, start)
	r, err = Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	req = r.Results.RequestPerformance.Aggregate.Requests
	if req.OutputLength.P50 != nil || req.OutputLength.Mean != 41.0/4 || r.Results.RequestPerformance.TimeSeries.Throughput.OutputTokenRate != nil {
		t.Errorf("disagreeing records read: %+v, %+v", req.OutputLength, r.Results.RequestPerformance.TimeSeries.Throughput)
	}
}

// A request whose input the server did not count leaves the input at its
// mean, without input or total token series; the output is still a
// distribution with its series.
func TestRecordsWithAnUncountedInput(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := summary()
	s.Requests.OK = 2
	s.Tokens = schema.Tokens{Input: 10, Output: 10}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Run.Started = start.Format(time.RFC3339Nano)
	writeRun(t, dir, s, start)
	writeRecords(t, dir, [][2]int{{10, 4}, {0, 6}}, []time.Duration{100 * time.Millisecond, 1100 * time.Millisecond})
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	req := r.Results.RequestPerformance.Aggregate.Requests
	th := r.Results.RequestPerformance.TimeSeries.Throughput
	if req.InputLength == nil || req.InputLength.Mean != 5 || req.InputLength.Min != nil || th.InputTokenRate != nil ||
		th.TotalTokenRate != nil || req.OutputLength.P50 == nil || th.OutputTokenRate == nil {
		t.Errorf("input_length %+v, output_length %+v, series %+v", req.InputLength, req.OutputLength, th)
	}
}

// Without input token counts there is no input length and no input or
// total token series, though the output ones are written.
func TestRecordsWithoutInputCounts(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := summary()
	s.Requests.OK = 2
	s.Tokens = schema.Tokens{Output: 10}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Run.Started = start.Format(time.RFC3339Nano)
	writeRun(t, dir, s, start)
	writeRecords(t, dir, [][2]int{{0, 4}, {0, 6}}, []time.Duration{100 * time.Millisecond, 1100 * time.Millisecond})
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	th := r.Results.RequestPerformance.TimeSeries.Throughput
	if r.Results.RequestPerformance.Aggregate.Requests.InputLength != nil || th.InputTokenRate != nil || th.TotalTokenRate != nil ||
		th.OutputTokenRate == nil || *th.OutputTokenRate.Series[1].Value != 6 {
		t.Errorf("requests %+v, throughput series %+v", r.Results.RequestPerformance.Aggregate.Requests, th)
	}
}

// The telemetry samples give the observability component's time series,
// one point per round in the aggregate's units: KV cache and GPU
// utilisation in percent, memory in GiB and power in Watts summed over the
// sampler's GPUs; a round where a GPU did not read its power gives no
// power point.
func TestTelemetrySeries(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := withTelemetry()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	writeRun(t, dir, s, start)
	writeTelemetry(t, dir, start)
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := r.Results.Observability.Components[0].TimeSeries
	if ts == nil {
		t.Fatal("no observability time series")
	}
	vals := func(se *Series) []float64 {
		var out []float64
		for _, p := range se.Series {
			out = append(out, *p.Value)
		}
		return out
	}
	for name, c := range map[string]struct {
		se    *Series
		units string
		want  []float64
	}{
		"kv":     {ts.KVCacheUsage, "percent", []float64{25, 50}},
		"util":   {ts.GPUUtilization, "percent", []float64{60, 100}},
		"memory": {ts.GPUMemoryUsage, "GiB", []float64{4, 4}},
		"power":  {ts.PowerConsumption, "Watts", []float64{300}},
	} {
		if c.se == nil || c.se.Units != c.units || len(c.se.Series) != len(c.want) {
			t.Errorf("%s: %+v", name, c.se)
			continue
		}
		for i, v := range vals(c.se) {
			if v < c.want[i]-1e-9 || v > c.want[i]+1e-9 {
				t.Errorf("%s point %d: %v, want %v", name, i, v, c.want[i])
			}
		}
	}
	if ts.KVCacheUsage.Series[1].TS != "2026-01-02T03:04:06Z" {
		t.Errorf("ts %s", ts.KVCacheUsage.Series[1].TS)
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("report does not validate: %v", err)
	}
	// No telemetry.jsonl: the aggregate alone.
	if err := os.Remove(dir.Path(results.TelemetryFile)); err != nil {
		t.Fatal(err)
	}
	if r, err := Read(dir); err != nil || r.Results.Observability.Components[0].TimeSeries != nil {
		t.Errorf("time series without samples: %v", err)
	}
}

// The mix's plan is the scenario's lengths: one distribution in its word,
// a mixture of classes as other with the weighted mean and the widest
// bounds, and the measured mean where a class's data sets its lengths.
func TestPlannedSeqLen(t *testing.T) {
	t.Parallel()
	f := func(v float64) *float64 { return &v }
	fixed := func(v float64) *prompts.LengthDist { return &prompts.LengthDist{Dist: prompts.DistFixed, Value: f(v)} }
	uni := func(lo, hi float64) *prompts.LengthDist {
		return &prompts.LengthDist{Dist: prompts.DistUniform, Min: f(lo), Max: f(hi)}
	}
	in := func(c prompts.ClassLengths) *prompts.LengthDist { return c.InputTokens }
	for name, c := range map[string]struct {
		classes []prompts.ClassLengths
		want    string
	}{
		"fixed":   {[]prompts.ClassLengths{{Class: "a", Share: 1, InputTokens: fixed(128)}}, `{"distribution":"fixed","value":128}`},
		"uniform": {[]prompts.ClassLengths{{Class: "a", Share: 1, InputTokens: uni(100, 300)}}, `{"distribution":"uniform","value":200,"min":100,"max":300}`},
		"normal as gaussian": {[]prompts.ClassLengths{{Class: "a", Share: 1,
			InputTokens: &prompts.LengthDist{Dist: prompts.DistNormal, Mean: f(500), StdDev: f(50), Max: f(900)}}},
			`{"distribution":"gaussian","value":500,"std_dev":50,"max":900}`},
		"lognormal as other": {[]prompts.ClassLengths{{Class: "a", Share: 1,
			InputTokens: &prompts.LengthDist{Dist: prompts.DistLognormal, Mean: f(500), StdDev: f(200)}}},
			`{"distribution":"other","value":500,"std_dev":200}`},
		"two classes of one distribution": {[]prompts.ClassLengths{{Class: "a", Share: 0.5, InputTokens: fixed(64)},
			{Class: "b", Share: 0.5, InputTokens: fixed(64)}}, `{"distribution":"fixed","value":64}`},
		"mixture": {[]prompts.ClassLengths{{Class: "a", Share: 0.75, InputTokens: fixed(100)},
			{Class: "b", Share: 0.25, InputTokens: uni(200, 600)}, {Class: "off", Share: 0}},
			`{"distribution":"other","value":175,"min":100,"max":600}`},
		"mixture with an unbounded class": {[]prompts.ClassLengths{{Class: "a", Share: 0.5, InputTokens: fixed(100)},
			{Class: "b", Share: 0.5, InputTokens: &prompts.LengthDist{Dist: prompts.DistNormal, Mean: f(300), StdDev: f(10)}}},
			`{"distribution":"other","value":200}`},
		"a class from data": {[]prompts.ClassLengths{{Class: "a", Share: 0.5, InputTokens: fixed(100)}, {Class: "b", Share: 0.5}}, `null`},
	} {
		b, _ := json.Marshal(plannedSeqLen(&prompts.LengthPlan{Classes: c.classes}, in))
		if string(b) != c.want {
			t.Errorf("%s: %s, want %s", name, b, c.want)
		}
	}

	// In a report: the plan in the scenario, the measured means in the
	// results, and it passes the schema.
	s := summary()
	s.Tokens = schema.Tokens{Input: 900, Output: 180}
	s.PlannedLengths = &prompts.LengthPlan{Classes: []prompts.ClassLengths{{Class: "a", Share: 1, InputTokens: uni(50, 150)}}}
	r := FromSummary(s, []byte("{}"))
	r.Run.EID = r.Run.UID
	st := r.Scenario.Load.Standardized
	if st.InputSeqLen.Distribution != "uniform" || st.InputSeqLen.Value != 100 || st.OutputSeqLen.Distribution != "other" ||
		st.OutputSeqLen.Value != 20 {
		t.Errorf("input %+v, output %+v: want the plan's uniform input and the measured mean output", st.InputSeqLen, st.OutputSeqLen)
	}
	if err := validate(t, reportSchema(t), r); err != nil {
		t.Errorf("report does not validate: %v", err)
	}
}

// writeTelemetry writes telemetry.jsonl: two rounds of a server's KV
// cache and two sampled GPUs (the second GPU reads no power in the second
// round), and a torn last line.
func writeTelemetry(t *testing.T, dir results.Dir, start time.Time) {
	t.Helper()
	f := func(v float64) *float64 { return &v }
	u := func(v uint64) *uint64 { return &v }
	samples := []telemetry.Sample{
		{At: start, Server: &telemetry.ServerSample{KVUsage: f(0.25)},
			GPUs: []telemetry.GPUStat{{Index: 0, Utilization: f(0.5), MemoryUsedBytes: u(1 << 30), PowerWatts: f(100)},
				{Index: 1, Utilization: f(0.7), MemoryUsedBytes: u(3 << 30), PowerWatts: f(200)}}},
		{At: start.Add(time.Second), Server: &telemetry.ServerSample{KVUsage: f(0.5)},
			GPUs: []telemetry.GPUStat{{Index: 0, Utilization: f(1), MemoryUsedBytes: u(2 << 30), PowerWatts: f(300)},
				{Index: 1, Utilization: f(1), MemoryUsedBytes: u(2 << 30)}}},
	}
	var b []byte
	for _, smp := range samples {
		l, err := json.Marshal(smp)
		if err != nil {
			t.Fatal(err)
		}
		b = append(append(b, l...), '\n')
	}
	b = append(b, `{"at":"2026-01-02T03:04:07Z","t_s":`...)
	if err := os.WriteFile(dir.Path(results.TelemetryFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The schema refuses the blocks the records, the telemetry samples and the
// mix's plan add, with a planted wrong unit, an unknown key or a wrong
// distribution word.
func TestSchemaRefusesPlantedSeries(t *testing.T) {
	dir := results.Dir(t.TempDir())
	s := withTelemetry()
	s.Requests.OK = 4
	s.Tokens = schema.Tokens{Input: 100, Output: 40}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s.Run.Started = start.Format(time.RFC3339Nano)
	f := func(v float64) *float64 { return &v }
	s.PlannedLengths = &prompts.LengthPlan{Classes: []prompts.ClassLengths{{Class: "a", Share: 1,
		InputTokens: &prompts.LengthDist{Dist: prompts.DistNormal, Mean: f(25), StdDev: f(5)},
		MaxTokens:   &prompts.LengthDist{Dist: prompts.DistUniform, Min: f(4), Max: f(16)}}}}
	writeRun(t, dir, s, start)
	writeRecords(t, dir, [][2]int{{10, 4}, {20, 8}, {30, 12}, {40, 16}},
		[]time.Duration{200 * time.Millisecond, 700 * time.Millisecond, 1200 * time.Millisecond, 1900 * time.Millisecond})
	writeTelemetry(t, dir, start)
	r, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	plant := planter(t, r)
	obj := func(m map[string]any, path ...any) map[string]any {
		var v any = m
		for _, k := range path {
			switch k := k.(type) {
			case string:
				v = v.(map[string]any)[k]
			case int:
				v = v.([]any)[k]
			}
		}
		return v.(map[string]any)
	}
	th := []any{"results", "request_performance", "time_series", "throughput"}
	obs := []any{"results", "observability", "components", 0, "time_series"}
	std := []any{"scenario", "load", "standardized"}
	req := []any{"results", "request_performance", "aggregate", "requests"}
	if err := plant(func(map[string]any) {}); err != nil {
		t.Fatalf("unchanged report refused: %v", err)
	}
	for _, k := range []any{"input_token_rate", "output_token_rate", "total_token_rate"} {
		if _, ok := obj(r2m(t, r), th...)[k.(string)]; !ok {
			t.Fatalf("no %s series to plant faults in", k)
		}
	}
	for name, f := range map[string]func(map[string]any){
		"output token rate in queries/s": func(m map[string]any) { obj(m, append(th, "output_token_rate")...)["units"] = "queries/s" },
		"input token rate in tokens/sec": func(m map[string]any) { obj(m, append(th, "input_token_rate")...)["units"] = "tokens/sec" },
		"negative token rate": func(m map[string]any) {
			obj(m, append(th, "total_token_rate", "series", 0)...)["value"] = -1.0
		},
		"token rate point without a value": func(m map[string]any) {
			delete(obj(m, append(th, "output_token_rate", "series", 0)...), "value")
		},
		"unknown key in series throughput": func(m map[string]any) {
			obj(m, th...)["image_rate"] = map[string]any{"units": "images/s", "series": []any{}}
		},
		"unknown key in a series point":     func(m map[string]any) { obj(m, append(th, "output_token_rate", "series", 0)...)["p999"] = 1.0 },
		"kv_cache_usage series in fraction": func(m map[string]any) { obj(m, append(obs, "kv_cache_usage")...)["units"] = "fraction" },
		"gpu_utilization series over 100": func(m map[string]any) {
			obj(m, append(obs, "gpu_utilization", "series", 0)...)["value"] = 150.0
		},
		"gpu_memory_usage series in bytes": func(m map[string]any) { obj(m, append(obs, "gpu_memory_usage")...)["units"] = "bytes" },
		"power_consumption series in W":    func(m map[string]any) { obj(m, append(obs, "power_consumption")...)["units"] = "W" },
		"running_requests series (not upstream's)": func(m map[string]any) {
			obj(m, obs...)["running_requests"] = map[string]any{"units": "count", "series": []any{}}
		},
		"empty observability time series": func(m map[string]any) {
			obj(m, "results", "observability", "components", 0)["time_series"] = map[string]any{}
		},
		"input_length stddev negative": func(m map[string]any) { obj(m, append(req, "input_length")...)["stddev"] = -1.0 },
		"input_length in tokens":       func(m map[string]any) { obj(m, append(req, "input_length")...)["units"] = "tokens" },
		"distribution normal (tailgate's word)": func(m map[string]any) {
			obj(m, append(std, "input_seq_len")...)["distribution"] = "normal"
		},
		"distribution lognormal": func(m map[string]any) {
			obj(m, append(std, "input_seq_len")...)["distribution"] = "lognormal"
		},
		"gaussian without std_dev": func(m map[string]any) { delete(obj(m, append(std, "input_seq_len")...), "std_dev") },
		"uniform without max":      func(m map[string]any) { delete(obj(m, append(std, "output_seq_len")...), "max") },
		"fixed with bounds": func(m map[string]any) {
			obj(m, append(std, "output_seq_len")...)["distribution"] = "fixed"
		},
		"fractional min": func(m map[string]any) { obj(m, append(std, "output_seq_len")...)["min"] = 4.5 },
		"stddev for std_dev": func(m map[string]any) {
			sl := obj(m, append(std, "input_seq_len")...)
			sl["stddev"] = sl["std_dev"]
			delete(sl, "std_dev")
		},
	} {
		if err := plant(f); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// r2m is r as the JSON object it is written as.
func r2m(t *testing.T, r *Report) map[string]any {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}
